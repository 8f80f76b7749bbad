/**
 * Evidence: one evaluation through a metrics source becomes a JSON-safe record bound to
 * release id, generation, manifest digest and wave; only a gate-phase pass bound to exactly
 * the asked-for binding satisfies the promotion guard.
 */
import { describe, expect, it } from "vitest";
import { EmbeddedMetricsSource } from "../../../engine/src/adapters/embedded-metrics/index.ts";
import { ControlPlaneCore } from "../../../engine/src/control-plane/core.ts";
import { MemoryCpStore } from "../../../engine/src/control-plane/memory-store.ts";
import { TrafficGenerator } from "../../../engine/src/control-plane/traffic.ts";
import { checkAndCompile } from "../../../engine/src/domain/compile.ts";
import {
  type EvidenceBinding,
  evidenceSatisfies,
  type GateEvidence,
  latestDecision,
} from "../../../engine/src/domain/gate/evidence.ts";
import type { Manifest } from "../../../engine/src/domain/types.ts";
import { canonicalJson } from "../../../engine/src/protocol/canonical-json.ts";
import { evaluateGate, gateAt } from "../../../engine/src/service/gate-evaluator.ts";
import { goodRecipe } from "../recipe-fixture.ts";

const analysis = {
  min_samples: 1000,
  bake_ms: 30_000,
  metrics: [
    { name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.01 } },
    {
      name: "slow",
      kind: "latency",
      threshold_ms: 250,
      margin: { absolute: 0.03 },
      required: false,
    },
  ],
};

function manifest(
  mutate: (r: ReturnType<typeof goodRecipe> & Record<string, unknown>) => void = () => {},
): Manifest {
  const r = { ...goodRecipe(), analysis } as ReturnType<typeof goodRecipe> &
    Record<string, unknown>;
  mutate(r);
  const c = checkAndCompile(r);
  if (!c.ok) throw new Error(JSON.stringify(c.problems));
  return c.manifest;
}

const binding: EvidenceBinding = {
  release_id: "rel_1",
  generation: 1,
  manifest_digest: "d".repeat(64),
  wave: 0,
};

/** The router at wave 0 (lane-a 10% on the new image, b and c 45% each on the old one). */
function router(m: Manifest, candidateErrorRate = 0.01) {
  const core = new ControlPlaneCore(new MemoryCpStore());
  core.seed([
    { id: "lane-a", model: m.model, weight: 10 },
    { id: "lane-b", model: m.model, weight: 45 },
    { id: "lane-c", model: m.model, weight: 45 },
  ]);
  const t = new TrafficGenerator(core, { model: m.model, seed: 11 });
  t.setCandidate(m.image);
  t.setLaneImage("lane-a", m.image);
  t.setLaneImage("lane-b", m.previous_image);
  t.setLaneImage("lane-c", m.previous_image);
  t.setProfile(m.image, { errorRate: candidateErrorRate });
  return { t, source: new EmbeddedMetricsSource(t) };
}

describe("gate evidence", () => {
  it("an evaluation through the embedded source is a bound, JSON-safe record; a pass satisfies only its binding", async () => {
    const m = manifest();
    const { t, source } = router(m);
    const now = 1_000_000;
    const run = { manifest: m, binding, waveStartedAt: now - 60_000, now };
    const first = await evaluateGate(source, { ...run, seq: 1 });
    expect(first).toMatchObject({
      decision: "wait",
      seq: 1,
      wave: 0,
      arms: { candidate: 0, control: 0 },
    });
    t.send(30_000);
    const e = (await evaluateGate(source, { ...run, seq: 2 })) as GateEvidence;
    expect(e.decision, e.reason).toBe("pass");
    expect(e).toMatchObject({ ...binding, seq: 2, at: now, phase: "gate", elapsed_ms: 60_000 });
    expect(e.srm?.mismatch).toBe(false);
    expect(e.metrics.map((x) => [x.name, x.verdict])).toEqual([
      ["error-rate", "non_inferior"],
      ["slow", "non_inferior"],
    ]);
    expect(() => canonicalJson(e)).not.toThrow();
    expect(JSON.parse(JSON.stringify(e))).toEqual(e);

    expect(evidenceSatisfies(e, binding)).toBe(true);
    for (const other of [
      { ...binding, release_id: "rel_2" },
      { ...binding, generation: 2 },
      { ...binding, manifest_digest: "e".repeat(64) },
      { ...binding, wave: 1 },
    ]) {
      expect(evidenceSatisfies(e, other)).toBe(false);
    }
    expect(evidenceSatisfies({ ...e, decision: "wait" }, binding)).toBe(false);
    expect(evidenceSatisfies({ ...e, phase: "watch" }, binding)).toBe(false);
    expect(evidenceSatisfies(undefined, binding)).toBe(false);
    expect(
      latestDecision(
        [first as GateEvidence, e, { ...e, seq: 9, release_id: "rel_2", decision: "fail" }],
        binding,
      ),
    ).toBe("pass");
    expect(latestDecision([], binding)).toBe("pending");
  });

  it("a candidate with errors well above the margin gives fail evidence naming the metric", async () => {
    const m = manifest();
    const { t, source } = router(m, 0.1);
    const run = { manifest: m, binding, waveStartedAt: 0, now: 5000 };
    await evaluateGate(source, { ...run, seq: 1 });
    t.send(20_000);
    const e = (await evaluateGate(source, { ...run, seq: 2 })) as GateEvidence;
    expect(e.decision).toBe("fail");
    expect(e.reason).toMatch(
      /^error-rate: candidate \d+\.\d+% vs control \d\.\d+%, allowed \+1\.0 points: worse \(at least \d\.\d+ points worse than the control/,
    );
    expect(evidenceSatisfies(e, binding)).toBe(false);
  });

  it("gateAt: gated waves, no gate at 100%, guardrails watched on a later ungated wave", () => {
    const m = manifest();
    expect(gateAt(m, 0)?.phase).toBe("gate");
    expect(gateAt(m, 1)?.phase).toBe("gate");
    expect(gateAt(m, 2)).toBeNull();
    const w = manifest((r) => {
      (r.rollout!.waves[1] as Record<string, unknown>).analysis = false;
    });
    expect(gateAt(w, 1)?.phase).toBe("watch");
  });
});
