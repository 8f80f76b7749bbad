/**
 * Preflight: "may attempt N of step run X proceed?" (docs/state-machine.md). This is where attempts
 * are numbered and fenced; checks run in the order of docs/state-machine.md "Runner steps".
 */
import type { Attempt, PreflightEvent, Release, StepRun } from "../types.ts";
import { actionOf, type Draft, describe, type Refusal, stepOf } from "./draft.ts";
import { beginForwardAtCursor } from "./forward.ts";
import { guards } from "./guards.ts";
import { parallelWaveOf, releaseRerunDeadline, stuckInWave } from "./lanes.ts";
import { isProbeRun } from "./probe.ts";
import { whereIs } from "./where.ts";

const conflict = (code: string, reason: string): Refusal => ({ status: 409, code, reason });

export function preflight(d: Draft, sr: StepRun, e: PreflightEvent): Refusal | undefined {
  const r = d.release;
  // 0. a re-run from the Actions UI (same run, later run attempt) of a forward step run whose
  // release has moved on: declined, saying why, before the generation check words it "stale".
  const declined = rerunDeclined(r, sr, e);
  if (declined) return declined;
  // 1. identity (rule 1): evidence from another release, generation or manifest never counts.
  if (
    e.release_id !== r.id ||
    e.generation !== r.generation ||
    e.manifest_digest !== r.manifest_digest
  ) {
    const what =
      e.release_id !== r.id
        ? `release ${e.release_id} is not ${r.id}`
        : e.generation !== r.generation
          ? `generation ${e.generation} is not the current generation ${r.generation}`
          : `manifest digest ${e.manifest_digest.slice(0, 12)}… is not ${r.manifest_digest.slice(0, 12)}…`;
    return conflict(
      "stale",
      `[engine] preflight for ${sr.id} is stale: ${what}; this dispatch no longer counts`,
    );
  }
  const action = actionOf(r, sr);
  if (action.kind !== "runner") {
    return {
      status: 422,
      code: "illegal_transition",
      reason: `[engine] ${sr.id} is a control-plane step run; runners never preflight it`,
    };
  }
  // The work itself (tool, args, operation key) must be what the engine dispatched: a payload
  // edited by hand (workflow_dispatch, forged repository_dispatch) never opens an attempt.
  if (e.expected_payload_digest === undefined || e.payload_digest !== e.expected_payload_digest) {
    const expected = e.expected_payload_digest ?? "(not computed)";
    return conflict(
      "payload_mismatch",
      `[engine] preflight for ${sr.id}: the payload's tool/args/operation key differ from what the engine dispatched (digest ${e.payload_digest.slice(0, 12)}… ≠ ${expected.slice(0, 12)}…); run only payloads the engine dispatched — copy it from the step-run page`,
    );
  }
  if (e.tool !== action.tool) {
    return conflict(
      "wrong_tool",
      `[engine] preflight for ${sr.id} names tool ${e.tool}, but the step runs ${action.tool}`,
    );
  }
  const pinned = r.manifest.tool_revision;
  if (pinned && e.sha.toLowerCase() !== pinned.toLowerCase()) {
    return conflict(
      "revision_mismatch",
      `[engine] preflight for ${sr.id} runs from commit ${e.sha}, but the manifest pins tools at ${pinned}; merge or revert so the default branch matches`,
    );
  }
  // 2. the release no longer wants this step run (rule 2).
  const wanted =
    sr.direction === "fwd"
      ? guards.isCurrent(r, sr)
      : r.cursor === sr.step_index && r.state === "compensating";
  if (!wanted || sr.state === "succeeded") {
    const why =
      sr.state === "succeeded" ? "it already succeeded" : `release ${r.id} is ${whereIs(r)}`;
    return conflict("not_wanted", `[engine] ${sr.id} may not proceed: ${why}`);
  }
  // 3. an older dispatch of this step run (an engine or operator retry replaced it).
  if (e.dispatch !== sr.dispatch) {
    return conflict(
      "stale_dispatch",
      `[engine] preflight for ${sr.id} carries dispatch ${e.dispatch}, the step run is on dispatch ${sr.dispatch}; the newer dispatch stands`,
    );
  }
  const latest = sr.attempts[sr.attempts.length - 1];
  // 4. first run to ask binds.
  if (sr.bound_run_id === null) {
    if (!guards.awaitsFirstRun(sr)) {
      return conflict(
        "not_wanted",
        `[engine] ${sr.id} is ${sr.state} (${sr.last_error ?? "no run bound"}); retry the step run to dispatch it again`,
      );
    }
    sr.bound_run_id = e.run_id;
    return openAttempt(d, sr, e, `bound to run ${e.run_id}`);
  }
  // 5. another run id: GitHub delivered the dispatch twice.
  if (sr.bound_run_id !== e.run_id) {
    return conflict(
      "duplicate_delivery",
      `[engine] ${sr.id} is bound to run ${sr.bound_run_id}; run ${e.run_id} is a duplicate delivery of the same dispatch and must not run`,
    );
  }
  // 6. the same (run id, run attempt) again: the same answer.
  const same = sr.attempts.find(
    (a) => a.run_id === e.run_id && a.run_attempt === e.run_attempt && a.dispatch === sr.dispatch,
  );
  if (same) {
    if (same === latest && same.state === "running") {
      d.ignore(
        `[engine] repeated preflight for ${sr.id} run ${e.run_id} attempt ${e.run_attempt}: same answer, attempt ${same.n}`,
        sr.id,
      );
      d.reply = accepted(d, sr, same);
      return undefined;
    }
    return conflict(
      "fenced",
      `[engine] step run ${sr.id} attempt ${same.n} is ${same.state}; it may not run again`,
    );
  }
  // 7. a re-run from the Actions UI: a new attempt fences every older one.
  if (latest && e.run_attempt > latest.run_attempt) {
    if (sr.state !== "running" && sr.state !== "failed" && sr.state !== "unknown") {
      return conflict("not_wanted", `[engine] ${sr.id} is ${sr.state}; a re-run may not start it`);
    }
    return openAttempt(d, sr, e, `re-run ${e.run_attempt} of run ${e.run_id}`);
  }
  // 8. an older run attempt.
  return conflict(
    "fenced",
    `[engine] step run ${sr.id} is fenced: run attempt ${e.run_attempt} < current run attempt ${latest?.run_attempt ?? 0}; the newer attempt's result stands`,
  );
}

function rerunDeclined(r: Release, sr: StepRun, e: PreflightEvent): Refusal | undefined {
  const latest = sr.attempts[sr.attempts.length - 1];
  if (
    e.release_id !== r.id ||
    sr.direction !== "fwd" ||
    sr.bound_run_id !== e.run_id ||
    e.dispatch !== sr.dispatch ||
    !latest ||
    e.run_attempt <= latest.run_attempt ||
    r.state === "running" ||
    r.state === "paused"
  ) {
    return undefined;
  }
  const why = r.reason ? ` (${r.reason})` : "";
  return conflict(
    "rerun_declined",
    `[engine] re-run ${e.run_attempt} of run ${e.run_id} is declined: release ${r.id} is ${r.state}${why}; ${sr.id} will not run again and this job touched nothing`,
  );
}

function openAttempt(d: Draft, sr: StepRun, e: PreflightEvent, how: string): undefined {
  const r = d.release;
  const step = stepOf(r, sr);
  for (const a of sr.attempts) if (a.state !== "succeeded") a.state = "fenced";
  const attempt: Attempt = {
    n: sr.attempts.length + 1,
    dispatch: sr.dispatch,
    run_id: e.run_id,
    run_attempt: e.run_attempt,
    sha: e.sha,
    state: "running",
    preflight_at: d.now,
    callback_at: null,
    status: null,
    overall: null,
  };
  sr.attempts.push(attempt);
  sr.state = "running";
  sr.finished_at = null;
  sr.last_error = null;
  sr.rerun_deadline = null;
  // The runner may touch the lane from now on.
  if (sr.direction === "fwd" && !isProbeRun(r, sr))
    r.high_water_mark = Math.max(r.high_water_mark, sr.step_index);
  d.emit({
    type: "deadline",
    step_run_id: sr.id,
    kind: "callback",
    dispatch: sr.dispatch,
    attempt: attempt.n,
    at: d.now + step.callback_deadline_ms,
  });
  d.accept(
    `[engine] ${describe(r, sr)} attempt ${attempt.n} may proceed (${how}); callback due within ${step.callback_deadline_ms} ms`,
    sr.id,
  );
  // A parallel wave stays paused while another of its lanes still waits on a re-run or retry.
  // Not while an operator's pause (or another hold) is in force: that waits for its verb.
  if (r.state === "paused" && !r.hold && stuckInWave(r).length === 0) {
    r.state = "running";
    r.reason = null;
    r.rerun_deadline = null;
    d.accept(`[engine] release ${r.id} running again: ${sr.id} was re-run`, sr.id);
    // Lanes of a parallel wave that finished a row while the release was paused move on.
    if (parallelWaveOf(r, sr.step_index) !== null) beginForwardAtCursor(d);
  } else if (r.state === "paused" && typeof r.rerun_deadline === "number") {
    // Other lanes still wait: the release's deadline is now the earliest of theirs.
    r.rerun_deadline = releaseRerunDeadline(r);
  }
  d.reply = accepted(d, sr, attempt);
  return undefined;
}

function accepted(d: Draft, sr: StepRun, a: Attempt) {
  return {
    proceed: true,
    step_run_id: sr.id,
    attempt: a.n,
    release_id: d.release.id,
    generation: d.release.generation,
  };
}
