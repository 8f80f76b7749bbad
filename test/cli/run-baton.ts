/** Runs `bin/baton.mjs` as a child process (async, so an in-process engine keeps serving). */
import { spawn } from "node:child_process";
import path from "node:path";

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

/** Runs `baton args…` with `env`, from `cwd`; killed after `timeoutMs`. */
export function baton(
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
