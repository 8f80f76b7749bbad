/**
 * The declared assignment unit in the gate's decision: under `session`, `user` or `tenant` the
 * sample-ratio test reads unit counts and each metric's variance counts units, not requests;
 * under `request` (the default) nothing changes.
 */
import { describe, expect, it } from "vitest";
import { Analysis } from "../../../engine/src/domain/gate/analysis.ts";
import {
  decideGate,
  type GateContext,
  type GateObservations,
} from "../../../engine/src/domain/gate/decide.ts";
import { shareVariance, unitShareVariance } from "../../../engine/src/domain/gate/observations.ts";

const analysis = (unit: string) =>
  Analysis.parse({
    assignment_unit: unit,
    min_samples: 1000,
    bake_ms: 60_000,
    max_wait_ms: 600_000,
    metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.01 } }],
  });

const ctx = (unit: string, share = 0.1): GateContext => ({
  analysis: analysis(unit),
  plannedCandidateShare: share,
  elapsedMs: 120_000,
  phase: "gate",
});

/** Units and requests per arm, 1% errors on both. */
const obs = (
  units: { candidate: number; control: number },
  requests: { candidate: number; control: number },
): GateObservations => ({
  assignments: units,
  metrics: {
    "error-rate": {
      candidate: {
        kind: "ratio",
        counts: { numerator: requests.candidate / 100, denominator: requests.candidate },
      },
      control: {
        kind: "ratio",
        counts: { numerator: requests.control / 100, denominator: requests.control },
      },
    },
  },
});

describe("assignment unit in the gate", () => {
  it("a metric's variance counts units, not requests, under a sticky unit", () => {
    // 100 candidate sessions of 100 requests each, 900 control sessions: 1% errors on both.
    const o = obs({ candidate: 100, control: 900 }, { candidate: 10_000, control: 90_000 });
    const perRequest = decideGate(ctx("request"), {
      ...o,
      assignments: { candidate: 10_000, control: 90_000 },
    });
    expect(perRequest.decision).toBe("pass");
    for (const unit of ["session", "user", "tenant"]) {
      const e = decideGate(ctx(unit), o);
      // 10,000 requests from 100 sessions do not show the candidate within 1 point.
      expect(e.decision, unit).toBe("wait");
      expect(e.reason).toMatch(/^not yet shown within the margin: error-rate/);
      const d = e.metrics[0]?.difference;
      const r = perRequest.metrics[0]?.difference;
      expect(d && r && d.upper - d.lower > 5 * (r.upper - r.lower)).toBe(true);
    }
  });

  it("request assignment reads exactly as before: the variance per request", () => {
    const o = obs({ candidate: 100, control: 900 }, { candidate: 10_000, control: 90_000 });
    const e = decideGate(ctx("request"), o);
    // Under `request` the unit counts only feed the SRM; the bounds are those of the requests.
    const again = decideGate(ctx("request"), {
      ...o,
      assignments: { candidate: 10_000, control: 90_000 },
    });
    expect(e.metrics).toEqual(again.metrics);
    expect(unitShareVariance({ x: 5, n: 100 }, 100)).toBe(shareVariance({ x: 5, n: 100 }));
    expect(unitShareVariance({ x: 5, n: 100 }, 1000)).toBe(shareVariance({ x: 5, n: 100 }));
    expect(unitShareVariance({ x: 5, n: 100 }, 0)).toBe(Number.POSITIVE_INFINITY);
  });

  it("the sample-ratio test reads units: a few heavy candidate sessions are no mismatch", () => {
    // Planned 10%: 10 of 100 sessions on the candidate, but they are heavy (6,000 of 9,000
    // requests). Units match the plan; requests would read as a gross mismatch.
    const o = obs({ candidate: 10, control: 90 }, { candidate: 6000, control: 3000 });
    const e = decideGate(ctx("session"), o);
    expect(e.srm?.mismatch).toBe(false);
    expect(e.decision).not.toBe("fail");
    const byRequests = decideGate(ctx("session"), {
      ...o,
      assignments: { candidate: 6000, control: 3000 },
    });
    expect(byRequests.decision).toBe("fail");
    expect(byRequests.reason).toMatch(/^sample ratio mismatch/);
  });
});
