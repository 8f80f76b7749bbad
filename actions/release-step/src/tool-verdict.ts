/**
 * What the action itself decides about a step, written into the result files: a tool that could
 * not run, ran out of time or crashed, a missing tool, an unusable key. A tool that reported its
 * own result keeps it.
 */
import {
  appendLog,
  type Check,
  readResults,
  writeChecks,
  writeOutcome,
} from "../../../scripts/lib/result.ts";
import type { ToolExit } from "./run-tool.ts";

/** A failure the action decided: the status word and the check it adds. */
export interface ActionVerdict {
  status: string;
  check: Check;
}

/**
 * Records `verdict` into the result files in `dir`: the check (after the tool's own checks when
 * `keepChecks`), the status with overall `fail`, the message in the log.
 */
export function recordVerdict(dir: string, verdict: ActionVerdict, keepChecks: boolean): void {
  const current = readResults(dir);
  const existing = keepChecks && Array.isArray(current.checks) ? (current.checks as Check[]) : [];
  writeChecks(dir, [...existing, verdict.check]);
  writeOutcome(dir, verdict.status, "fail");
  appendLog(dir, verdict.check.message ?? verdict.status);
}

/** Classifies a tool run that did not end cleanly; null when the files stand as written. */
export function judgeToolExit(exit: ToolExit, dir: string): ActionVerdict | null {
  const base = {
    name: "tool",
    exit_code: exit.exitCode,
    signal: exit.signal?.replace(/^SIG/, "") ?? null,
    duration_ms: exit.finishedAt - exit.startedAt,
  };
  if (exit.spawnError || exit.exitCode === 127 || exit.exitCode === 126) {
    return {
      status: "failed",
      check: {
        ...base,
        status: "failed",
        class: "tool_not_found",
        message: `[action] the tool could not be executed (${exit.spawnError ?? `exit ${exit.exitCode}`})`,
      },
    };
  }
  if (exit.timedOut) {
    return {
      status: "timeout",
      check: {
        ...base,
        status: "timeout",
        class: "tool_timeout",
        message: "[action] the tool exceeded its overall deadline and was stopped",
      },
    };
  }
  const files = readResults(dir);
  if (exit.exitCode === 0 && exit.signal === null) return null;
  if (files.status !== "not_run" && files.overall === "fail") return null; // the tool reported its own failure
  return {
    status: "failed",
    check: {
      ...base,
      status: "failed",
      class: "tool_crashed",
      message: `[action] the tool ended with ${exit.signal ? `signal ${exit.signal}` : `exit ${exit.exitCode}`} without reporting a failure; treated as failed`,
    },
  };
}
