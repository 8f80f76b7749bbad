/**
 * Phase 6: the tool as a child process:
 *   <tool> --args <args.json> --key <key> --result-dir <dir> --operation-key <key>
 * with BATON_SSH_PASSPHRASE in its environment, under an overall deadline (ms). On expiry the
 * tool gets SIGTERM (it records what it saw), then SIGKILL after a grace period.
 */
import { type ChildProcess, spawn } from "node:child_process";

/** How the tool ended. `spawnError` is an errno code such as ENOENT or EACCES. */
export interface ToolExit {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  spawnError?: string;
  startedAt: number;
  finishedAt: number;
}

let current: ChildProcess | undefined;

/** The running tool, if any (the main step's signal handler forwards cancellation to it). */
export function currentTool(): ChildProcess | undefined {
  return current;
}

/** Runs the tool; output is streamed to this step's log. Never rejects. */
export function runTool(
  toolPath: string,
  cliArgs: readonly string[],
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
  graceMs = 5_000,
): Promise<ToolExit> {
  return new Promise((resolve) => {
    const startedAt = Date.now();
    let timedOut = false;
    let killTimer: NodeJS.Timeout | undefined;
    const child = spawn(toolPath, [...cliArgs], { env, stdio: ["ignore", "pipe", "pipe"] });
    current = child;
    child.stdout?.on("data", (d: Buffer) => process.stdout.write(d));
    child.stderr?.on("data", (d: Buffer) => process.stdout.write(d));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGTERM");
      killTimer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    }, timeoutMs);
    let spawnError: string | undefined;
    let done = false;
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(killTimer);
      current = undefined;
      resolve({ exitCode: code, signal, timedOut, spawnError, startedAt, finishedAt: Date.now() });
    };
    child.on("error", (e: NodeJS.ErrnoException) => {
      spawnError = e.code ?? e.message;
      // A spawn failure may not be followed by "close": settle shortly either way.
      setTimeout(() => finish(null, null), 100);
    });
    child.on("close", (code, signal) => finish(code, signal));
  });
}
