/**
 * The release state machine's transition function (docs/state-machine.md; the precise contract is
 * docs/state-machine.md). Pure and deterministic: `(release, event, now) -> result`, no I/O,
 * no clock, no randomness; the input release is never changed (it may be deep-frozen).
 * Effects come back as data for the service to write to the outbox in the same transaction.
 */

import { applied, observed } from "./transition/control-plane.ts";
import { Draft, eventData, findStepRun, type Refusal } from "./transition/draft.ts";
import { beginForwardAtCursor, start } from "./transition/forward.ts";
import { gateEvaluated, promote } from "./transition/gate.ts";
import { guards } from "./transition/guards.ts";
import {
  abandon,
  abort,
  confirmRestore,
  pause,
  release as releaseDark,
  resolve,
  resume,
  retry,
} from "./transition/operator.ts";
import { preflight } from "./transition/preflight.ts";
import { restoreStateRequested } from "./transition/restore.ts";
import { callback, dispatchAccepted, dispatchFailed, runnerDeadline } from "./transition/runner.ts";
import { stopChecked } from "./transition/stop.ts";
import { verified, verifyRequested } from "./transition/verify.ts";
import type { Manifest, Release, ReleaseEvent, TransitionResult } from "./types.ts";

/**
 * A new release in state `pending` (high-water mark -1, cursor 0, resource_version 1,
 * generation 1, no step runs yet). `id` must be `r<releaseNumber>`; throws `RangeError`
 * otherwise. `now` is epoch ms.
 */
export function newRelease(
  id: string,
  releaseNumber: number,
  manifest: Manifest,
  manifestDigest: string,
  now: number,
  uid?: string,
): Release {
  if (id !== `r${releaseNumber}` || !Number.isSafeInteger(releaseNumber) || releaseNumber < 0) {
    throw new RangeError(
      `[engine] release id ${id} must be r<number> with number ${releaseNumber}`,
    );
  }
  return {
    id,
    ...(uid === undefined ? {} : { uid }),
    state: "pending",
    generation: 1,
    resource_version: 1,
    manifest_digest: manifestDigest,
    manifest,
    high_water_mark: -1,
    cursor: 0,
    step_runs: [],
    reason: null,
    created_at: now,
    updated_at: now,
  };
}

/**
 * Applies one event. `ok: true, changed: true`: a new release (`resource_version + 1`,
 * `updated_at = now`), effects and history. `ok: true, changed: false`: a harmless repeat,
 * the same release object, no effects. `ok: false`: a refusal (404/409/422) with one
 * `refused` history entry. `now` is epoch ms. Throws only on a corrupt release (a step run
 * naming a step the manifest does not have).
 */
export function transition(release: Release, event: ReleaseEvent, now: number): TransitionResult {
  return run(new Draft(release, event, now));
}

/**
 * Whether `transition(release, event, now)` would accept `event` and change the release, asked
 * of `frozen` (`frozenProbeCopy(release)`) in place, without copying: handlers check their
 * guards before they write, so a refusal or a repeat returns as it would on a copy, and the
 * first write into the frozen copy (a `TypeError`) means the event is accepted. Any other
 * error falls back to `transition` on a copy, which throws it as it would have.
 */
export function wouldChange(
  release: Release,
  frozen: Readonly<Release>,
  event: ReleaseEvent,
  now: number,
): boolean {
  try {
    const res = run(new Draft(frozen, event, now, true));
    return res.ok && res.changed;
  } catch (err) {
    if (err instanceof TypeError && FROZEN_WRITE.test(err.message)) return true;
    const res = transition(release, event, now);
    return res.ok && res.changed;
  }
}

/** V8's messages for a write into a frozen object or array (strict mode). */
const FROZEN_WRITE =
  /read only property|object is not extensible|Cannot add property|Cannot delete property/;

function run(d: Draft): TransitionResult {
  const release = d.original as Release;
  const { event, now } = d;
  const refusal = route(d);
  if (refusal) {
    return {
      ok: false,
      status: refusal.status,
      code: refusal.code,
      reason: refusal.reason,
      ...(refusal.problems ? { problems: refusal.problems } : {}),
      history: [
        {
          release_id: release.id,
          at: now,
          kind: event.type,
          step_run_id: "step_run_id" in event ? event.step_run_id : null,
          outcome: "refused",
          message: refusal.reason,
          data: eventData(event),
        },
      ],
    };
  }
  if (!d.changed) {
    return { ok: true, changed: false, release, effects: [], history: d.history, reply: d.reply };
  }
  const next = d.release;
  next.resource_version = release.resource_version + 1;
  next.updated_at = now;
  return {
    ok: true,
    changed: true,
    release: next,
    effects: d.effects,
    history: d.history,
    reply: d.reply,
  };
}

function route(d: Draft): Refusal | undefined {
  const e = d.event;
  const r = d.release;
  switch (e.type) {
    case "start":
      if (r.state !== "pending") {
        return {
          status: 409,
          code: "conflict",
          reason: `[engine] release ${r.id} is ${r.state}; only a pending release starts`,
        };
      }
      start(d);
      return undefined;
    case "abort":
      return abort(d, e);
    case "resume":
      return resume(d, e);
    case "pause":
      return pause(d, e);
    case "release":
      return releaseDark(d, e);
    case "abandon":
      return abandon(d, e);
    case "confirm_restore":
      return confirmRestore(d, e);
    case "restore_state":
      return restoreStateRequested(d, e);
    case "promote":
      return promote(d, e);
    case "verify":
      return verifyRequested(d, e);
    case "verified":
      return verified(d, e);
    case "gate":
      if (guards.isTerminal(r)) {
        d.ignore(`[engine] gate evaluation ignored: release ${r.id} is ${r.state}`);
        return undefined;
      }
      return gateEvaluated(d, e);
    case "stop_check":
      return stopChecked(d, e, beginForwardAtCursor);
    default:
      break;
  }
  const sr = findStepRun(r, e.step_run_id);
  if (!sr) {
    return {
      status: 404,
      code: "not_found",
      reason: `[engine] release ${r.id} has no step run ${e.step_run_id}`,
    };
  }
  const wrongKind = (want: "runner" | "control_plane"): Refusal | undefined =>
    sr.kind === want
      ? undefined
      : {
          status: 422,
          code: "illegal_transition",
          reason: `[engine] ${e.type} does not apply to ${sr.id}: it is a ${sr.kind.replace("_", "-")} step run`,
        };
  switch (e.type) {
    case "preflight":
      return wrongKind("runner") ?? preflight(d, sr, e);
    case "callback":
      return wrongKind("runner") ?? callback(d, sr, e);
    case "retry":
      return retry(d, sr, e);
    case "resolve":
      return resolve(d, sr, e);
    default:
      break;
  }
  // Outcomes of the engine's own effects: after the release ends they only get recorded.
  if (guards.isTerminal(r)) {
    d.ignore(`[engine] ${e.type} for ${sr.id} ignored: release ${r.id} is ${r.state}`, sr.id);
    return undefined;
  }
  const refused = wrongKind(
    e.type === "applied" || e.type === "observed" ? "control_plane" : "runner",
  );
  if (refused) {
    if (e.type !== "deadline") return refused;
    d.ignore(
      `[engine] ${e.kind} deadline of ${sr.id} ignored: control-plane step runs have no deadlines`,
      sr.id,
    );
    return undefined;
  }
  if (e.type === "dispatch_accepted") dispatchAccepted(d, sr, e);
  else if (e.type === "dispatch_failed") dispatchFailed(d, sr, e);
  else if (e.type === "applied") applied(d, sr, e);
  else if (e.type === "observed") observed(d, sr, e);
  else runnerDeadline(d, sr, e);
  return undefined;
}
