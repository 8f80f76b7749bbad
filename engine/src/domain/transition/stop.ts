/**
 * The stop condition in the release (docs/gate.md "The stop condition"; docs/failure-cases.md
 * F18). From the candidate's first observed exposure (a traffic assert above 0% that succeeded)
 * the release is watched: a `stop_check` effect asks the reconciler to read the metrics source
 * every `interval_ms`, counted from the latest wave's observed exposure, and the result comes
 * back as a `stop_check` event. It runs in every state where the candidate serves traffic —
 * held at a gate, baking, paused by an operator or at an inconclusive gate, held for a manual
 * promotion, waiting in a re-run window, between waves, through a bake after the last wave —
 * and stops when the release compensates or ends. A breach compensates, or holds the release
 * for an operator when the recipe says `on_breach: hold`.
 */
import { stopConditionOf } from "../gate/stop-condition.ts";
import { waveLabel } from "../gate/waves.ts";
import type { ReleaseEvent, StepRun } from "../types.ts";
import { beginCompensation } from "./compensation.ts";
import type { Draft } from "./draft.ts";
import { guards } from "./guards.ts";
import { holdWords } from "./holds.ts";

type Ev<T extends ReleaseEvent["type"]> = Extract<ReleaseEvent, { type: T }>;

/** Who holds a release whose stop condition breached with `on_breach: hold`. */
export const STOP_CONDITION_ACTOR = "stop condition";

/**
 * Whether the forward step run `sr`, which just succeeded, observed the candidate's exposure:
 * a traffic assert above 0%.
 */
function observesExposure(d: Draft, sr: StepRun): boolean {
  const step = d.release.manifest.steps[sr.step_index];
  const op = step?.forward.kind === "control_plane" ? step.forward.request : null;
  return sr.direction === "fwd" && op?.op === "assert_traffic" && op.percent > 0;
}

/**
 * Call when a forward step run succeeded: a traffic assert above 0% starts the watch (the first
 * time) or moves it to this wave (counts from now on), with an evaluation due at once (it opens
 * the window of a source that counts from its first read). Nothing for a release without a stop
 * condition.
 */
export function watchExposure(d: Draft, sr: StepRun): void {
  const r = d.release;
  if (!observesExposure(d, sr)) return;
  const stop = stopConditionOf(r.manifest);
  if (!stop) return;
  const wave = r.manifest.steps[sr.step_index]?.wave ?? 0;
  const seq = r.stop?.seq ?? 0;
  const first = !r.stop;
  r.stop = {
    wave,
    since: d.now,
    seq,
    at: r.stop?.at ?? null,
    status: r.stop?.status ?? "pending",
    reason: r.stop?.reason ?? null,
  };
  d.emit({
    type: "stop_check",
    step_run_id: sr.id,
    seq: seq + 1,
    generation: r.generation,
    not_before: null,
  });
  d.accept(
    first
      ? `[engine] stop condition watched from ${waveLabel(r.manifest, wave)} on, every ${stop.interval_ms} ms, in every state where the candidate serves traffic (${stop.metrics.map((m) => m.name).join(", ")}; a breach ${stop.on_breach === "hold" ? "holds the release" : "compensates"})`
      : `[engine] stop condition counts from ${waveLabel(r.manifest, wave)}'s exposure on`,
    sr.id,
  );
}

/**
 * Whether the release, every step done, still owes the bake after its last wave
 * (`stop_condition.bake_ms`); if so, begins it (the release stays running, watched) and returns
 * true. Returns false once the bake is done or when there is none.
 */
export function holdsForFinalBake(d: Draft): boolean {
  const r = d.release;
  const stop = stopConditionOf(r.manifest);
  if (!stop || stop.bake_ms <= 0 || !r.stop) return false;
  if (r.stop.final_bake?.done) return false;
  if (!r.stop.final_bake) {
    r.stop.final_bake = { until: d.now + stop.bake_ms, done: false };
    r.reason = `every step done; baking ${Math.round(stop.bake_ms / 1000)} s after the last wave while the stop condition is watched`;
    d.accept(`[engine] release ${r.id} ${r.reason}`);
  }
  return true;
}

/** A `stop_check` event: one evaluation of the release's stop condition. */
export function stopChecked(d: Draft, e: Ev<"stop_check">, finish: (d: Draft) => void): undefined {
  const r = d.release;
  const ev = e.evaluation;
  const w = r.stop;
  const watching =
    w && (r.state === "running" || r.state === "paused") && e.generation === r.generation;
  if (!watching) {
    d.ignore(
      `[engine] stop-condition evaluation ${ev.seq} ignored: release ${r.id} is ${r.state}${w ? "" : " and not watched"}`,
    );
    return undefined;
  }
  if (ev.seq !== w.seq + 1) {
    d.ignore(
      `[engine] stop-condition evaluation ${ev.seq} ignored: the release waits for evaluation ${w.seq + 1}`,
    );
    return undefined;
  }
  const stop = stopConditionOf(r.manifest);
  if (!stop) throw new Error(`[engine] release ${r.id} is watched but has no stop condition`);
  const label = waveLabel(r.manifest, w.wave);
  const status = ev.breached ? "breached" : ev.no_data ? "no_data" : "ok";
  const changed = status !== w.status;
  w.seq = ev.seq;
  w.at = ev.at;
  w.status = status;
  w.reason = ev.reason;
  d.changed = true;
  const data = {
    stop_check: {
      seq: ev.seq,
      wave: ev.wave,
      breached: ev.breached,
      reason: ev.reason,
      metrics: ev.metrics.filter((m) => m.verdict === "inferior" || m.verdict === "slo_breached"),
    },
  } as unknown as Parameters<Draft["accept"]>[2];
  const next = () =>
    d.emit({
      type: "stop_check",
      step_run_id: stepRunOfWave(d, w.wave),
      seq: ev.seq + 1,
      generation: r.generation,
      not_before: Math.max(ev.at, d.now) + stop.interval_ms,
    });
  if (ev.breached && !r.roll_forward_hold) {
    if (stop.on_breach === "compensate") {
      d.accept(
        `[engine] stop condition breached at ${label} (evaluation ${ev.seq}): ${ev.reason}`,
        null,
        data,
      );
      beginCompensation(d, `${ev.reason} (at ${label}, evaluation ${ev.seq})`);
      if (r.state === "compensating") {
        r.stop = null;
        return undefined;
      }
      next(); // held for a roll forward instead: still watched
      return undefined;
    }
    // Held already by this stop condition, or paused where only an operator's verb goes on (a
    // re-run window, an inconclusive gate): recorded; the release stays as it is.
    const holdable = r.state === "running" || (r.hold && r.hold.kind !== "dark");
    if (r.hold?.actor === STOP_CONDITION_ACTOR || !holdable) {
      if (changed) {
        d.accept(`[engine] release ${r.id} stays ${r.state}: ${ev.reason}`, null, data);
      }
      next();
      return undefined;
    }
    // A running release, or one held for a promotion or by an operator: held by the breach
    // (a promotion hold comes back at the next wave's first step once resumed).
    const before = r.hold ? ` (it was ${holdWords(r.hold)})` : "";
    r.state = "paused";
    r.hold = {
      kind: "pause",
      actor: STOP_CONDITION_ACTOR,
      reason: `${ev.reason}; resume (baton resume ${r.id}) once it is understood, or abort (baton abort ${r.id}) to compensate`,
      at: d.now,
    };
    r.reason = holdWords(r.hold);
    d.accept(
      `[engine] release ${r.id} held by its stop condition at ${label} (evaluation ${ev.seq})${before}: ${ev.reason}`,
      null,
      data,
    );
    next();
    return undefined;
  }
  if (changed || ev.seq === 1) {
    d.accept(
      `[engine] stop condition at ${label} (evaluation ${ev.seq}): ${ev.reason}`,
      null,
      data,
    );
  }
  const bake = w.final_bake;
  if (bake && !bake.done && ev.at >= bake.until && r.state === "running" && !ev.breached) {
    bake.done = true;
    d.accept(
      `[engine] release ${r.id} baked ${Math.round(stop.bake_ms / 1000)} s after the last wave with no breach of its stop condition`,
    );
    finish(d);
    if (guards.isTerminal(r)) {
      r.stop = null;
      return undefined;
    }
  }
  next();
  return undefined;
}

/** The forward step run of wave `wave`'s traffic assert (what the watch's effects name). */
function stepRunOfWave(d: Draft, wave: number): string {
  const r = d.release;
  const step = r.manifest.steps.find(
    (s) =>
      s.wave === wave &&
      s.forward.kind === "control_plane" &&
      s.forward.request.op === "assert_traffic",
  );
  const sr = step
    ? r.step_runs.find((x) => x.step_index === step.index && x.direction === "fwd")
    : undefined;
  return sr?.id ?? "";
}
