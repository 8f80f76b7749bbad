/**
 * Operator events: abort, resume, retry, resolve a step run, abandon (docs/state-machine.md
 * "Operator events" and "Ways out"; failure case F14). Each is guarded here and only here:
 * `availableActions` (exits.ts) asks these same handlers what they would accept.
 */

import { closedReleaseAccepts } from "../lifecycle-states.ts";
import { IMAGE_PATTERN } from "../recipe.ts";
import type { Release, ReleaseEvent, StepRun } from "../types.ts";
import { suggestedCommand } from "../verbs.ts";
import { beginCompensation } from "./compensation.ts";
import { type Draft, describe, type Refusal, stepRunAt } from "./draft.ts";
import { beginForwardAtCursor, start } from "./forward.ts";
import { guards } from "./guards.ts";
import { firstExposureStep, holdVerb, holdWords, inconclusiveGateReason } from "./holds.ts";
import { parallelWaveOf, releaseRerunDeadline, stuckInWave } from "./lanes.ts";
import { atProbes, isProbeRun } from "./probe.ts";
import {
  confirmRestoreCommand,
  pastRollForwardPoint,
  rollbackDone,
  rollForwardCommand,
  rollForwardPoint,
  rollForwardPointLabel,
  waitingForRestore,
} from "./recovery.ts";
import { sendAction } from "./send.ts";
import { settled, utcMinute } from "./settle.ts";
import { waitsOnVerification } from "./verify.ts";
import { whereIs } from "./where.ts";

/** Longest reason kept in history (characters). */
export const OPERATOR_REASON_MAX = 1000;
/** What `abandon` accepts for a lane that runs no image at all. */
export const LANE_RUNS_NOTHING = "none";

type Ev<T extends ReleaseEvent["type"]> = Extract<ReleaseEvent, { type: T }>;

/** `: <reason>` after who did it, when the operator gave a reason (optional ones); else "". */
export const because = (reason: string | undefined): string =>
  reason?.trim() ? `: ${reason.trim()}` : "";

/** Who and why, for an operator event's history data (`reason` only when given). */
const whoWhy = (e: { actor: string; reason?: string }): { actor: string; reason?: string } =>
  e.reason?.trim() ? { actor: e.actor, reason: e.reason.trim() } : { actor: e.actor };

/** What a `needs_operator` release accepts, for refusals (the guards in `exits.ts` decide). */
const NEEDS_OPERATOR_EXITS = (r: Release) =>
  waitingForRestore(r)
    ? `it waits for its restore action (${r.restore?.action}): run it, then confirm it (${confirmRestoreCommand(r.id)}), or abandon it`
    : waitsOnVerification(r)
      ? `its undo ran but verification ${r.verification?.seq} found differences: fix the lanes, then verify again (${suggestedCommand("verify", { target: r.id })}), or abandon it`
      : `it accepts retry or resolve of the step run it waits on, or abandon (\`baton status ${r.id}\` shows the commands)`;

/**
 * What a `compensating` release does and accepts, for refusals: it waits on no step run and
 * accepts nothing; it undoes by itself and ends `rolled_back`, or stops `needs_operator`.
 */
const COMPENSATING_WORDS = (r: Release) =>
  `it is undoing, by itself, what may have taken effect (backward steps from the high-water mark down, then a verification that every lane is as at start) and accepts nothing until that ends: rolled_back, or needs_operator if an undo step fails (then retry, resolve or abandon) or the verification finds a difference (then verify again or abandon); follow it: baton watch ${r.id}`;

export function abort(d: Draft, e: Ev<"abort">): Refusal | undefined {
  const r = d.release;
  if (guards.isTerminal(r)) {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is ${r.state}; undoing a finished release is a new release; ${closedReleaseAccepts(r.id, r.state)}`,
    };
  }
  if (r.state === "compensating" || r.state === "needs_operator") {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is already ${r.state}; ${r.state === "needs_operator" ? NEEDS_OPERATOR_EXITS(r) : COMPENSATING_WORDS(r)}`,
    };
  }
  const bad = reasonProblem(
    e.reason,
    'say why the release is aborted, for the record and whoever rolls forward (e.g. --reason "p99 latency on lane-a doubled")',
  );
  if (bad) return bad;
  const by = `by ${e.actor}: ${e.reason}`;
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
  if (pastRollForwardPoint(r)) {
    // roll_forward_only past its point: rollback is unsafe, so abort undoes nothing.
    const flying = r.step_runs.find((s) => s.direction === "fwd" && guards.inFlight(s));
    if (flying) {
      return {
        status: 409,
        code: "conflict",
        reason: `[engine] release ${r.id} is past its roll-forward point (${rollForwardPointLabel(r)}), so abort would end it without undoing anything, but ${flying.id} is ${flying.state}; wait for it to settle`,
      };
    }
    r.state = "aborted";
    r.generation += 1;
    r.rerun_deadline = null;
    r.gate = null;
    r.roll_forward_hold ??= {
      at: d.now,
      unsafe_after: rollForwardPoint(r) ?? -1,
      why: `aborted ${by}`,
    };
    r.reason = `aborted ${by}; nothing was undone: the recipe's recovery class is roll_forward_only and ${rollForwardPointLabel(r)} may have taken effect, after which rollback is unsafe; the lanes stay as they are: roll forward with a fixed recipe (${rollForwardCommand(r.id)})`;
    d.accept(`[engine] release ${r.id} ${r.reason}`, null, {
      roll_forward_hold: {
        unsafe_after: r.roll_forward_hold.unsafe_after,
        why: r.roll_forward_hold.why,
      },
    });
    return undefined;
  }
  // A rollback's probe steps are read-only: one in flight or done touched nothing.
  const touched = r.step_runs.some(
    (sr) =>
      sr.direction === "fwd" &&
      !isProbeRun(r, sr) &&
      (guards.inFlight(sr) || guards.mayHaveTakenEffect(sr)),
  );
  if (!touched) {
    // F14a: nothing can have taken effect, so there is nothing to undo.
    r.state = "aborted";
    r.generation += 1;
    r.reason = `aborted ${by}`;
    r.hold = null;
    d.accept(`[engine] release ${r.id} aborted (${by}); no step took effect, nothing to undo`);
    return undefined;
  }
  beginCompensation(d, `aborted ${by}`);
  return undefined;
}

export function resume(d: Draft, e: Ev<"resume">): Refusal | undefined {
  const r = d.release;
  if (r.state === "pending") {
    // A release created on hold starts when resumed.
    d.accept(
      `[engine] release ${r.id} resumed by ${e.actor}${because(e.reason)} before it started`,
      null,
      whoWhy(e),
    );
    start(d);
    return undefined;
  }
  if (r.state !== "paused") {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is ${r.state}; only a paused or pending release resumes${r.state === "needs_operator" ? `; ${NEEDS_OPERATOR_EXITS(r)}` : guards.isTerminal(r) ? `; ${closedReleaseAccepts(r.id, r.state)}` : ""}`,
    };
  }
  const h = r.hold;
  if (h && h.kind !== "pause") {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is paused (${holdWords(h)}); resume continues only an operator's pause; it waits for ${holdVerb(r, h)}, or abort (${suggestedCommand("abort", { target: r.id })})`,
    };
  }
  if (r.gate && r.gate.decision === "inconclusive" && h) {
    // Paused by an operator, then the gate ended inconclusive: resume lifts only the pause;
    // the release stays paused at the gate until promote (or abort).
    r.hold = null;
    r.reason = inconclusiveGateReason(r);
    d.accept(
      `[engine] release ${r.id} resumed by ${e.actor}${because(e.reason)} (it was ${holdWords(h)}); it stays paused: ${r.reason}`,
      null,
      { ...whoWhy(e), paused: { by: h.actor, reason: h.reason, at: h.at } },
    );
    return undefined;
  }
  if (r.gate && r.gate.decision === "inconclusive") {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is paused at the gate of wave ${r.gate.wave + 1}, which was inconclusive; promote it (${suggestedCommand("promote", { target: r.id, flags: { "--reason": '"<why the risk is acceptable>"' } })}) to accept the risk, or abort it (${suggestedCommand("abort", { target: r.id })})`,
    };
  }
  const sr = stepRunAt(r, r.cursor, "fwd");
  if (r.roll_forward_hold && (!sr || sr.state === "succeeded")) {
    // Held after a failed gate past the point: resuming would run on past the failed gate.
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is held for roll forward after ${r.roll_forward_hold.why}; resuming would run on past it; roll forward with a fixed recipe (${rollForwardCommand(r.id)}) or abort it (nothing is undone)`,
    };
  }
  r.state = "running";
  r.reason = null;
  r.rerun_deadline = null;
  r.hold = null;
  r.roll_forward_hold = null;
  d.accept(
    `[engine] release ${r.id} resumed by ${e.actor}${because(e.reason)} at step ${r.cursor + 1}${h ? ` (it was ${holdWords(h)})` : ""}`,
    null,
    h ? { ...whoWhy(e), paused: { by: h.actor, reason: h.reason, at: h.at } } : whoWhy(e),
  );
  if (r.gate) {
    // Paused while its gate was deciding: the gate goes on deciding (pass begins the next wave).
    return undefined;
  }
  if (atProbes(r)) {
    // A rollback's probes: the ones not begun while paused begin now (those in flight go on).
    beginForwardAtCursor(d);
    return undefined;
  }
  if (parallelWaveOf(r, r.cursor) !== null) {
    // Every lane of the parallel wave that waits is sent again, then the wave moves on.
    for (const s of stuckInWave(r)) {
      sendAction(d, s, null);
      d.accept(`[engine] ${describe(r, s)} sent again on resume with the same operation key`, s.id);
    }
    beginForwardAtCursor(d);
  } else if (!sr) {
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
      reason: `[engine] ${sr.id} cannot be retried: it is ${sr.state} and release ${r.id} is ${whereIs(r)}; only the step run a paused or needs_operator release waits on can be retried${guards.isTerminal(r) ? `; ${closedReleaseAccepts(r.id, r.state)}` : ""}`,
    };
  }
  const othersWaiting =
    sr.direction === "fwd" && parallelWaveOf(r, sr.step_index) !== null
      ? stuckInWave(r).filter((s) => s.id !== sr.id)
      : [];
  if (othersWaiting.length > 0) {
    // Another lane of the parallel wave still waits on an operator: the release stays paused.
    sendAction(d, sr, null);
    if (typeof r.rerun_deadline === "number") r.rerun_deadline = releaseRerunDeadline(r);
    d.accept(
      `[engine] ${describe(r, sr)} retried by ${e.actor}${because(e.reason)} with the same operation key; release ${r.id} stays paused on ${othersWaiting.map((s) => s.id).join(", ")}`,
      sr.id,
      whoWhy(e),
    );
    return undefined;
  }
  r.state = sr.direction === "fwd" ? "running" : "compensating";
  // Compensating again: its cause is the release's reason again, not the hand-over's text.
  r.reason = sr.direction === "fwd" ? null : (r.compensation_cause ?? null);
  r.rerun_deadline = null;
  r.roll_forward_hold = null;
  sendAction(d, sr, null);
  d.accept(
    `[engine] ${describe(r, sr)} retried by ${e.actor}${because(e.reason)} with the same operation key; release ${r.id} is ${r.state} again`,
    sr.id,
    whoWhy(e),
  );
  // Lanes of a parallel wave that finished a row while the release was paused move on.
  if (sr.direction === "fwd" && parallelWaveOf(r, sr.step_index) !== null) beginForwardAtCursor(d);
  return undefined;
}

/** A reason is required for resolve and abandon: the history must say why. */
function reasonProblem(
  reason: string,
  ask = 'say what was done by hand and why (e.g. --reason "restored lane-a to the old image with deploy.sh on the host")',
): Refusal | undefined {
  if (reason.trim() === "") {
    const message = "is required (blank or missing)";
    return {
      status: 422,
      code: "reason_required",
      reason: `[engine] reason is required: ${ask}`,
      problems: [{ path: "body.reason", message, fix: ask }],
    };
  }
  if (reason.length > OPERATOR_REASON_MAX) {
    const fix = `keep it to ${OPERATOR_REASON_MAX} characters`;
    return {
      status: 422,
      code: "reason_too_long",
      reason: `[engine] reason is ${reason.length} characters; ${fix}`,
      problems: [{ path: "body.reason", message: `is ${reason.length} characters`, fix }],
    };
  }
  return undefined;
}

/**
 * `resolve`: the operator did the waited-on backward step run's effect by hand. It counts as
 * succeeded and compensation continues below it. Only the step run a `needs_operator`
 * release waits on; a reason is required.
 */
export function resolve(d: Draft, sr: StepRun, e: Ev<"resolve">): Refusal | undefined {
  const r = d.release;
  if (r.state !== "needs_operator" || sr.direction !== "bwd" || !guards.waitsOnOperator(r, sr)) {
    const waited = stepRunAt(r, r.cursor, "bwd");
    const rerun = r.state === "paused" && typeof r.rerun_deadline === "number";
    const hint = waitingForRestore(r)
      ? `; compensation is done and the release waits for its restore action: run it, then confirm it (${confirmRestoreCommand(r.id)})`
      : r.state === "needs_operator" && waited
        ? `; the release waits on ${waited.id}`
        : rerun
          ? `; resolve is for an undo that failed, and release ${r.id} waits for a re-run of its failed step until ${utcMinute(r.rerun_deadline as number, d.now)}: re-run the failed job, retry it from here (${suggestedCommand("retry", { target: stepRunAt(r, r.cursor, "fwd")?.id ?? "<step-run>" })}), or abort the release (${suggestedCommand("abort", { target: r.id })})`
          : `; only the backward step run a needs_operator release waits on can be resolved${guards.isTerminal(r) ? `; ${closedReleaseAccepts(r.id, r.state)}` : ""}`;
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] ${sr.id} cannot be resolved: it is ${sr.state} (${sr.direction}) and release ${r.id} is ${whereIs(r)}${hint}`,
    };
  }
  const bad = reasonProblem(e.reason);
  if (bad) return bad;
  const was = sr.state;
  sr.state = "succeeded";
  sr.resolved = { actor: e.actor, reason: e.reason, at: d.now };
  sr.last_error = `resolved by ${e.actor} (was ${was}): ${e.reason}`;
  d.accept(
    `[engine] ${describe(r, sr)} resolved by ${e.actor}: ${e.reason}; it counts as done (it was ${was}) and compensation continues`,
    sr.id,
    { actor: e.actor, reason: e.reason, was },
  );
  settled(d, sr);
  return undefined;
}

/**
 * `abandon`: needs_operator -> abandoned (terminal). The operator gives up on compensation and
 * confirms, for every lane of the release, the image it runs now (`none` for nothing); only
 * then are the lanes free for a new release. The generation moves on, so nothing dispatched
 * for this release can act any more.
 */
export function abandon(d: Draft, e: Ev<"abandon">): Refusal | undefined {
  const r = d.release;
  if (r.state !== "needs_operator") {
    const what = guards.isTerminal(r)
      ? `it has already ended; ${closedReleaseAccepts(r.id, r.state)}`
      : "only a release that needs an operator can be abandoned; abort it, or wait for compensation to end";
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is ${r.state}; ${what}`,
    };
  }
  const flying = r.step_runs.find((s) => guards.inFlight(s));
  if (flying) {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} cannot be abandoned while ${flying.id} is ${flying.state}; wait for it to settle`,
    };
  }
  const bad = reasonProblem(e.reason);
  if (bad) return bad;
  const ids = r.manifest.lanes.map((l) => l.id);
  const given = e.lanes ?? {};
  const missing = ids.filter((id) => !(id in given));
  const unknown = Object.keys(given).filter((id) => !ids.includes(id));
  const malformed = ids.filter(
    (id) =>
      id in given &&
      !(given[id] === LANE_RUNS_NOTHING || IMAGE_PATTERN.test(String(given[id] ?? ""))),
  );
  if (missing.length > 0 || unknown.length > 0 || malformed.length > 0) {
    const parts = [
      missing.length > 0
        ? `confirm what lanes ${missing.join(", ")} run now (every lane of the release: ${ids.join(", ")})`
        : "",
      unknown.length > 0 ? `lanes ${unknown.join(", ")} are not lanes of release ${r.id}` : "",
      malformed.length > 0
        ? `lanes ${malformed.join(", ")}: give the image pinned by digest (name@sha256:<64 hex>) or "${LANE_RUNS_NOTHING}"`
        : "",
    ].filter(Boolean);
    return {
      status: 422,
      code: "lanes_unconfirmed",
      reason: `[engine] release ${r.id} is not abandoned: ${parts.join("; ")}`,
    };
  }
  const lanes = Object.fromEntries(ids.map((id) => [id, String(given[id])]));
  r.state = "abandoned";
  r.generation += 1;
  r.rerun_deadline = null;
  r.abandoned = { actor: e.actor, reason: e.reason, at: d.now, lanes };
  r.reason = `abandoned by ${e.actor}: ${e.reason}`;
  const confirmed = ids.map((id) => `${id} runs ${lanes[id]}`).join(", ");
  d.accept(
    `[engine] release ${r.id} abandoned by ${e.actor} (generation ${r.generation}): ${e.reason}; the operator confirms ${confirmed}; its lanes are free`,
    null,
    { actor: e.actor, reason: e.reason, lanes },
  );
  return undefined;
}

/** The operator pause's refusals: what the release accepts instead, per state. */
function pauseRefusal(id: string, state: string, extra: string): Refusal {
  return {
    status: 409,
    code: "conflict",
    reason: `[engine] release ${id} is ${state}; only a running release can be paused${extra}`,
  };
}

/**
 * `pause`: running -> paused by an operator (docs/lifecycle.md "Pause and resume"). Nothing
 * new starts (no next step, lane or wave); step runs in flight settle (a success moves the
 * cursor on, a failure follows the step's own policy) and a gate under way keeps deciding.
 * A reason is required. Refused while compensating: an undo half done leaves the fleet in a
 * state nobody planned, so compensation runs to its end (it waits in needs_operator if a
 * step of it fails).
 */
export function pause(d: Draft, e: Ev<"pause">): Refusal | undefined {
  const r = d.release;
  if (r.state !== "running") {
    if (guards.isTerminal(r))
      return pauseRefusal(r.id, r.state, `; ${closedReleaseAccepts(r.id, r.state)}`);
    if (r.state === "pending")
      return pauseRefusal(
        r.id,
        r.state,
        `; it has not started: resume (${suggestedCommand("resume", { target: r.id })}) starts it, abort ends it`,
      );
    if (r.state === "compensating")
      return pauseRefusal(
        r.id,
        whereIs(r),
        "; compensation is not paused (a half-done undo leaves the lanes in a state nobody planned): it runs to its end, and waits in needs_operator if an undo step fails",
      );
    if (r.state === "needs_operator")
      return pauseRefusal(r.id, r.state, `; it already waits: ${NEEDS_OPERATOR_EXITS(r)}`);
    const h = r.hold;
    return pauseRefusal(
      r.id,
      `already ${whereIs(r)}`,
      h
        ? ` (${holdWords(h)}); it waits for ${holdVerb(r, h)}, or abort`
        : `: ${r.reason ?? "it waits on an operator"}`,
    );
  }
  const bad = reasonProblem(
    e.reason,
    'say why the release is paused, for whoever resumes it (e.g. --reason "error budget burn on lane-a, investigating")',
  );
  if (bad) return bad;
  const flying = r.step_runs.filter((s) => s.direction === "fwd" && guards.inFlight(s));
  const gate = r.gate ? `; the gate of wave ${r.gate.wave + 1} keeps deciding` : "";
  r.state = "paused";
  r.hold = { kind: "pause", actor: e.actor, reason: e.reason, at: d.now };
  r.reason = `${holdWords(r.hold)}; nothing new starts until resume (${suggestedCommand("resume", { target: r.id })})`;
  d.accept(
    `[engine] release ${r.id} paused by ${e.actor} at step ${r.cursor + 1}: ${e.reason}; ${
      flying.length > 0
        ? `${flying.map((s) => s.id).join(", ")} in flight settle first`
        : "nothing is in flight"
    }${gate}; nothing new starts until resume`,
    null,
    { actor: e.actor, reason: e.reason, in_flight: flying.map((s) => s.id) },
  );
  return undefined;
}

/**
 * `release`: the first exposure of a release deployed dark (docs/lifecycle.md "Deploy and
 * release"). Accepted only while it waits at 0% exposure; the rollout goes on with its first
 * traffic write above 0%.
 */
export function release(d: Draft, e: Ev<"release">): Refusal | undefined {
  const r = d.release;
  const h = r.hold;
  if (r.state !== "paused" || h?.kind !== "dark") {
    const why =
      r.exposure === undefined
        ? `it was not deployed dark (release applies to a release started with baton deploy, waiting at 0% exposure)`
        : r.exposure === "released"
          ? "it was released already"
          : r.state === "running" || (r.state === "paused" && h?.kind === "pause")
            ? `it is still deploying at 0% exposure; release is accepted once it waits before step ${firstExposureStep(r.manifest) + 1}`
            : "it no longer waits at 0% exposure";
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is ${whereIs(r)}; ${why}${h && h.kind !== "dark" ? `; it waits for ${holdVerb(r, h)}` : ""}${guards.isTerminal(r) ? `; ${closedReleaseAccepts(r.id, r.state)}` : ""}`,
    };
  }
  r.state = "running";
  r.reason = null;
  r.hold = null;
  r.exposure = "released";
  d.accept(
    `[engine] release ${r.id} released by ${e.actor}${e.reason ? `: ${e.reason}` : ""}; first exposure at step ${r.cursor + 1}`,
    null,
    { actor: e.actor, reason: e.reason },
  );
  beginForwardAtCursor(d);
  return undefined;
}

/**
 * `confirm_restore`: needs_operator -> rolled_back for a recoverable release waiting for its
 * restore action (docs/lifecycle.md "Recovery classes"): the operator ran it; the reason says
 * what was run and what it showed (required). Who, when and why are kept on the release
 * (`restore.confirmed`) and in history; the record's RTO ends here. A rollback release waiting
 * for the restore action of the recoverable release it rolls back ends `succeeded` instead.
 */
export function confirmRestore(d: Draft, e: Ev<"confirm_restore">): Refusal | undefined {
  const r = d.release;
  if (!waitingForRestore(r)) {
    const why =
      r.restore?.confirmed !== undefined && r.restore?.confirmed !== null
        ? `its restore was confirmed already by ${r.restore.confirmed.actor}`
        : r.manifest.recovery?.class !== "recoverable"
          ? `its recipe's recovery class is ${r.manifest.recovery?.class ?? "reversible"}, which names no restore action`
          : r.state === "needs_operator"
            ? `it waits on an undo step, not on its restore action; ${NEEDS_OPERATOR_EXITS(r)}`
            : guards.isTerminal(r)
              ? `it has ended; ${closedReleaseAccepts(r.id, r.state)}`
              : "a restore is confirmed once compensation has rolled traffic back and the release waits for it (needs_operator)";
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is ${whereIs(r)}; nothing to confirm: ${why}`,
    };
  }
  const bad = reasonProblem(
    e.reason,
    'say what you ran and what it showed (e.g. --reason "restored feature store snapshot fs-2041 with ./ops/restore-fs.sh; row counts match")',
  );
  if (bad) return bad;
  const wait = r.restore as NonNullable<Release["restore"]>;
  wait.confirmed = { actor: e.actor, reason: e.reason, at: d.now };
  if (rollbackDone(r)) {
    // A rollback of a recoverable release: its steps all ran; with the restore it is done.
    r.state = "succeeded";
    r.succeeded_at = d.now;
    r.reason = null;
    d.accept(
      `[engine] release ${r.id} succeeded: the rollback of ${r.lineage?.of} ran all ${r.manifest.steps.length} steps and ${e.actor} confirmed its restore action (${wait.action}): ${e.reason}`,
      null,
      { actor: e.actor, reason: e.reason, action: wait.action, waited_ms: d.now - wait.since },
    );
    return undefined;
  }
  r.state = "rolled_back";
  r.reason = `rolled back: traffic undone and the restore action confirmed by ${e.actor}: ${e.reason}`;
  d.accept(
    `[engine] release ${r.id} rolled back: ${e.actor} confirmed the restore action (${wait.action}): ${e.reason}`,
    null,
    { actor: e.actor, reason: e.reason, action: wait.action, waited_ms: d.now - wait.since },
  );
  return undefined;
}
