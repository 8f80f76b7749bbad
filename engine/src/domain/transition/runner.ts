/**
 * Runner step runs: dispatch outcomes, callbacks and deadlines (docs/state-machine.md
 * "Runner steps"; docs/state-machine.md rules 2, 5, 6). Preflight is in `preflight.ts`.
 */

import { resultPassed } from "../../protocol/messages.ts";
import { conformanceFailureWords } from "../conformance.ts";
import { migrateUnverified } from "../migration.ts";
import { isRestoreRun } from "../restore-state.ts";
import { failingCheckText, imageMismatch } from "../result-evidence.ts";
import type { Attempt, CallbackEvent, Release, ReleaseEvent, StepRun } from "../types.ts";
import { beginCompensation } from "./compensation.ts";
import { type Draft, describe, type Refusal, stepOf } from "./draft.ts";
import { guards } from "./guards.ts";
import { parallelWaveOf, recomputedHighWaterMark } from "./lanes.ts";
import { backoffMs, DISPATCH_TRIES_MAX } from "./limits.ts";
import { isProbeRun, recordProbeAnswer } from "./probe.ts";
import { recordRestoreReport } from "./restore.ts";
import { emitDispatch } from "./send.ts";
import { runnerAdvice, settled, utcMinute } from "./settle.ts";
import { whereIs } from "./where.ts";

type Ev<T extends ReleaseEvent["type"]> = Extract<ReleaseEvent, { type: T }>;

/** GitHub answered 204 for dispatch `e.dispatch`. */
export function dispatchAccepted(d: Draft, sr: StepRun, e: Ev<"dispatch_accepted">): void {
  const r = d.release;
  if (sr.state !== "dispatching" || e.dispatch !== sr.dispatch) {
    d.ignore(
      `[engine] dispatch ${e.dispatch} of ${sr.id} accepted, but the step run is ${sr.state} (dispatch ${sr.dispatch}); nothing to do`,
      sr.id,
    );
    return;
  }
  const step = stepOf(r, sr);
  sr.state = "dispatched";
  if (sr.direction === "fwd" && !isProbeRun(r, sr))
    r.high_water_mark = Math.max(r.high_water_mark, sr.step_index);
  d.emit({
    type: "deadline",
    step_run_id: sr.id,
    kind: "start",
    dispatch: sr.dispatch,
    attempt: 0,
    at: d.now + step.start_deadline_ms,
  });
  d.accept(
    `[engine] ${describe(r, sr)} dispatch ${sr.dispatch} accepted by the dispatcher (GitHub, or the local runner); a runner must preflight within ${step.start_deadline_ms} ms`,
    sr.id,
  );
}

/** GitHub (or the network) refused dispatch `e.dispatch`. */
export function dispatchFailed(d: Draft, sr: StepRun, e: Ev<"dispatch_failed">): void {
  const r = d.release;
  if (sr.state !== "dispatching" || e.dispatch !== sr.dispatch) {
    d.ignore(
      `[engine] dispatch ${e.dispatch} of ${sr.id} failed, but the step run is ${sr.state} (dispatch ${sr.dispatch}); nothing to do`,
      sr.id,
    );
    return;
  }
  if (e.retryable && e.throttled_until !== undefined) {
    // Never sent or refused for rate: not a try, no deadline yet; it keeps its place.
    const at = Math.max(e.throttled_until, d.now);
    emitDispatch(d, sr, at);
    d.accept(
      `[engine] dispatch ${sr.dispatch} of ${sr.id} throttled (${e.message}); it stays dispatching and is sent at ${new Date(at).toISOString()}`,
      sr.id,
    );
    return;
  }
  if (e.retryable) {
    sr.tries += 1;
    if (sr.tries <= DISPATCH_TRIES_MAX) {
      const wait = backoffMs(sr.tries - 1);
      emitDispatch(d, sr, d.now + wait);
      d.accept(
        `[engine] dispatch ${sr.dispatch} of ${sr.id} failed (${e.message}); sending it again in ${wait} ms (try ${sr.tries} of ${DISPATCH_TRIES_MAX})`,
        sr.id,
      );
      return;
    }
    // GitHub may have accepted one of the sends: the outcome is not known (rule 5).
    sr.state = "unknown";
    sr.last_error = `dispatch not confirmed after ${DISPATCH_TRIES_MAX} tries: ${e.message}`;
    if (sr.direction === "fwd" && !isProbeRun(r, sr))
      r.high_water_mark = Math.max(r.high_water_mark, sr.step_index);
    d.accept(`[engine] ${describe(r, sr)} is unknown: ${sr.last_error}`, sr.id);
    settled(d, sr);
    return;
  }
  // F01: a definitive refusal; nothing ran, so the high-water mark stays.
  sr.state = "dispatch_failed";
  sr.last_error = e.message;
  d.accept(`[engine] ${describe(r, sr)} dispatch refused by GitHub: ${e.message}`, sr.id);
  settled(d, sr);
}

/** A runner's result for (run id, run attempt) (rule 6; F03, F13). */
export function callback(d: Draft, sr: StepRun, e: CallbackEvent): Refusal | undefined {
  const r = d.release;
  const attempt = sr.attempts.find((a) => a.run_id === e.run_id && a.run_attempt === e.run_attempt);
  if (!attempt) {
    return {
      status: 409,
      code: "no_such_attempt",
      reason: `[engine] step run ${sr.id} has no attempt for run ${e.run_id} attempt ${e.run_attempt}; a callback must follow an accepted preflight`,
    };
  }
  const latest = sr.attempts[sr.attempts.length - 1]!;
  if (
    attempt.callback_at !== null &&
    attempt.state !== "fenced" &&
    (attempt.overall !== e.overall || attempt.status !== e.status)
  ) {
    // A second, different verdict for one attempt: the first stands; say so (not a replay).
    return {
      status: 409,
      code: "conflicting_callback",
      reason: `[engine] step run ${sr.id} attempt ${attempt.n} already reported ${attempt.status} (${attempt.overall}); a different result (${e.status}, ${e.overall}) for the same attempt is refused; the first result stands`,
    };
  }
  if (attempt.callback_at !== null && attempt.state !== "fenced") {
    d.ignore(
      `[engine] duplicate callback for ${sr.id} attempt ${attempt.n}; already recorded as ${attempt.overall}`,
      sr.id,
    );
    d.reply = { step_run_id: sr.id, attempt: attempt.n, state: sr.state, duplicate: true };
    return undefined;
  }
  if (attempt !== latest || attempt.state === "fenced" || attempt.dispatch !== sr.dispatch) {
    const why =
      attempt !== latest
        ? `attempt ${attempt.n} < current attempt ${latest.n}`
        : `attempt ${attempt.n} belongs to dispatch ${attempt.dispatch}, the step run is on dispatch ${sr.dispatch}`;
    return {
      status: 409,
      code: "fenced",
      reason: `[engine] step run ${sr.id} is fenced: ${why}; the newer attempt's result stands`,
    };
  }
  const observation = sr.direction === "fwd" && r.state === "compensating";
  if (
    !(guards.isCurrent(r, sr) || observation) ||
    (sr.state !== "running" && sr.state !== "unknown")
  ) {
    return {
      status: 409,
      code: "late",
      reason: `[engine] callback for ${sr.id} attempt ${attempt.n} is late: the step run is ${sr.state} and release ${r.id} is ${whereIs(r)}`,
    };
  }
  // A deploy ends with the target's own report of the running image: a pass that left
  // another image running is a failure, whatever the tool concluded.
  // A migration's backfill passes only with its verifications reported and passed.
  const mismatch =
    (e.overall === "pass" ? runningImageMismatch(r, sr, e.images) : null) ??
    migrateUnverified(stepOf(r, sr), sr.direction, e.overall, e.verifications);
  const probe = isProbeRun(r, sr);
  if (probe && !e.probe_checks) {
    // Fail closed: a probe's answer is its checks; the service reads them from checks.json.
    return {
      status: 422,
      code: "bad_probe_checks",
      reason: `[engine] callback for probe step run ${sr.id} carries no prerequisite checks; the probe's checks.json must report its lane's connect, access, image and capacity`,
    };
  }
  // A probe passes only when the runner said pass and every check of its lane passed.
  // A restore passes only with a report the tool read back (fail closed).
  const restore = isRestoreRun(r, sr);
  // A status saying the tool did not succeed outweighs an `overall` of pass (fail closed); so
  // does a check in checks.json whose status says it failed (the service names it).
  const contradicted = e.overall === "pass" && !resultPassed(e.status, e.overall);
  const checkFailed = e.overall === "pass" && e.failing_check !== undefined;
  const pass =
    e.overall === "pass" &&
    !contradicted &&
    !checkFailed &&
    mismatch === null &&
    (!probe || (e.probe_checks ?? []).every((c) => c.outcome === "pass")) &&
    (!restore || e.restore_report?.verified === true);
  attempt.state = pass ? "succeeded" : "failed";
  attempt.callback_at = d.now;
  attempt.status = e.status;
  attempt.overall = e.overall;
  if (!pass && e.nothing_ran === true) attempt.nothing_ran = true;
  if (e.run_by) attempt.run_by = { ...e.run_by };
  const was = sr.state;
  sr.state = pass ? "succeeded" : "failed";
  // The failing check names the cause (`health check on lane-a answered 503: …`); the
  // runner's bare status only when the result files carry no failing check.
  const failedChecks = probe ? (e.probe_checks ?? []).filter((c) => c.outcome === "fail") : [];
  const cause = contradicted
    ? `the runner reported status ${e.status} with overall pass; a result whose status says the tool did not succeed is a failure`
    : failedChecks.length > 0
      ? failedChecks.map((c) => `lane ${c.lane} ${c.check}: ${c.message}`).join("; ")
      : e.failing_check
        ? `${failingCheckText(e.failing_check, stepOf(r, sr).lane)}${checkFailed ? " (the runner reported overall pass; a result with a failed check is a failure)" : ""}`
        : restore && e.overall === "pass"
          ? "the restore tool passed but reported no restore it read back (checks.json needs an ok `restore` check with its point and data lost, and an ok `verify` check)"
          : `the runner reported status ${e.status}`;
  sr.last_error = pass
    ? null
    : (mismatch ?? `${cause}${attempt.nothing_ran ? " (no remote command ran)" : ""}`);
  if (
    !pass &&
    sr.direction === "fwd" &&
    r.high_water_mark === sr.step_index &&
    !guards.mayHaveTakenEffect(sr)
  ) {
    // Nothing of this step run reached the machine: the high-water mark does not cover it.
    // In a parallel wave other lanes' rows below may or may not have taken effect: recompute.
    r.high_water_mark =
      parallelWaveOf(r, sr.step_index) === null ? sr.step_index - 1 : recomputedHighWaterMark(r);
  }
  d.accept(
    `[engine] ${describe(r, sr)} attempt ${attempt.n} reported ${e.status} (${e.overall})${runByWords(attempt)}${mismatch ? `, but ${mismatch}; the step run failed` : ""}${was === "unknown" ? "; this settles the unknown outcome" : ""}`,
    sr.id,
    e.run_by ? { run_by: { ...e.run_by } } : {},
  );
  if (probe && e.probe_checks) recordProbeAnswer(d, sr, e.probe_checks);
  if (restore) recordRestoreReport(d, sr, e.restore_report);
  settled(d, sr);
  const advice = runnerAdvice(r, sr, d.now);
  d.reply = {
    step_run_id: sr.id,
    attempt: attempt.n,
    state: sr.state,
    rerun_deadline: sr.rerun_deadline ?? r.rerun_deadline ?? null,
    ...(advice ? { advice } : {}),
  };
  return undefined;
}

/** A start or callback deadline fired (rule 5: `unknown`, never success). */
export function runnerDeadline(d: Draft, sr: StepRun, e: Ev<"deadline">): void {
  const r = d.release;
  if (e.kind === "start") {
    if (guards.awaitsFirstRun(sr) && e.dispatch === sr.dispatch) {
      sr.state = "unknown";
      sr.last_error = `dispatch lost: no preflight before the start deadline (dispatch ${sr.dispatch})`;
      d.accept(`[engine] ${describe(r, sr)} is unknown: ${sr.last_error}`, sr.id);
      settled(d, sr);
      return;
    }
  } else if (e.kind === "rerun") {
    // Each failed step run has its own window (older rows: the release's deadline).
    const until = sr.rerun_deadline ?? r.rerun_deadline;
    if (
      r.state === "paused" &&
      typeof until === "number" &&
      guards.isCurrent(r, sr) &&
      sr.state === "failed" &&
      e.dispatch === sr.dispatch &&
      e.attempt === sr.attempts.length
    ) {
      const closed = `${describe(r, sr)} failed and was not re-run before the window closed at ${utcMinute(until, d.now)}`;
      const cause = `${closed}${sr.last_error ? ` (${sr.last_error})` : ""}`;
      beginCompensation(d, conformanceFailureWords(stepOf(r, sr), cause) ?? closed);
      return;
    }
  } else if (e.kind === "callback") {
    const latest = sr.attempts[sr.attempts.length - 1];
    if (
      sr.state === "running" &&
      latest &&
      latest.n === e.attempt &&
      latest.state === "running" &&
      e.dispatch === sr.dispatch
    ) {
      latest.state = "unknown";
      sr.state = "unknown";
      sr.last_error = `no callback for attempt ${latest.n} before the callback deadline`;
      d.accept(`[engine] ${describe(r, sr)} is unknown: ${sr.last_error}`, sr.id);
      settled(d, sr);
      return;
    }
  }
  d.ignore(
    `[engine] ${e.kind} deadline of ${sr.id} (dispatch ${e.dispatch}, attempt ${e.attempt}) no longer applies: the step run is ${sr.state}`,
    sr.id,
  );
}

/**
 * The failure reason when the target reported running another image than the step run's action
 * was to leave (`args.image` of its forward or backward runner action), else null.
 */
function runningImageMismatch(
  r: Release,
  sr: StepRun,
  images: readonly string[] | undefined,
): string | null {
  if (!images || images.length === 0) return null;
  const step = r.manifest.steps[sr.step_index];
  const action = sr.direction === "fwd" ? step?.forward : step?.backward;
  if (action?.kind !== "runner") return null;
  const expected = action.args.image;
  if (typeof expected !== "string") return null;
  const lane = (action.args.lane as { id?: unknown } | undefined)?.id;
  return imageMismatch(typeof lane === "string" ? lane : (step?.lane ?? "?"), expected, images);
}

/**
 * Who ran an attempt, for its history line: ` (re-run by lee from the Actions UI; the run was
 * started by maria)` when the run attempt was started by someone (`triggering_actor`) after
 * the workflow run's first one, ` (run by maria)` otherwise; "" when the runner said nobody.
 */
export function runByWords(a: Pick<Attempt, "run_attempt" | "run_by">): string {
  const by = a.run_by;
  const who = by?.triggering_actor ?? by?.actor;
  if (!who) return "";
  if (a.run_attempt > 1 && by?.triggering_actor)
    return ` (re-run by ${by.triggering_actor} from the Actions UI${by.actor ? `; the run was started by ${by.actor}` : ""})`;
  return ` (run by ${who})`;
}
