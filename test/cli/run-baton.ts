/**
 * Runs the `baton` CLI for tests. `baton` calls `runCli(argv, io)` in this process (about 10 ms a
 * command, against seconds for a Node process compiling the CLI through tsx); `batonBin` and
 * `serveBin` run it as a process, for what only a process shows (the exit of a failed `serve`,
 * the demo, signals): the CLI's bundle (test/support/bundles.ts), or with `real: true` the real
 * `bin/baton.mjs` as a user runs it (one smoke test does).
 */
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { runCli } from "../../engine/src/cli/program.ts";
import { bundled } from "../support/bundles.ts";
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

/** The CLI's entry, which bin/baton.mjs runs through tsx and `cliBundle` bundles. */
const CLI_ENTRY = "engine/src/cli/main.ts";

/** Path of the CLI's bundle (built on first use, shared by every test process of the run). */
export function cliBundle(): Promise<string> {
  return bundled(CLI_ENTRY);
}

/**
 * Runs `baton args…` as a child process with `env`, from `cwd` (the CLI's bundle; with `real`,
 * the real `bin/baton.mjs`); killed after `timeoutMs`.
 */
export async function batonBin(
  args: string[],
  env: Record<string, string | undefined> = {},
  o: { cwd?: string; timeoutMs?: number; onStdout?: (all: string) => void; real?: boolean } = {},
): Promise<Run> {
  const entry = o.real ? BIN : await cliBundle();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry, ...args], {
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
 * Starts `baton serve --port P --host 127.0.0.1` (the CLI's bundle) with `env` on a port of its own
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
  return cliBundle().then((bundle) =>
    onFreshPort("baton serve", (port) => serveOn(bundle, port, env, o)),
  );
}

function serveOn(
  bundle: string,
  port: number,
  env: Record<string, string | undefined>,
  o: { cwd?: string; timeoutMs?: number; wrap?: (argv: string[]) => [string, string[]] },
): Promise<ServeProcess> {
  const argv = [process.execPath, bundle, "serve", "--port", String(port), "--host", "127.0.0.1"];
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
