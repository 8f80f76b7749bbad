/**
 * Phase 6: the tool as a child process:
 *   <tool> --args <args.json> --key <key> --result-dir <dir> --operation-key <key>
 * with BATON_SSH_PASSPHRASE, BATON_RELEASE_ID and BATON_RELEASE_GENERATION (the payload's
 * `release.id` / `release.generation`, for the target's generation fence) in its environment, under an overall deadline (ms). On expiry the
 * tool gets SIGTERM (it records what it saw), then SIGKILL after a grace period. Its output is
 * relayed to the step log as plain text: workflow commands are stopped while it runs.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { stepCommands } from "./workflow-commands.ts";

/** How the tool ended. `spawnError` is an errno code such as ENOENT or EACCES. */
export interface ToolExit {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  spawnError?: string;
  /** Last OUTPUT_TAIL_CHARS of the tool's stdout + stderr (for the log when it ends abnormally). */
  outputTail: string;
  startedAt: number;
  finishedAt: number;
}

let current: ChildProcess | undefined;

/** How much of the tool's own output is kept for the log (characters). */
export const OUTPUT_TAIL_CHARS = 16 * 1024;

/** Sends `signal` to the tool's whole process group (falls back to the tool alone). */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid) process.kill(-child.pid, signal);
  } catch {
    child.kill(signal);
  }
}

/** The running tool's pid (also its process group's id), if one runs. */
export function currentToolPid(): number | undefined {
  return current?.pid;
}

/** Forwards a cancellation to the running tool, if any. Returns whether one was running. */
export function stopCurrentTool(signal: NodeJS.Signals = "SIGTERM"): boolean {
  if (!current) return false;
  killGroup(current, signal);
  return true;
}

/**
 * Environment variables the tool must not inherit: every action input (`INPUT_*`: the callback
 * secret, the SSH key text, tokens) and the runner's own credentials (OIDC token request, the
 * runtime token). The tool gets the key as a file and the passphrase as BATON_SSH_PASSPHRASE.
 */
const WITHHELD =
  /^(INPUT_|ACTIONS_ID_TOKEN_REQUEST_|ACTIONS_RUNTIME_TOKEN$|ACTIONS_RESULTS_URL$|ACTIONS_CACHE_URL$)/i;

/** The tool's environment: the step's, minus {@link WITHHELD}, plus `extra`. */
export function toolEnvironment(
  env: NodeJS.ProcessEnv,
  extra: Record<string, string>,
): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) if (!WITHHELD.test(k)) out[k] = v;
  return { ...out, ...extra };
}

/**
 * Runs the tool; output is streamed to this step's log as plain text (workflow commands stopped
 * from before the spawn until it ended). Never rejects.
 */
export function runTool(
  toolPath: string,
  cliArgs: readonly string[],
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
  graceMs = 5_000,
): Promise<ToolExit> {
  return new Promise((resolve) => {
    const startedAt = Date.now();
    stepCommands.pause();
    let timedOut = false;
    let killTimer: NodeJS.Timeout | undefined;
    // Own process group, so a deadline or a cancellation reaches the tool's children too
    // (a grandchild holding the output pipes open would otherwise outlive the tool).
    const child = spawn(toolPath, [...cliArgs], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    current = child;
    let outputTail = "";
    const onOutput = (d: Buffer) => {
      stepCommands.write(d);
      outputTail = (outputTail + d.toString("utf8")).slice(-OUTPUT_TAIL_CHARS);
    };
    child.stdout?.on("data", onOutput);
    child.stderr?.on("data", onOutput);
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child, "SIGTERM");
      killTimer = setTimeout(() => killGroup(child, "SIGKILL"), graceMs);
    }, timeoutMs);
    let spawnError: string | undefined;
    let done = false;
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(killTimer);
      current = undefined;
      stepCommands.resume();
      resolve({
        exitCode: code,
        signal,
        timedOut,
        spawnError,
        outputTail,
        startedAt,
        finishedAt: Date.now(),
      });
    };
    child.on("error", (e: NodeJS.ErrnoException) => {
      spawnError = e.code ?? e.message;
      // A spawn failure may not be followed by "close": settle shortly either way.
      setTimeout(() => finish(null, null), 100);
    });
    child.on("close", (code, signal) => finish(code, signal));
    // If something still holds the pipes after the tool exited, do not wait for it for long.
    child.on("exit", (code, signal) => setTimeout(() => finish(code, signal), 1_000).unref());
  });
}
