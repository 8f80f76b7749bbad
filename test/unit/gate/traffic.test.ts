/**
 * The reference router as a traffic generator, read in process by the embedded metrics
 * source: the split it serves is the declared one (the SRM test agrees), assignment is a
 * pure function of the unit id, outcomes follow the per-image profiles, and the counters come
 * out in the Prometheus text format.
 */
import { describe, expect, it } from "vitest";
import { EmbeddedMetricsSource } from "../../../engine/src/adapters/embedded-metrics/index.ts";
import { ControlPlaneCore } from "../../../engine/src/control-plane/core.ts";
import { MemoryCpStore } from "../../../engine/src/control-plane/memory-store.ts";
import { TrafficGenerator, unitPosition } from "../../../engine/src/control-plane/traffic.ts";
import { Analysis } from "../../../engine/src/domain/gate/analysis.ts";
import { decideGate } from "../../../engine/src/domain/gate/decide.ts";
import { srmTest } from "../../../engine/src/domain/gate/srm.ts";

const CANDIDATE = `reg/app@sha256:${"c".repeat(64)}`;
const BASELINE = `reg/app@sha256:${"d".repeat(64)}`;
const analysis = Analysis.parse({
  min_samples: 2000,
  bake_ms: 0,
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
});

function router(candidateWeight: number, candidateErrorRate = 0.01) {
  const core = new ControlPlaneCore(new MemoryCpStore());
  core.seed([
    { id: "lane-a", model: "m", weight: candidateWeight },
    { id: "lane-b", model: "m", weight: 100 - candidateWeight },
  ]);
  const t = new TrafficGenerator(core, { model: "m", seed: 3 });
  t.setCandidate(CANDIDATE);
  t.setLaneImage("lane-a", CANDIDATE);
  t.setLaneImage("lane-b", BASELINE);
  t.setProfile(CANDIDATE, { errorRate: candidateErrorRate });
  return { core, t, source: new EmbeddedMetricsSource(t) };
}

const query = {
  model: "m",
  releaseId: "r",
  analysis,
  candidateImage: CANDIDATE,
  controlImage: BASELINE,
  lanes: ["lane-a", "lane-b"],
  sinceMs: 0,
  nowMs: 1,
};

describe("traffic generator", () => {
  it("serves the declared split: the SRM test finds no mismatch", () => {
    const { t } = router(20);
    t.send(50_000);
    const rows = t.snapshot();
    const units = (img: string) =>
      rows.filter((r) => r.image === img).reduce((s, r) => s + r.units, 0);
    expect(units(CANDIDATE) + units(BASELINE)).toBe(50_000);
    expect(srmTest([units(CANDIDATE), units(BASELINE)], [0.2, 0.8], 0.05).mismatch).toBe(false);
    expect(srmTest([units(CANDIDATE), units(BASELINE)], [0.1, 0.9], 0.05).mismatch).toBe(true);
  });

  it("assigns a unit by its id alone (sticky)", () => {
    expect(unitPosition("m/42")).toBe(unitPosition("m/42"));
    expect(unitPosition("m/42")).not.toBe(unitPosition("m/43"));
    expect(unitPosition("m/42")).toBeGreaterThanOrEqual(0);
    expect(unitPosition("m/42")).toBeLessThan(1);
  });

  it("exposes counters and the latency histogram in the Prometheus text format", () => {
    const { t } = router(20);
    t.send(1000);
    const text = t.metricsText();
    expect(text).toMatch(/^# TYPE baton_arm_units_total counter$/m);
    expect(text).toMatch(/^# TYPE baton_arm_latency_ms histogram$/m);
    expect(text).toMatch(
      new RegExp(
        `^baton_arm_latency_ms_bucket\\{model="m",lane="lane-a",image="${CANDIDATE.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}",arm="candidate",le="\\+Inf"\\} \\d+$`,
        "m",
      ),
    );
    for (const line of text.trim().split("\n")) {
      expect(line).toMatch(/^(# (HELP|TYPE) \S+ .+|[a-z_]+\{[^}]*\} \d+(\.\d+)?)$/);
    }
  });

  it("the embedded source counts since the wave's first read; the gate passes a good candidate", async () => {
    const { t, source } = router(20);
    t.send(5000); // before the wave: not counted
    const first = await source.observe(query);
    expect(first.assignments).toEqual({ candidate: 0, control: 0 });
    t.send(40_000);
    const obs = await source.observe(query);
    const e = decideGate(
      { analysis, plannedCandidateShare: 0.2, elapsedMs: 60_000, phase: "gate" },
      obs,
    );
    expect(e.decision, e.reason).toBe("pass");
    expect(e.arms!.candidate + e.arms!.control).toBe(40_000);
  });

  it("the gate fails a candidate whose error rate is well above the margin", async () => {
    const { t, source } = router(20, 0.08);
    await source.observe(query);
    t.send(20_000);
    const e = decideGate(
      { analysis, plannedCandidateShare: 0.2, elapsedMs: 1000, phase: "gate" },
      await source.observe(query),
    );
    expect(e.decision).toBe("fail");
    expect(e.reason).toMatch(
      /^error-rate: candidate .* vs control .*, allowed \+\S+ points: worse/,
    );
  });
});
