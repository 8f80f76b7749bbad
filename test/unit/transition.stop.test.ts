/**
 * F18, in the transition: the stop condition (docs/gate.md "The stop condition") is watched
 * from the candidate's first observed exposure in every state where the candidate serves
 * traffic — held at a gate, paused by an operator, paused at an inconclusive gate, held for a
 * manual promotion, waiting in a re-run window, between waves with a step in flight, baking
 * after the last wave — and a breach compensates from each (or holds, with `on_breach: hold`).
 * An evaluation without a breach asks for the next one interval_ms later; only the next
 * evaluation number of the current generation is read; a compensating or finished release is
 * no longer watched. Pure rows over a compiled gated manifest.
 */
import { describe, expect, it } from "vitest";
import type { GateEvidence } from "../../engine/src/domain/gate/evidence.ts";
import { lastStepOfWave } from "../../engine/src/domain/gate/waves.ts";
import { newRelease, transition } from "../../engine/src/domain/transition.ts";
import type { Release, StopCheckEffect, StopEvaluation } from "../../engine/src/domain/types.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { advanceTo, callbackOf, ok, preflightOf, sr, T0 } from "../support/sim/drive.ts";
import { goodRecipe } from "./recipe-fixture.ts";

const INTERVAL = 2_000;
const ANALYSIS = {
  min_samples: 100,
  bake_ms: 10_000,
  interval_ms: INTERVAL,
  max_wait_ms: 60_000,
  metrics: [
    { name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.01 } },
    {
      name: "slow",
      kind: "latency",
      threshold_ms: 250,
      margin: { absolute: 0.05 },
      required: false,
    },
  ],
};

function compiled(o: { stop?: object; manual?: boolean; analysis?: object } = {}): Release {
  const r = goodRecipe() as Record<string, unknown> & { rollout: { waves: object[] } };
  r.analysis = o.analysis ?? ANALYSIS;
  if (o.stop) r.stop_condition = o.stop;
  if (o.manual) r.rollout.waves[0] = { ...r.rollout.waves[0], promotion: "manual" };
  const c = compileRecipeInput(r as never);
  return newRelease("r5", 5, c.manifest, c.manifest_digest, T0);
}

/** Passes steps up to and including wave 0's traffic assert: held at its gate, watched. */
function atGate(r0: Release): Release {
  const last = lastStepOfWave(r0.manifest, 0);
  const before = advanceTo(r0, last);
  const s = sr(before, last);
  const out = ok(before, { type: "applied", step_run_id: s.id, outcome: "ok", message: "ok" });
  const watch = out.effects.find((e): e is StopCheckEffect => e.type === "stop_check");
  expect(watch).toMatchObject({ seq: 1, not_before: null, step_run_id: s.id });
  expect(out.release.stop).toMatchObject({ wave: 0, since: T0, seq: 0, status: "pending" });
  return out.release;
}

function gateEvidence(r: Release, decision: GateEvidence["decision"]): GateEvidence {
  return {
    release_id: r.id,
    generation: r.generation,
    manifest_digest: r.manifest_digest,
    wave: r.gate?.wave ?? 0,
    seq: (r.gate?.seq ?? 0) + 1,
    at: T0 + 1000,
    phase: "gate",
    decision,
    reason: decision,
    alpha: 0.05,
    elapsed_ms: 60_000,
    arms: { candidate: 10, control: 90 },
    srm: null,
    metrics: [],
  };
}

function check(r: Release, breached: boolean, at = T0 + 5000): StopEvaluation {
  return {
    seq: (r.stop?.seq ?? 0) + 1,
    at,
    wave: r.stop?.wave ?? 0,
    since: r.stop?.since ?? T0,
    breached,
    no_data: false,
    reason: breached
      ? "stop condition breached: slow: candidate 40.00% vs control 5.00%, allowed +5.0 points: worse (at least 30 points worse than the control, anytime-valid at α 0.05; candidate 400/1,000, control 500/10,000, lower is better)"
      : "no breach: slow: …",
    arms: { candidate: 1000, control: 10_000 },
    metrics: [],
  };
}

const stopEvent = (r: Release, breached: boolean, at?: number) =>
  ({ type: "stop_check", generation: r.generation, evaluation: check(r, breached, at) }) as const;

/** The states where the candidate serves traffic, each from a compiled gated release. */
const STATES: [string, () => Release][] = [
  ["held at a gate, baking", () => atGate(compiled())],
  [
    "paused by an operator",
    () => ok(atGate(compiled()), { type: "pause", actor: "alice", reason: "looks odd" }).release,
  ],
  [
    "paused at an inconclusive gate",
    () => {
      const r = atGate(compiled());
      return ok(r, { type: "gate", evidence: gateEvidence(r, "inconclusive") }).release;
    },
  ],
  [
    "held for a manual promotion",
    () => {
      const r = atGate(compiled({ manual: true }));
      return ok(r, { type: "gate", evidence: gateEvidence(r, "pass") }).release;
    },
  ],
  [
    "between waves, a step in flight",
    () => {
      const r = atGate(compiled());
      return ok(r, { type: "gate", evidence: gateEvidence(r, "pass") }).release;
    },
  ],
  [
    "waiting in a re-run window",
    () => {
      const r = atGate(compiled());
      let cur = ok(r, { type: "gate", evidence: gateEvidence(r, "pass") }).release;
      // Wave 2's first runner step fails; the release waits, paused, for a re-run.
      while (sr(cur, cur.cursor).kind !== "runner") {
        const s = sr(cur, cur.cursor);
        cur = ok(cur, { type: "applied", step_run_id: s.id, outcome: "ok", message: "ok" }).release;
      }
      const s = sr(cur, cur.cursor);
      cur = ok(cur, { type: "dispatch_accepted", step_run_id: s.id, dispatch: 1 }).release;
      cur = ok(cur, preflightOf(cur, s.id, { run_id: "9001" })).release;
      cur = ok(cur, callbackOf(s.id, "fail", { run_id: "9001" })).release;
      expect(cur.rerun_deadline).toBeGreaterThan(T0);
      return cur;
    },
  ],
];

describe("the stop condition in the transition", () => {
  it.each(STATES)("%s: watched; a breach compensates", (_, make) => {
    const r = make();
    expect(["running", "paused"]).toContain(r.state);
    expect(r.stop).toBeTruthy();
    const quiet = ok(r, stopEvent(r, false), T0 + 5000);
    expect(quiet.release.state).toBe(r.state);
    expect(quiet.release.stop).toMatchObject({ seq: (r.stop?.seq ?? 0) + 1, status: "ok" });
    expect(quiet.effects.filter((e) => e.type === "stop_check")).toEqual([
      expect.objectContaining({ seq: (r.stop?.seq ?? 0) + 2, not_before: T0 + 5000 + INTERVAL }),
    ]);
    const breach = ok(r, stopEvent(r, true), T0 + 5000);
    expect(breach.release.state).toBe("compensating");
    expect(breach.release.stop).toBeNull();
    expect(breach.release.reason).toMatch(/^stop condition breached: slow: candidate 40\.00%/);
    expect(breach.effects.some((e) => e.type === "stop_check")).toBe(false);
    expect(
      breach.history.some((h) => /stop condition breached at wave 1 \(10%\)/.test(h.message)),
    ).toBe(true);
  });

  it("on_breach: hold pauses a running release, held by the stop condition; resume lifts it", () => {
    const r = atGate(
      compiled({
        stop: {
          on_breach: "hold",
          metrics: [
            { name: "slow", kind: "latency", threshold_ms: 250, margin: { absolute: 0.05 } },
          ],
        },
      }),
    );
    const held = ok(r, stopEvent(r, true), T0 + 5000).release;
    expect(held.state).toBe("paused");
    expect(held.hold).toMatchObject({ kind: "pause", actor: "stop condition" });
    // Still watched while held: a second breach changes nothing but asks for the next look.
    const again = ok(held, stopEvent(held, true, T0 + 7000), T0 + 7000);
    expect(again.release.state).toBe("paused");
    expect(again.effects.map((e) => e.type)).toEqual(["stop_check"]);
    expect(ok(held, { type: "resume", actor: "alice" }).release.hold).toBeNull();
  });

  it("reads only the next evaluation of the current generation", () => {
    const r = atGate(compiled());
    for (const ev of [
      { ...stopEvent(r, true), generation: r.generation + 1 },
      { ...stopEvent(r, true), evaluation: { ...check(r, true), seq: 2 } },
    ]) {
      const res = transition(r, ev, T0 + 5000);
      expect(res.ok && res.changed).toBe(false);
    }
  });

  it("is not watched before the candidate's exposure, nor once compensating", () => {
    const r0 = compiled();
    const before = advanceTo(r0, 1);
    expect(before.stop ?? null).toBeNull();
    const r = atGate(r0);
    const aborted = ok(r, { type: "abort", actor: "alice", reason: "enough" }).release;
    expect(aborted.state).toBe("compensating");
    const res = transition(aborted, stopEvent(r, true), T0 + 5000);
    expect(res.ok && res.changed).toBe(false);
  });

  it("a release without guardrails, SLO or stop_condition is not watched", () => {
    const r = compiled({
      analysis: { ...ANALYSIS, metrics: [ANALYSIS.metrics[0]] },
    });
    const last = lastStepOfWave(r.manifest, 0);
    const before = advanceTo(r, last);
    const s = sr(before, last);
    const out = ok(before, { type: "applied", step_run_id: s.id, outcome: "ok", message: "ok" });
    expect(out.release.stop ?? null).toBeNull();
    expect(out.effects.some((e) => e.type === "stop_check")).toBe(false);
  });
});
