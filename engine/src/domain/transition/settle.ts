/**
 * What happens when a step run settles (succeeded, failed, dispatch_failed, unknown):
 * move forward, retry, pause, compensate, or hand over to an operator
 * (docs/state-machine.md "Failure handling").
 */
import type { StepRun } from "../types.ts";
import { beginCompensation, continueCompensation } from "./compensation.ts";
import { type Draft, describe, stepOf } from "./draft.ts";
import { beginForwardAtCursor } from "./forward.ts";
import { guards } from "./guards.ts";
import { backoffMs } from "./limits.ts";
import { sendAction } from "./send.ts";

/** Call after changing `sr` to a settled state. */
export function settled(d: Draft, sr: StepRun): void {
  const r = d.release;
  sr.finished_at = d.now;
  if (sr.direction === "fwd" && r.state === "compensating") {
    // A forward step run that was in flight when compensation began: its outcome is only
    // recorded; compensation may now proceed.
    continueCompensation(d);
    return;
  }
  if (!guards.isCurrent(r, sr)) return;
  if (sr.direction === "fwd") settledForward(d, sr);
  else settledBackward(d, sr);
}

function settledForward(d: Draft, sr: StepRun): void {
  const r = d.release;
  const step = stepOf(r, sr);
  if (sr.state === "succeeded") {
    if (r.state === "paused") {
      r.state = "running";
      d.accept(`[engine] release ${r.id} running again: ${sr.id} succeeded`, sr.id);
    }
    r.reason = null;
    r.cursor = sr.step_index + 1;
    beginForwardAtCursor(d);
    return;
  }
  const why = `${describe(r, sr)} ended ${sr.state}${sr.last_error ? `: ${sr.last_error}` : ""}`;
  if (retriedWithinBudget(d, sr, step.retries, why)) return;
  if (sr.kind === "runner" && sr.state === "unknown") {
    // F04: an unobserved runner outcome is never success and never a blind compensation.
    pause(d, `${why}; observe the lane, then retry the step run or abort`);
    return;
  }
  if (step.on_failure === "pause") {
    pause(d, `${why}; the step's policy is pause: retry the step run or abort`);
    return;
  }
  beginCompensation(d, why);
}

function settledBackward(d: Draft, sr: StepRun): void {
  const r = d.release;
  const step = stepOf(r, sr);
  if (sr.state === "succeeded") {
    r.state = "compensating";
    r.reason = null;
    r.cursor = sr.step_index - 1;
    d.accept(`[engine] ${describe(r, sr)} succeeded`, sr.id);
    continueCompensation(d);
    return;
  }
  const why = `${describe(r, sr)} ended ${sr.state}${sr.last_error ? `: ${sr.last_error}` : ""}`;
  if (retriedWithinBudget(d, sr, step.retries, why)) return;
  r.state = "needs_operator";
  r.reason = `${why}; fix the lane by hand, then retry the step run`;
  d.accept(`[engine] release ${r.id} needs an operator: ${r.reason}`, sr.id);
}

/**
 * Re-sends a failed step run's action (same operation key, backoff) while `retries` allows,
 * for either direction. Returns false when the step run is not retryable or the budget is spent.
 */
function retriedWithinBudget(d: Draft, sr: StepRun, retries: number, why: string): boolean {
  if (!(sr.state === "failed" || sr.state === "dispatch_failed") || sr.retries_used >= retries) {
    return false;
  }
  sr.retries_used += 1;
  sendAction(d, sr, d.now + backoffMs(sr.retries_used));
  d.accept(
    `[engine] ${why}; retry ${sr.retries_used} of ${retries} with the same operation key`,
    sr.id,
  );
  return true;
}

function pause(d: Draft, reason: string): void {
  const r = d.release;
  r.state = "paused";
  r.reason = reason;
  d.accept(`[engine] release ${r.id} paused: ${reason}`);
}
