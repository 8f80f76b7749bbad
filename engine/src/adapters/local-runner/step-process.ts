/**
 * Runs one step of the action (`node <file>`) as a child process, the way the runner does:
 * in the workspace, with the step's environment, its output masked into the run's log, and a
 * hard time bound (then SIGTERM to the whole process group, SIGKILL after a grace period).
 */
import { spawn } from "node:child_process";
import type { MaskingLineWriter } from "./mask.ts";

/** How a step ended. `signal` is set when it was killed; `timedOut` when we killed it. */
export interface StepExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  cancelled: boolean;
}

/** Grace between SIGTERM and SIGKILL (ms). */
const KILL_GRACE_MS = 3_000;

/** A started step: `cancel()` stops it like a run cancellation; `exit` settles once it ended. */
export interface StepHandle {
  exit: Promise<StepExit>;
  cancel(): void;
}

/**
 * Starts `node <file>`.
 * @param timeoutMs the step's bound; past it the step is killed and `timedOut` is true.
 */
export function startStep(
  file: string,
  cwd: string,
  env: Record<string, string>,
  timeoutMs: number,
  out: MaskingLineWriter,
  err: MaskingLineWriter,
): StepHandle {
  // Own process group, so the tools and ssh sessions the action starts are stopped with it.
  const child = spawn(process.execPath, [file], {
    cwd,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let timedOut = false;
  let cancelled = false;
  let killTimer: NodeJS.Timeout | undefined;
  const stop = () => {
    const signalGroup = (s: NodeJS.Signals) => {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
      try {
        process.kill(-child.pid, s);
      } catch {
        child.kill(s);
      }
    };
    signalGroup("SIGTERM");
    killTimer ??= setTimeout(() => signalGroup("SIGKILL"), KILL_GRACE_MS);
  };
  const bound = setTimeout(() => {
    timedOut = true;
    stop();
  }, timeoutMs);
  child.stdout.on("data", (d: Buffer) => out.write(d));
  child.stderr.on("data", (d: Buffer) => err.write(d));
  const exit = new Promise<StepExit>((resolve) => {
    let settled = false;
    const settle = (code: number | null, signal: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(bound);
      if (killTimer) clearTimeout(killTimer);
      out.end();
      err.end();
      resolve({ code, signal, timedOut, cancelled });
    };
    child.on("error", (e) => {
      err.write(`[local-runner] cannot start node ${file}: ${e.message}\n`);
      settle(127, null);
    });
    child.on("close", (code, signal) => settle(code, signal));
  });
  return {
    exit,
    cancel() {
      cancelled = true;
      stop();
    },
  };
}
