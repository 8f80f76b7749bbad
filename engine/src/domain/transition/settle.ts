/**
 * What happens when a step run settles (succeeded, failed, dispatch_failed, unknown):
 * move forward, retry, pause, compensate, or hand over to an operator
 * (docs/state-machine.md "Failure handling").
 */

import { switchBackCheckWords } from "../blue-green.ts";
import { conformanceFailureWords } from "../conformance.ts";
import { isRestoreRun, latestRestoreRun } from "../restore-state.ts";
import type { Release, StepRun } from "../types.ts";
import { suggestedCommand } from "../verbs.ts";
import { beginCompensation, continueCompensation } from "./compensation.ts";
import { type Draft, describe, stepOf } from "./draft.ts";
import { beginForwardAtCursor } from "./forward.ts";
import { beginGate, endsGatedWave } from "./gate.ts";
import { guards } from "./guards.ts";
import { holdVerb, holdWords } from "./holds.ts";
import { parallelWaveOf, releaseRerunDeadline, stuckInWave, waitsOnRerun } from "./lanes.ts";
import { backoffMs } from "./limits.ts";
import { endOnFailedProbe, isProbeRun, probePassed } from "./probe.ts";
import { restoreSettled } from "./restore.ts";
import { sendAction } from "./send.ts";
import { watchExposure } from "./stop.ts";
import { beginVerification } from "./verify.ts";

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
  if (isRestoreRun(r, sr)) {
    // The restore after the rollback: done, its lanes are verified again (then rolled_back).
    if (restoreSettled(d, sr))
      beginVerification(
        d,
        "compensation",
        latestRestoreRun(r)?.actor ?? "engine",
        "after the restore",
      );
    return;
  }
  if (sr.direction === "fwd") settledForward(d, sr);
  else settledBackward(d, sr);
}

function settledForward(d: Draft, sr: StepRun): void {
  const r = d.release;
  const step = stepOf(r, sr);
  if (isProbeRun(r, sr)) {
    // A rollback's read-only probe: no retry, no re-run window, nothing to compensate.
    if (sr.state !== "succeeded") {
      endOnFailedProbe(d, sr);
      return;
    }
    // The probes run concurrently: the cursor moves to the first one still asking.
    probePassed(d, sr);
    if (r.hold) {
      d.accept(
        `[engine] ${describe(r, sr)} succeeded; release ${r.id} stays paused (${holdWords(r.hold)}); nothing new starts until ${holdVerb(r, r.hold)}`,
        sr.id,
      );
      return;
    }
    beginForwardAtCursor(d);
    return;
  }
  if (sr.state === "succeeded") {
    // A traffic assert above 0%: the stop condition counts from this wave's exposure.
    watchExposure(d, sr);
    if (parallelWaveOf(r, sr.step_index) !== null) {
      // A lane of a parallel wave moved on; another lane may still hold the release paused.
      const waiting = stuckInWave(r).filter((s) => s.id !== sr.id);
      if (r.state === "paused" && waiting.length > 0) {
        d.accept(
          `[engine] ${describe(r, sr)} succeeded; release ${r.id} stays paused on ${waiting.map((s) => s.id).join(", ")}`,
          sr.id,
        );
        return;
      }
      if (r.hold) {
        d.accept(
          `[engine] ${describe(r, sr)} succeeded; release ${r.id} stays paused (${holdWords(r.hold)}); nothing new starts until ${holdVerb(r, r.hold)}`,
          sr.id,
        );
        return;
      }
      if (r.state === "paused") {
        r.state = "running";
        d.accept(`[engine] release ${r.id} running again: ${sr.id} succeeded`, sr.id);
      }
      r.reason = null;
      beginForwardAtCursor(d);
      return;
    }
    if (r.hold) {
      // An operator's pause: what was in flight settled; nothing new starts. A gated wave's
      // gate still begins (it only observes exposure already in place; a fail compensates).
      r.cursor = sr.step_index + 1;
      d.accept(
        `[engine] ${describe(r, sr)} succeeded; release ${r.id} stays paused (${holdWords(r.hold)}); nothing new starts until ${holdVerb(r, r.hold)}`,
        sr.id,
      );
      if (endsGatedWave(d, sr)) beginGate(d, sr);
      return;
    }
    if (r.state === "paused") {
      r.state = "running";
      d.accept(`[engine] release ${r.id} running again: ${sr.id} succeeded`, sr.id);
    }
    r.reason = null;
    r.cursor = sr.step_index + 1;
    // A gated wave's last step (its traffic assert): held at the gate before the next wave.
    if (endsGatedWave(d, sr)) beginGate(d, sr);
    else beginForwardAtCursor(d);
    return;
  }
  const ended = `${describe(r, sr)} ended ${sr.state}${sr.last_error ? `: ${sr.last_error}` : ""}`;
  // A conformance check names itself, says exposure stayed 0 and what to do.
  const why =
    conformanceFailureWords(step, ended) ??
    (r.lineage?.switch_back ? switchBackCheckWords(step, r.lineage.of, ended) : null) ??
    ended;
  if (r.hold) {
    // A failure is not held by an operator's pause: the step's own policy decides (retry,
    // pause for an operator, re-run window, compensation), as without the pause.
    d.accept(
      `[engine] ${why}; the pause (${holdWords(r.hold)}) gives way to the step's failure handling`,
      sr.id,
    );
    r.hold = null;
    r.state = "running";
    r.reason = null;
  }
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
  const window = step.rerun_window_ms ?? 0;
  if (sr.kind === "runner" && sr.state === "failed" && sr.attempts.length > 0 && window > 0) {
    awaitRerun(d, sr, window, why);
    return;
  }
  beginCompensation(d, why);
}

/**
 * The re-run window (docs/state-machine.md "The re-run window"): a failed forward runner step
 * run waits, paused, for a re-run of its job from the Actions UI (the same run id, run attempt
 * N+1) until `now + window`; a durable `rerun` deadline compensates if none came.
 */
function awaitRerun(d: Draft, sr: StepRun, window: number, why: string): void {
  const r = d.release;
  const until = d.now + window;
  r.state = "paused";
  sr.rerun_deadline = until;
  r.rerun_deadline = releaseRerunDeadline(r);
  const first = r.step_runs.find(
    (s) => s.id !== sr.id && waitsOnRerun(s) && s.rerun_deadline === r.rerun_deadline,
  );
  r.reason = `${why}; re-run the failed job before ${utcMinute(until, d.now)}, or the release compensates${first && typeof r.rerun_deadline === "number" ? ` (at ${utcMinute(r.rerun_deadline, d.now)} already, unless ${first.id} is re-run by then)` : ""}`;
  d.emit({
    type: "deadline",
    step_run_id: sr.id,
    kind: "rerun",
    dispatch: sr.dispatch,
    attempt: sr.attempts.length,
    at: until,
  });
  d.accept(
    `[engine] release ${r.id} paused for a re-run of ${sr.id} until ${new Date(until).toISOString()}: ${r.reason}`,
    sr.id,
    { rerun_deadline: until },
  );
}

/**
 * `15:32 UTC`, or `2026-12-02 00:15 UTC` when not on the UTC day of `now`. Rounded down to the
 * minute, so the time people read is never later than the real deadline.
 */
export function utcMinute(at: number, now: number): string {
  const iso = new Date(at).toISOString();
  const sameDay = iso.slice(0, 10) === new Date(now).toISOString().slice(0, 10);
  return `${sameDay ? "" : `${iso.slice(0, 10)} `}${iso.slice(11, 16)} UTC`;
}

/**
 * What the runner that reported `sr` should tell people, in one sentence, given the release
 * after its callback: the failed job's summary and error print it.
 */
export function runnerAdvice(r: Release, sr: StepRun, now: number): string | null {
  if (sr.state === "succeeded") return null;
  const own = sr.rerun_deadline ?? r.rerun_deadline;
  if (r.state === "paused" && typeof own === "number") {
    const sooner =
      typeof r.rerun_deadline === "number" && r.rerun_deadline < own
        ? ` (at ${utcMinute(r.rerun_deadline, now)} already if another lane's failed job is not re-run by then)`
        : "";
    return `re-run this job before ${utcMinute(own, now)}, or release ${r.id} compensates${sooner}`;
  }
  if (r.state === "paused") {
    return `release ${r.id} is paused on ${sr.id}: re-run this job, or an operator retries (${suggestedCommand("retry", { target: sr.id })}) or aborts (${suggestedCommand("abort", { target: r.id })})`;
  }
  if ((r.state === "running" || r.state === "compensating") && guards.inFlight(sr)) {
    return `the engine retries ${sr.id} itself (dispatch ${sr.dispatch}); a re-run of this job will be declined`;
  }
  return `release ${r.id} is ${r.state === "needs_operator" ? "waiting for an operator" : r.state}; a re-run of this job will be declined`;
}

function settledBackward(d: Draft, sr: StepRun): void {
  const r = d.release;
  const step = stepOf(r, sr);
  if (sr.state === "succeeded") {
    // The compensation's cause stays the release's reason through to rolled_back (what an
    // on-call engineer reads first); the operator hand-over's text gives way to it again.
    if (r.state !== "compensating") r.reason = r.compensation_cause ?? null;
    r.state = "compensating";
    // A lane row of a parallel wave: the cursor stays in the wave, whose lanes are undone in
    // their own order (compensation.ts); elsewhere the next step down.
    r.cursor = parallelWaveOf(r, sr.step_index) === null ? sr.step_index - 1 : sr.step_index;
    d.accept(`[engine] ${describe(r, sr)} succeeded`, sr.id);
    continueCompensation(d);
    return;
  }
  const ended = `${describe(r, sr)} ended ${sr.state}${sr.last_error ? `: ${sr.last_error}` : ""}`;
  // A conformance check names itself, says exposure stayed 0 and what to do.
  const why =
    conformanceFailureWords(step, ended) ??
    (r.lineage?.switch_back ? switchBackCheckWords(step, r.lineage.of, ended) : null) ??
    ended;
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
