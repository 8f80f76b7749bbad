/**
 * The gate as a transition event (docs/state-machine.md "Gates"): pure rows over a compiled
 * gated manifest. Evidence bound to another release, generation, manifest or wave never
 * satisfies the guard; only the next evaluation is read; pass → next wave, fail →
 * compensation, wait → the next evaluation after interval_ms, inconclusive → paused with
 * promote / abort; a watch wave (guardrails only) holds for bake_ms and fails on a breach.
 */
import { describe, expect, it } from "vitest";
import type { GateEvidence } from "../../engine/src/domain/gate/evidence.ts";
import { lastStepOfWave } from "../../engine/src/domain/gate/waves.ts";
import { availableActions } from "../../engine/src/domain/transition/exits.ts";
import { newRelease, transition } from "../../engine/src/domain/transition.ts";
import type { GateEffect, Release } from "../../engine/src/domain/types.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { advanceTo, ok, refused, T0 } from "../support/sim/drive.ts";
import { goodRecipe } from "./recipe-fixture.ts";

const ANALYSIS = {
  min_samples: 100,
  bake_ms: 10_000,
  interval_ms: 2_000,
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

/** goodRecipe (waves 10, 50, 100) gated; `wave1: false` leaves wave 2 as a guardrail watch. */
function gated(o: { wave1Off?: boolean } = {}): Release {
  const r = goodRecipe() as Record<string, unknown> & { rollout: { waves: object[] } };
  r.analysis = ANALYSIS;
  if (o.wave1Off) r.rollout.waves[1] = { ...r.rollout.waves[1], analysis: false };
  const c = compileRecipeInput(r as never);
  return newRelease("r5", 5, c.manifest, c.manifest_digest, T0);
}

/** The release held at the gate of `wave` (its last step, the traffic assert, passed). */
function atGate(r0: Release, wave: number): { r: Release; effect: GateEffect } {
  const last = lastStepOfWave(r0.manifest, wave);
  const before = advanceTo(r0, last);
  const s = before.step_runs.find((x) => x.step_index === last && x.direction === "fwd");
  if (s?.kind !== "control_plane") throw new Error(`step ${last} is not a control-plane step`);
  const out = ok(before, { type: "applied", step_run_id: s.id, outcome: "ok", message: "ok" });
  const effect = out.effects.find((x): x is GateEffect => x.type === "gate");
  if (!effect) throw new Error("no gate effect");
  const r = out.release;
  expect(r.gate).toMatchObject({ wave, seq: 0, decision: "pending" });
  expect(r.cursor).toBe(last + 1);
  expect(r.step_runs.some((x) => x.step_index === last + 1)).toBe(false);
  return { r, effect };
}

function evidence(r: Release, o: Partial<GateEvidence> = {}): GateEvidence {
  return {
    release_id: r.id,
    generation: r.generation,
    manifest_digest: r.manifest_digest,
    wave: r.gate?.wave ?? 0,
    seq: (r.gate?.seq ?? 0) + 1,
    at: T0 + 1000,
    phase: r.gate?.phase ?? "gate",
    decision: "wait",
    reason: "baking: 1 s of 10 s",
    alpha: 0.05,
    elapsed_ms: 1000,
    arms: { candidate: 10, control: 90 },
    srm: null,
    metrics: [],
    ...o,
  };
}

describe("the gate in the transition", () => {
  it("holds a gated wave after its traffic assert and asks for the first evaluation at once", () => {
    const { r, effect } = atGate(gated(), 0);
    expect(r.state).toBe("running");
    expect(r.manifest.steps[lastStepOfWave(r.manifest, 0)]?.name).toBe("assert_traffic_observed");
    expect(effect).toMatchObject({
      type: "gate",
      wave: 0,
      phase: "gate",
      seq: 1,
      not_before: null,
    });
  });

  it("wait: records the evaluation and asks for the next one interval_ms later", () => {
    const { r } = atGate(gated(), 0);
    const out = ok(r, { type: "gate", evidence: evidence(r) }, T0 + 1500);
    expect(out.release.gate).toMatchObject({ seq: 1, decision: "wait" });
    // What it waits for is kept with its figures (here: no figures of its primary metric yet;
    // then too few samples for min_samples 100), so every view can say what holds the release
    // from the release alone.
    expect(out.release.gate?.progress).toEqual({
      waiting_for: "metrics",
      elapsed_ms: 1000,
      bake_ms: 10_000,
      samples: null,
      metric: "error-rate",
    });
    const counted = ok(
      r,
      {
        type: "gate",
        evidence: evidence(r, {
          metrics: [
            {
              name: "error-rate",
              required: true,
              verdict: "undecided",
              missing: null,
              candidate: { x: 1, n: 40 },
              control: { x: 3, n: 360 },
              estimate: 0,
              lower: -0.1,
              upper: 0.1,
              margin: 0.01,
              slo: null,
            },
          ],
        }),
      },
      T0 + 1500,
    );
    expect(counted.release.gate?.progress).toMatchObject({
      waiting_for: "samples",
      samples: { have: 40, need: 100 },
    });
    expect(out.effects).toEqual([
      expect.objectContaining({ type: "gate", seq: 2, not_before: T0 + 1500 + 2000 }),
    ]);
  });

  it("wait: carries the streaks the limits count to the next evaluation", () => {
    const { r } = atGate(gated(), 0);
    const one = ok(r, { type: "gate", evidence: evidence(r, { read_error: true }) }, T0 + 1500);
    expect(one.effects).toEqual([
      expect.objectContaining({ seq: 2, streak: { errors: 1, undecided: 0 } }),
    ]);
    const two = ok(
      one.release,
      { type: "gate", evidence: evidence(one.release, { read_error: true, undecided: false }) },
      T0 + 3500,
    );
    expect(two.effects[0]).toMatchObject({ seq: 3, streak: { errors: 2, undecided: 0 } });
    // A read that worked ends the error streak; an undecided look starts its own.
    const three = ok(
      two.release,
      { type: "gate", evidence: evidence(two.release, { undecided: true }) },
      T0 + 5500,
    );
    expect(three.effects[0]).toMatchObject({ seq: 4, streak: { errors: 0, undecided: 1 } });
    const four = ok(three.release, { type: "gate", evidence: evidence(three.release) }, T0 + 7500);
    expect(four.effects[0]).not.toHaveProperty("streak");
  });

  it("evidence bound to another release, generation, manifest or wave satisfies no guard", () => {
    const { r } = atGate(gated(), 0);
    for (const other of [
      { release_id: "r6" },
      { generation: 2 },
      { manifest_digest: "0".repeat(64) },
    ]) {
      const res = refused(r, {
        type: "gate",
        evidence: evidence(r, { decision: "pass", ...other }),
      });
      expect(res.status).toBe(409);
      expect(res.code).toBe("stale");
    }
    // Another wave of the same release: recorded, changes nothing.
    const res = transition(
      r,
      { type: "gate", evidence: evidence(r, { wave: 1, decision: "pass" }) },
      T0,
    );
    expect(res.ok && res.changed).toBe(false);
    // A repeat or a skipped evaluation number: nothing moves.
    for (const seq of [0, 2, 3]) {
      const again = transition(
        r,
        { type: "gate", evidence: evidence(r, { seq, decision: "pass" }) },
        T0,
      );
      expect(again.ok && again.changed).toBe(false);
    }
  });

  it("pass: the next wave begins", () => {
    const { r } = atGate(gated(), 0);
    const out = ok(r, { type: "gate", evidence: evidence(r, { decision: "pass", reason: "ok" }) });
    expect(out.release.gate).toBeNull();
    expect(out.release.state).toBe("running");
    const next = out.release.step_runs.find((s) => s.step_index === r.cursor);
    expect(next?.state).toBe("applying"); // drain_wave of wave 2 is a control-plane write
  });

  it("fail: compensation with the decision's reason", () => {
    const { r } = atGate(gated(), 0);
    const reason =
      "metric error-rate is worse than its margin: upper bound of Δ -0.0321 < −δ -0.0100 (…)";
    const out = ok(r, { type: "gate", evidence: evidence(r, { decision: "fail", reason }) });
    expect(out.release.state).toBe("compensating");
    expect(out.release.generation).toBe(2);
    expect(out.release.gate).toBeNull();
    expect(
      out.history.some((h) => h.message.includes(`gate of wave 1 (10%) failed: ${reason}`)),
    ).toBe(true);
  });

  it("inconclusive: paused; the exits are promote and abort, resume is refused", () => {
    const { r } = atGate(gated(), 0);
    const paused = ok(r, {
      type: "gate",
      evidence: evidence(r, { decision: "inconclusive", reason: "inconclusive after 60 s" }),
    }).release;
    expect(paused.state).toBe("paused");
    expect(
      availableActions(paused)
        .map((a) => a.action)
        .sort(),
    ).toEqual(["abort", "promote"]);
    expect(refused(paused, { type: "resume", actor: "operator" }).status).toBe(409);
    // A late evaluation of the same gate changes nothing now.
    const late = transition(
      paused,
      { type: "gate", evidence: evidence(paused, { decision: "pass" }) },
      T0,
    );
    expect(late.ok && late.changed).toBe(false);
    const promoted = ok(paused, { type: "promote", actor: "operator:alice", reason: "accepted" });
    expect(promoted.release.state).toBe("running");
    expect(promoted.release.gate).toBeNull();
    const aborted = ok(paused, { type: "abort", actor: "operator", reason: "no data" });
    expect(aborted.release.state).toBe("compensating");
  });

  it("promote is refused unless the release is paused at an inconclusive gate", () => {
    const { r } = atGate(gated(), 0);
    expect(refused(r, { type: "promote", actor: "operator", reason: "" }).status).toBe(409);
  });

  it("a watch wave (guardrails only) holds for bake_ms and fails on a breach", () => {
    const r0 = gated({ wave1Off: true });
    const { r: g0 } = atGate(r0, 0);
    const passed = ok(g0, { type: "gate", evidence: evidence(g0, { decision: "pass" }) }).release;
    const { r: w1 } = atGate(passed, 1);
    expect(w1.gate?.phase).toBe("watch");
    // No breach before bake_ms: keep watching.
    const early = ok(w1, {
      type: "gate",
      evidence: evidence(w1, { decision: "pass", elapsed_ms: 4000 }),
    });
    expect(early.release.gate?.seq).toBe(1);
    expect(early.effects.map((e) => e.type)).toEqual(["gate"]);
    const breach = ok(early.release, {
      type: "gate",
      evidence: evidence(early.release, { decision: "fail", reason: "guardrail breached: slow" }),
    });
    expect(breach.release.state).toBe("compensating");
    const done = ok(early.release, {
      type: "gate",
      evidence: evidence(early.release, { decision: "pass", elapsed_ms: 10_000 }),
    });
    expect(done.release.gate).toBeNull();
  });
});
