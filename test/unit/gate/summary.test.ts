/**
 * Gate summaries (engine/src/domain/gate/summary.ts): evidence grouped per gate with the latest
 * evaluation's figures, each metric's bounds over time, and the lines `baton status` prints.
 */
import { describe, expect, it } from "vitest";
import type { GateEvidence } from "../../../engine/src/domain/gate/evidence.ts";
import {
  armsLine,
  gateSeries,
  gateSummaries,
  metricLine,
  srmLine,
} from "../../../engine/src/domain/gate/summary.ts";

function ev(over: Partial<GateEvidence>): GateEvidence {
  return {
    release_id: "r1",
    generation: 1,
    manifest_digest: "d",
    wave: 0,
    seq: 1,
    at: 1000,
    phase: "gate",
    decision: "wait",
    reason: "waiting",
    alpha: 0.05,
    elapsed_ms: 0,
    arms: { candidate: 100, control: 900 },
    srm: {
      planned: [0.1, 0.9],
      observed: [100, 900],
      log_bayes_factor: -3,
      p_value: 1,
      mismatch: false,
    },
    metrics: [
      {
        name: "error-rate",
        required: true,
        verdict: "undecided",
        missing: null,
        candidate: { x: 1, n: 100 },
        control: { x: 9, n: 900 },
        estimate: 0,
        lower: -0.05,
        upper: 0.05,
        margin: 0.02,
        slo: null,
      },
    ],
    ...over,
  };
}

describe("gate summaries", () => {
  it("groups per generation, wave and phase; the latest seq decides; series keep every look", () => {
    const list = [
      ev({ seq: 2, at: 2000, elapsed_ms: 1000, decision: "pass", reason: "passed" }),
      ev({ seq: 1 }),
      ev({ wave: 1, seq: 1, at: 3000, decision: "fail", reason: "worse" }),
    ];
    const s = gateSeries(list);
    expect(s.map((g) => [g.wave, g.evaluations, g.decision, g.first_at, g.last_at])).toEqual([
      [0, 2, "pass", 1000, 2000],
      [1, 1, "fail", 3000, 3000],
    ]);
    expect(s[0]?.series[0]?.points.map((p) => p.elapsed_ms)).toEqual([0, 1000]);
    expect(gateSummaries(list)[0]).not.toHaveProperty("series");
  });

  it("thins a long series evenly, keeping the first and the latest look", () => {
    const list = Array.from({ length: 1000 }, (_, i) => ev({ seq: i + 1, elapsed_ms: i }));
    const pts = gateSeries(list, 50)[0]?.series[0]?.points ?? [];
    expect(pts).toHaveLength(50);
    expect(pts[0]?.elapsed_ms).toBe(0);
    expect(pts.at(-1)?.elapsed_ms).toBe(999);
  });

  it("prints counts per arm, the SRM check and each metric's bounds against its margin", () => {
    const g = ev({});
    expect(armsLine(g)).toBe(
      "candidate 100 / control 900 units (planned 10.0% candidate, observed 10.0%)",
    );
    expect(srmLine(g)).toMatch(
      /^SRM: ok \(planned 10\.0%\/90\.0%, observed 100\/900; log Bayes factor -3\.00/,
    );
    expect(metricLine(g.metrics[0]!)).toBe(
      "error-rate (primary): candidate 1.00% vs control 1.00%, allowed +2.0 points: not yet shown within (at most 5.0 points worse than the control, anytime-valid at α 0.05; candidate 1/100, control 9/900, lower is better)",
    );
    expect(srmLine({ srm: null })).toBe("SRM: not tested");
    // Without an SRM test there is no planned split: only what was observed, or nothing.
    expect(armsLine({ arms: g.arms, srm: null })).toBe(
      "candidate 100 / control 900 units (observed 10.0%)",
    );
    expect(armsLine({ arms: { candidate: 0, control: 0 }, srm: null })).toBe(
      "candidate 0 / control 0 units",
    );
  });
});
