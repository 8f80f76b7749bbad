/**
 * Runs the `baton` CLI for tests. `baton` calls `runCli(argv, io)` in this process (about 10 ms a
 * command, against seconds for a Node process compiling the CLI through tsx); `batonBin` spawns
 * the real `bin/baton.mjs`, for what only a process shows (the exit of a failed `serve`, the
 * tsconfig found from another working directory, the demo, signals).
 */
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { runCli } from "../../engine/src/cli/program.ts";
import { onFreshPort, PortTaken, saysPortTaken } from "../support/ports.ts";

export const ROOT = path.resolve(import.meta.dirname, "../..");
export const BIN = path.join(ROOT, "bin/baton.mjs");

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Environment without the caller's BATON_* settings, plus `env`. */
export function cleanEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith("BATON_") && k !== "PORT" && k !== "DATABASE_URL",
    ),
  );
  return { ...base, NO_COLOR: "1", ...env };
}

/**
 * Runs `baton args…` in process with `env` as the command's environment (`cleanEnv(env)`, as
 * `batonBin` gives its child). Fails the test when the command has not ended after `timeoutMs`.
 * Commands that must run as a process (`serve`, `demo`) are refused: use `batonBin`.
 */
export async function baton(
  args: string[],
  env: Record<string, string | undefined> = {},
  o: { timeoutMs?: number; onStdout?: (all: string) => void } = {},
): Promise<Run> {
  if (args[0] === "serve" || args[0] === "demo")
    throw new Error(`[test] baton ${args[0]} runs as a process: use batonBin`);
  let stdout = "";
  let stderr = "";
  const io = {
    out: {
      write: (s: string) => {
        stdout += s;
        o.onStdout?.(stdout);
        return true;
      },
    },
    err: {
      write: (s: string) => {
        stderr += s;
        return true;
      },
    },
    env: cleanEnv(env),
  };
  let timer: NodeJS.Timeout | undefined;
  const limit = o.timeoutMs ?? 60_000;
  try {
    const code = await Promise.race([
      runCli(args, io),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`[test] baton ${args.join(" ")} ran over ${limit} ms`)),
          limit,
        );
      }),
    ]);
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}

/** Runs the real `bin/baton.mjs args…` as a child process with `env`, from `cwd`; killed after `timeoutMs`. */
export function batonBin(
  args: string[],
  env: Record<string, string | undefined> = {},
  o: { cwd?: string; timeoutMs?: number; onStdout?: (all: string) => void } = {},
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: o.cwd ?? ROOT,
      env: cleanEnv(env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
      o.onStdout?.(stdout);
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), o.timeoutMs ?? 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A `baton serve` child process (see `serveBin`). */
export interface ServeProcess {
  child: ChildProcess;
  port: number;
  url: string;
  /** Its stdout and stderr so far, interleaved. */
  output(): string;
  /** Its stderr so far. */
  stderr(): string;
  /** Resolves with its exit code once it has exited and its output has been read. */
  exited: Promise<number | null>;
}

/**
 * Starts the real `bin/baton.mjs serve --port P --host 127.0.0.1` with `env` on a port of its own
 * (proposed, and another one when the engine says the address is in use: test/support/ports.ts);
 * resolves once it says it listens. `wrap` turns the command into another (e.g. a shell that
 * lowers a limit, then `exec`s it). Rejects with its output when it exits or has not listened
 * within `timeoutMs`. The caller stops it (SIGTERM) and removes what it made.
 */
export function serveBin(
  env: Record<string, string | undefined>,
  o: {
    cwd?: string;
    timeoutMs?: number;
    wrap?: (argv: string[]) => [string, string[]];
  } = {},
): Promise<ServeProcess> {
  return onFreshPort("baton serve", (port) => serveOn(port, env, o));
}

function serveOn(
  port: number,
  env: Record<string, string | undefined>,
  o: { cwd?: string; timeoutMs?: number; wrap?: (argv: string[]) => [string, string[]] },
): Promise<ServeProcess> {
  const argv = [process.execPath, BIN, "serve", "--port", String(port), "--host", "127.0.0.1"];
  const [cmd, args] = o.wrap ? o.wrap(argv) : [argv[0] as string, argv.slice(1)];
  const child = spawn(cmd, args, {
    cwd: o.cwd ?? ROOT,
    env: cleanEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  // On "close": its output has all been read by then.
  const exited = new Promise<number | null>((r) => child.once("close", (code) => r(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`[test] serve did not listen within ${o.timeoutMs ?? 60_000} ms: ${out}`));
    }, o.timeoutMs ?? 60_000);
    child.stderr.on("data", (d) => {
      out += d;
      err += d;
    });
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("[engine] listening on")) {
        clearTimeout(timer);
        resolve({
          child,
          port,
          url: `http://127.0.0.1:${port}`,
          output: () => out,
          stderr: () => err,
          exited,
        });
      }
    });
    child.on("close", () => {
      clearTimeout(timer);
      reject(
        saysPortTaken(out) ? new PortTaken(port, out) : new Error(`[test] serve exited: ${out}`),
      );
    });
  });
}
