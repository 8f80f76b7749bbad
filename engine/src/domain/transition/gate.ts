/**
 * The evidence gate in the release (docs/gate.md "In the release"; docs/state-machine.md
 * "Gates"). After a gated wave's last step (its traffic assert) the release is held at the
 * wave's gate: a `gate` effect asks the reconciler to evaluate it (read the metrics source,
 * store the evidence); the evidence comes back as a `gate` event, which this module guards
 * like any other event: only evidence bound to this release, generation, manifest digest and
 * wave, with the next evaluation number, is read. pass → the next wave; fail → compensation
 * with the decision's reason; wait → the next evaluation `interval_ms` later; inconclusive →
 * `paused` for an operator, whose exits are `promote` and `abort`. An operator's pause taken
 * while the gate decides survives every decision but a fail (docs/lifecycle.md).
 */

import { boundTo, type EvidenceBinding, evidenceSatisfies } from "../gate/evidence.ts";
import { gateAt, lastStepOfWave, waveLabel } from "../gate/waves.ts";
import { gateProgress } from "../gate-progress.ts";
import { closedReleaseAccepts } from "../lifecycle-states.ts";
import type { ReleaseEvent, StepRun } from "../types.ts";
import { suggestedCommand } from "../verbs.ts";
import { beginCompensation } from "./compensation.ts";
import { type Draft, type Refusal, stepRunAt } from "./draft.ts";
import { beginForwardAtCursor } from "./forward.ts";
import { guards } from "./guards.ts";
import {
  holdVerb,
  holdWords,
  inconclusiveGateReason,
  pausedAtInconclusiveGateReason,
} from "./holds.ts";
import { whereIs } from "./where.ts";

type Ev<T extends ReleaseEvent["type"]> = Extract<ReleaseEvent, { type: T }>;

/**
 * Whether the forward step run `sr`, which just succeeded, ends a wave that has a gate (or a
 * guardrail watch): then the release is held there instead of moving on.
 */
export function endsGatedWave(d: Draft, sr: StepRun): boolean {
  const r = d.release;
  const step = r.manifest.steps[sr.step_index];
  if (!step || sr.direction !== "fwd") return false;
  return (
    lastStepOfWave(r.manifest, step.wave) === step.index && gateAt(r.manifest, step.wave) !== null
  );
}

/**
 * Holds the release at the gate of the wave `sr` ended (call with `cursor` already on the next
 * step, not begun): exposure was observed now, so counts are taken from now, and the first
 * evaluation is due at once (it opens the window of a source that counts from its first read).
 */
export function beginGate(d: Draft, sr: StepRun): void {
  const r = d.release;
  const wave = r.manifest.steps[sr.step_index]?.wave ?? 0;
  const gate = gateAt(r.manifest, wave);
  if (!gate) return;
  r.gate = {
    wave,
    phase: gate.phase,
    since: d.now,
    seq: 0,
    decision: "pending",
    reason: null,
    at: null,
  };
  d.emit({
    type: "gate",
    step_run_id: sr.id,
    wave,
    phase: gate.phase,
    seq: 1,
    since: d.now,
    generation: r.generation,
    not_before: null,
  });
  const what =
    gate.phase === "gate"
      ? `until its gate decides (every ${gate.analysis.interval_ms} ms, bake ${gate.analysis.bake_ms} ms, at most ${gate.analysis.max_wait_ms} ms)`
      : `while its guardrails are watched for ${gate.analysis.bake_ms} ms (every ${gate.analysis.interval_ms} ms)`;
  d.accept(`[engine] release ${r.id} held at ${waveLabel(r.manifest, wave)} ${what}`, sr.id, {
    gate: { wave, phase: gate.phase, since: d.now },
  });
}

/** The binding a piece of evidence must have to be read by this release now. */
function bindingOf(d: Draft, wave: number): EvidenceBinding {
  const r = d.release;
  return {
    release_id: r.id,
    generation: r.generation,
    manifest_digest: r.manifest_digest,
    wave,
  };
}

/** A `gate` event: one stored evaluation of the gate the release is held at. */
export function gateEvaluated(d: Draft, e: Ev<"gate">): Refusal | undefined {
  const r = d.release;
  const ev = e.evidence;
  const g = r.gate;
  if (!boundTo(ev, bindingOf(d, ev.wave))) {
    return {
      status: 409,
      code: "stale",
      reason: `[engine] gate evidence for release ${ev.release_id} generation ${ev.generation} manifest ${ev.manifest_digest.slice(0, 12)} is not bound to release ${r.id} generation ${r.generation} manifest ${r.manifest_digest.slice(0, 12)}; it satisfies no guard`,
    };
  }
  // An operator's pause does not stop a gate under way: it still decides (a fail compensates),
  // and a pass holds the release paused instead of beginning the next wave.
  const evaluating = r.state === "running" || (r.state === "paused" && r.hold?.kind === "pause");
  if (!g || g.wave !== ev.wave || !evaluating || g.decision === "inconclusive") {
    d.ignore(
      `[engine] gate evaluation ${ev.seq} of ${waveLabel(r.manifest, ev.wave)} ignored: release ${r.id} is ${whereIs(r)}${g ? ` at the gate of ${waveLabel(r.manifest, g.wave)}` : ""}, not evaluating that gate`,
    );
    return undefined;
  }
  if (ev.seq !== g.seq + 1 || ev.phase !== g.phase) {
    d.ignore(
      `[engine] gate evaluation ${ev.seq} (${ev.phase}) of ${waveLabel(r.manifest, ev.wave)} ignored: the release waits for evaluation ${g.seq + 1} (${g.phase})`,
    );
    return undefined;
  }
  const gate = gateAt(r.manifest, g.wave);
  if (!gate) throw new Error(`[engine] release ${r.id} is held at ${g.wave}, which has no gate`);
  const label = waveLabel(r.manifest, g.wave);
  g.seq = ev.seq;
  g.decision = ev.decision;
  g.reason = ev.reason;
  g.at = ev.at;
  g.progress = gateProgress(ev, gate.analysis);
  const data = {
    gate: {
      wave: ev.wave,
      phase: ev.phase,
      seq: ev.seq,
      decision: ev.decision,
      elapsed_ms: ev.elapsed_ms,
    },
  };
  const stepRun = stepRunAt(r, lastStepOfWave(r.manifest, g.wave), "fwd");
  const srId = stepRun?.id ?? null;
  if (ev.decision === "fail") {
    d.accept(`[engine] gate of ${label} failed (evaluation ${ev.seq}): ${ev.reason}`, srId, data);
    r.gate = null;
    beginCompensation(d, `gate of ${label} failed: ${ev.reason}`);
    return undefined;
  }
  if (ev.decision === "inconclusive") {
    // promote or abort decides now. An operator's pause in force survives it: the release
    // waits for both the pause's resume and the gate's promote (or abort).
    r.state = "paused";
    if (r.hold?.kind === "pause") {
      r.reason = pausedAtInconclusiveGateReason(r, r.hold);
      d.accept(`[engine] release ${r.id} stays paused: ${r.reason}`, srId, data);
      return undefined;
    }
    r.hold = null;
    r.reason = inconclusiveGateReason(r);
    d.accept(`[engine] release ${r.id} paused: ${r.reason}`, srId, data);
    return undefined;
  }
  const passed =
    ev.decision === "pass" &&
    (g.phase === "gate"
      ? evidenceSatisfies(ev, bindingOf(d, g.wave))
      : ev.elapsed_ms >= gate.analysis.bake_ms);
  if (passed) {
    d.accept(
      `[engine] gate of ${label} passed (evaluation ${ev.seq}, ${Math.round(ev.elapsed_ms / 1000)} s): ${ev.reason}`,
      srId,
      data,
    );
    r.gate = null;
    if (r.hold) {
      d.accept(
        `[engine] release ${r.id} stays paused (${holdWords(r.hold)}); the next wave waits for ${holdVerb(r, r.hold)}`,
        srId,
      );
      return undefined;
    }
    r.reason = null;
    beginForwardAtCursor(d);
    return undefined;
  }
  // wait (or a watch with no breach before its bake time): evaluate again after the interval,
  // carrying the streaks the limits count.
  const streak = {
    errors: ev.read_error ? (g.streak?.errors ?? 0) + 1 : 0,
    undecided: ev.undecided ? (g.streak?.undecided ?? 0) + 1 : 0,
  };
  g.streak = streak;
  d.emit({
    type: "gate",
    step_run_id: srId ?? "",
    wave: g.wave,
    phase: g.phase,
    seq: ev.seq + 1,
    since: g.since,
    generation: r.generation,
    not_before: Math.max(ev.at, d.now) + gate.analysis.interval_ms,
    ...(streak.errors > 0 || streak.undecided > 0 ? { streak } : {}),
  });
  d.accept(
    `[engine] gate of ${label} evaluation ${ev.seq}: ${ev.decision}: ${ev.reason}`,
    srId,
    data,
  );
  return undefined;
}

/**
 * `promote`: an operator accepts the risk of a gate that ended inconclusive (docs/gate.md
 * "Inconclusive"); the release runs on into the next wave, or, when an operator's pause is in
 * force, stays paused until `resume` (a pause holds until resume: docs/lifecycle.md). Only a
 * release paused at an inconclusive gate, or waiting for a manual promotion.
 */
export function promote(d: Draft, e: Ev<"promote">): Refusal | undefined {
  const r = d.release;
  const g = r.gate;
  const h = r.hold;
  if (r.state === "paused" && h?.kind === "promotion" && h.wave !== undefined) {
    // `promotion: manual`: the operator widens to the next wave.
    const label = waveLabel(r.manifest, h.wave);
    r.state = "running";
    r.reason = null;
    r.hold = null;
    r.promoted = [...(r.promoted ?? []), h.wave];
    d.accept(
      `[engine] release ${r.id} promoted by ${e.actor}${e.reason ? `: ${e.reason}` : ""}; ${label} begins (promotion is manual)`,
      null,
      { actor: e.actor, reason: e.reason, wave: h.wave },
    );
    beginForwardAtCursor(d);
    return undefined;
  }
  if (r.state !== "paused" || !g || g.decision !== "inconclusive") {
    const held =
      r.state === "paused" && h ? ` (${holdWords(h)}); it waits for ${holdVerb(r, h)}` : "";
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is ${whereIs(r)}${held}; promote is accepted only by a release paused at an inconclusive gate or waiting for a manual promotion${guards.isTerminal(r) ? `; ${closedReleaseAccepts(r.id, r.state)}` : ""}`,
    };
  }
  const label = waveLabel(r.manifest, g.wave);
  r.gate = null;
  if (h?.kind === "pause") {
    // The gate's question is answered; the operator's pause still holds the next wave.
    r.reason = `${holdWords(h)}; nothing new starts until resume (${suggestedCommand("resume", { target: r.id })})`;
    d.accept(
      `[engine] gate of ${label} promoted by ${e.actor}${e.reason ? `: ${e.reason}` : ""}; the evidence was inconclusive, the operator accepts the risk; release ${r.id} stays paused (${holdWords(h)}); the next wave waits for ${holdVerb(r, h)}`,
      null,
      { actor: e.actor, reason: e.reason, wave: g.wave },
    );
    return undefined;
  }
  r.state = "running";
  r.reason = null;
  d.accept(
    `[engine] gate of ${label} promoted by ${e.actor}${e.reason ? `: ${e.reason}` : ""}; the evidence was inconclusive, the operator accepts the risk`,
    null,
    { actor: e.actor, reason: e.reason, wave: g.wave },
  );
  beginForwardAtCursor(d);
  return undefined;
}
