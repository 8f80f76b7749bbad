/**
 * Operator events: abort, resume, retry a step run (docs/state-machine.md "Operator events";
 * field case F14).
 */
import type { ReleaseEvent, StepRun } from "../types.ts";
import { beginCompensation } from "./compensation.ts";
import { type Draft, describe, type Refusal, stepRunAt } from "./draft.ts";
import { beginForwardAtCursor } from "./forward.ts";
import { guards } from "./guards.ts";
import { sendAction } from "./send.ts";

type Ev<T extends ReleaseEvent["type"]> = Extract<ReleaseEvent, { type: T }>;

export function abort(d: Draft, e: Ev<"abort">): Refusal | undefined {
  const r = d.release;
  if (guards.isTerminal(r)) {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is ${r.state}; undoing a finished release is a new release`,
    };
  }
  if (r.state === "compensating" || r.state === "needs_operator") {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is already ${r.state}; retry the waiting step run instead`,
    };
  }
  const by = `by ${e.actor}${e.reason ? `: ${e.reason}` : ""}`;
  if (r.state === "pending") {
    r.state = "aborted";
    r.generation += 1;
    r.reason = `aborted ${by}`;
    d.accept(`[engine] release ${r.id} aborted before it started (${by})`);
    return undefined;
  }
  // running / paused. A dispatch no runner has bound yet is cancelled: the generation moves
  // on, so its preflight is refused and it can never act.
  for (const sr of r.step_runs) {
    if (sr.direction === "fwd" && sr.kind === "runner" && guards.awaitsFirstRun(sr)) {
      sr.state = "failed";
      sr.finished_at = d.now;
      sr.last_error = "cancelled by abort before a runner started it";
      d.accept(`[engine] ${describe(r, sr)} cancelled by abort before a runner started it`, sr.id);
    }
  }
  const touched = r.step_runs.some(
    (sr) => sr.direction === "fwd" && (guards.inFlight(sr) || guards.mayHaveTakenEffect(sr)),
  );
  if (!touched) {
    // F14a: nothing can have taken effect, so there is nothing to undo.
    r.state = "aborted";
    r.generation += 1;
    r.reason = `aborted ${by}`;
    d.accept(`[engine] release ${r.id} aborted (${by}); no step took effect, nothing to undo`);
    return undefined;
  }
  beginCompensation(d, `aborted ${by}`);
  return undefined;
}

export function resume(d: Draft, e: Ev<"resume">): Refusal | undefined {
  const r = d.release;
  if (r.state !== "paused") {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is ${r.state}; only a paused release resumes`,
    };
  }
  const sr = stepRunAt(r, r.cursor, "fwd");
  r.state = "running";
  r.reason = null;
  d.accept(`[engine] release ${r.id} resumed by ${e.actor} at step ${r.cursor}`);
  if (!sr) {
    beginForwardAtCursor(d);
  } else if (sr.state !== "succeeded" && !guards.inFlight(sr)) {
    sendAction(d, sr, null);
    d.accept(`[engine] ${describe(r, sr)} sent again on resume with the same operation key`, sr.id);
  }
  return undefined;
}

export function retry(d: Draft, sr: StepRun, e: Ev<"retry">): Refusal | undefined {
  const r = d.release;
  if (!guards.waitsOnOperator(r, sr)) {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] ${sr.id} cannot be retried: it is ${sr.state} and release ${r.id} is ${r.state} at step ${r.cursor}; only the step run a paused or needs_operator release waits on can be retried`,
    };
  }
  r.state = sr.direction === "fwd" ? "running" : "compensating";
  r.reason = null;
  sendAction(d, sr, null);
  d.accept(
    `[engine] ${describe(r, sr)} retried by ${e.actor} with the same operation key; release ${r.id} is ${r.state} again`,
    sr.id,
  );
  return undefined;
}
