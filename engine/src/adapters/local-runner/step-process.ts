/**
 * Runs one step of the action (`node <file>`) as a child process, the way the runner does:
 * in the workspace, with the step's environment, its output masked into the run's log, and a
 * hard time bound (then SIGTERM to the whole process group, SIGKILL after a grace period).
 * The process is started from a worker thread (node/spawn-off-thread.ts), so starting twenty
 * jobs at once does not stall the engine's event loop.
 */
import { spawnOffThread } from "../../node/spawn-off-thread.ts";
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
  const child = spawnOffThread(process.execPath, [file], { cwd, env, detached: true });
  let timedOut = false;
  let cancelled = false;
  let exited = false;
  let killTimer: NodeJS.Timeout | undefined;
  void child.exited.then(() => {
    exited = true;
  });
  const stop = () => {
    const signalGroup = (s: NodeJS.Signals) => {
      if (!exited) child.kill(s, true);
    };
    signalGroup("SIGTERM");
    killTimer ??= setTimeout(() => signalGroup("SIGKILL"), KILL_GRACE_MS);
  };
  const bound = setTimeout(() => {
    timedOut = true;
    stop();
  }, timeoutMs);
  child.onStdout = (d) => out.write(d);
  child.onStderr = (d) => err.write(d);
  const exit = child.closed.then((e): StepExit => {
    clearTimeout(bound);
    if (killTimer) clearTimeout(killTimer);
    if (e.error) err.write(`[local-runner] cannot start node ${file}: ${e.error}\n`);
    out.end();
    err.end();
    return { code: e.code, signal: e.signal, timedOut, cancelled };
  });
  return {
    exit,
    cancel() {
      cancelled = true;
      stop();
    },
  };
}
