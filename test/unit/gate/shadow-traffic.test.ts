/**
 * The traffic generator as a shadow router (the demo's router; docs/control-plane.md "The router
 * as a shadow router"), read by the embedded metrics source: copies go only to shadow-safe lanes
 * serving the candidate at weight 0, within the share cap; users' counters are untouched by
 * them; a shadow gate reads the copies' outcomes beside the baseline's on the same requests.
 * The Prometheus source, which has no shadow counters, answers a shadow gate missing.
 */
import { describe, expect, it } from "vitest";
import { EmbeddedMetricsSource } from "../../../engine/src/adapters/embedded-metrics/index.ts";
import { PrometheusMetricsSource } from "../../../engine/src/adapters/prometheus/index.ts";
import { ControlPlaneCore } from "../../../engine/src/control-plane/core.ts";
import { MemoryCpStore } from "../../../engine/src/control-plane/memory-store.ts";
import { TrafficGenerator } from "../../../engine/src/control-plane/traffic.ts";
import { Analysis } from "../../../engine/src/domain/gate/analysis.ts";
import type { GateQuery } from "../../../engine/src/ports/metrics-source.ts";

const CANDIDATE = `reg/app@sha256:${"c".repeat(64)}`;
const BASELINE = `reg/app@sha256:${"d".repeat(64)}`;
const analysis = Analysis.parse({
  metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.01 } }],
});

function world() {
  const core = new ControlPlaneCore(new MemoryCpStore());
  core.seed([
    { id: "safe", model: "m", weight: 0 },
    { id: "unsafe", model: "m", weight: 0 },
    { id: "base", model: "m", weight: 100 },
  ]);
  const t = new TrafficGenerator(core, { model: "m", seed: 5 });
  t.setCandidate(CANDIDATE);
  t.setLaneImage("safe", CANDIDATE);
  t.setLaneImage("unsafe", CANDIDATE);
  t.setLaneImage("base", BASELINE);
  t.setProfile(CANDIDATE, { errorRate: 0.5 });
  t.setShadow({ caps: { share: 25, rate_per_s: 1_000_000 }, safe: new Set(["safe"]) });
  return { core, t };
}

const query = (shadow: boolean): GateQuery => ({
  model: "m",
  releaseId: "r1",
  analysis,
  candidateImage: CANDIDATE,
  controlImage: BASELINE,
  controlLanes: ["base"],
  lanes: ["safe", "unsafe", "base"],
  ...(shadow ? { shadow: true as const } : {}),
  sinceMs: 0,
  nowMs: 1,
});

describe("traffic generator: shadow", () => {
  it("mirrors at most share% to the shadow-safe candidate lane only; users' counters see none of it", async () => {
    const { t } = world();
    const source = new EmbeddedMetricsSource(t);
    await source.observe(query(true)); // opens the window at 0
    t.send(1000);
    expect(t.shadowCounts()).toMatchObject({ requests: 1000, mirrored: 250, lanes: { safe: 250 } });
    const users = t.snapshot().filter((c) => c.requests > 0);
    expect(users.map((c) => c.lane)).toEqual(["base"]);
    const o = await source.observe(query(true));
    expect(o.assignments).toEqual({ candidate: 250, control: 250 });
    const m = o.metrics["error-rate"] as {
      candidate: { counts: { numerator: number; denominator: number } };
      control: { counts: { denominator: number } };
    };
    expect(m.candidate.counts.denominator).toBe(250);
    expect(m.control.counts.denominator).toBe(250);
    // The candidate's profile (50% errors) shows on the copies.
    expect(m.candidate.counts.numerator).toBeGreaterThan(80);
  });

  it("mirrors nothing once the shadow lane takes real traffic (the phase is over)", () => {
    const { core, t } = world();
    core.seed([
      { id: "safe", model: "m", weight: 10 },
      { id: "unsafe", model: "m", weight: 0 },
      { id: "base", model: "m", weight: 90 },
    ]);
    t.send(200);
    expect(t.shadowCounts()).toMatchObject({ mirrored: 0, skipped: { no_lane: 200 } });
  });

  it("the Prometheus source answers a shadow gate missing (it never passes)", async () => {
    const p = new PrometheusMetricsSource({
      baseUrl: "http://127.0.0.1:9",
      fetch: () => Promise.reject(new Error("no read is made")),
    });
    const o = await p.observe(query(true));
    expect(o.assignments).toMatchObject({ error: true });
    expect(o.metrics["error-rate"]).toMatchObject({
      error: true,
      missing: expect.stringContaining("shadow metrics"),
    });
  });
});
