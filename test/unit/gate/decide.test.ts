/**
 * The gate's decision order, table-driven: completeness → SRM → non-inferiority → bake,
 * inconclusive at max wait, guardrails in later waves. Reasons name what decided.
 */
import { describe, expect, it } from "vitest";
import { Analysis } from "../../../engine/src/domain/gate/analysis.ts";
import {
  decideGate,
  type GateContext,
  type GateObservations,
} from "../../../engine/src/domain/gate/decide.ts";
import type { Bucket } from "../../../engine/src/domain/gate/observations.ts";

const analysis = Analysis.parse({
  min_samples: 1000,
  bake_ms: 60_000,
  max_wait_ms: 600_000,
  metrics: [
    { name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.01 } },
    {
      name: "slow-requests",
      kind: "latency",
      threshold_ms: 500,
      margin: { absolute: 0.02 },
      required: false,
    },
  ],
});

const ctx = (over: Partial<GateContext> = {}): GateContext => ({
  analysis,
  plannedCandidateShare: 0.2,
  elapsedMs: 120_000,
  phase: "gate",
  ...over,
});

const hist = (n: number, slow: number): Bucket[] => [
  { le: 100, count: Math.round((n - slow) / 2) },
  { le: 500, count: n - slow },
  { le: Number.POSITIVE_INFINITY, count: n },
];

/** Requests per arm in the planned split, error counts at the given rates. */
function observed(
  units: number,
  rates: { candidate: number; control: number },
  share = 0.2,
): GateObservations {
  const nc = Math.round(units * share);
  const nb = units - nc;
  return {
    assignments: { candidate: nc, control: nb },
    metrics: {
      "error-rate": {
        candidate: {
          kind: "ratio",
          counts: { numerator: Math.round(nc * rates.candidate), denominator: nc },
        },
        control: {
          kind: "ratio",
          counts: { numerator: Math.round(nb * rates.control), denominator: nb },
        },
      },
      "slow-requests": {
        candidate: { kind: "latency", buckets: hist(nc, Math.round(nc * 0.05)) },
        control: { kind: "latency", buckets: hist(nb, Math.round(nb * 0.05)) },
      },
    },
  };
}

describe("decideGate", () => {
  it("passes equal arms with enough samples after the bake", () => {
    const e = decideGate(ctx(), observed(50_000, { candidate: 0.01, control: 0.01 }));
    expect(e.decision).toBe("pass");
    expect(e.reason).toMatch(/error-rate lower bound -0\.00\d+ ≥ −δ -0\.0100/);
    expect(e.srm?.mismatch).toBe(false);
    expect(e.arms).toEqual({ candidate: 10_000, control: 40_000 });
  });

  it("waits for the bake, then for samples; never inconclusive before max wait", () => {
    const early = decideGate(
      ctx({ elapsedMs: 10_000 }),
      observed(50_000, { candidate: 0.01, control: 0.01 }),
    );
    expect(early).toMatchObject({ decision: "wait" });
    expect(early.reason).toMatch(/baking: 10 s of 60 s/);
    const few = decideGate(ctx(), observed(2000, { candidate: 0.01, control: 0.01 }));
    expect(few.decision).toBe("wait");
    expect(few.reason).toMatch(/too few samples: error-rate has 400 candidate/);
  });

  it("fails a candidate worse than the margin, naming metric, bound and margin", () => {
    const e = decideGate(
      ctx({ elapsedMs: 5_000 }),
      observed(20_000, { candidate: 0.05, control: 0.01 }),
    );
    expect(e.decision).toBe("fail");
    expect(e.reason).toMatch(
      /metric error-rate is worse than its margin: upper bound of Δ -0\.0\d+ < −δ -0\.0100 \(candidate 5\.00% \(200\/4000\) vs control 1\.00% \(160\/16000\), lower is better\)/,
    );
  });

  it.each([
    ["query failed", { missing: "prometheus: timeout after 2000 ms" }],
    [
      "NaN",
      {
        candidate: { kind: "ratio", counts: { numerator: Number.NaN, denominator: 10_000 } },
        control: { kind: "ratio", counts: { numerator: 400, denominator: 40_000 } },
      },
    ],
    [
      "numerator above denominator",
      {
        candidate: { kind: "ratio", counts: { numerator: 11, denominator: 10 } },
        control: { kind: "ratio", counts: { numerator: 400, denominator: 40_000 } },
      },
    ],
  ] as const)("never passes a missing primary metric (%s); inconclusive at max wait", (_, m) => {
    const o = observed(50_000, { candidate: 0.01, control: 0.01 });
    o.metrics["error-rate"] = m as GateObservations["metrics"][string];
    const e = decideGate(ctx(), o);
    expect(e.decision).toBe("wait");
    expect(e.reason).toMatch(/missing evidence: error-rate/);
    const late = decideGate(ctx({ elapsedMs: 600_000 }), o);
    expect(late.decision).toBe("inconclusive");
    expect(late.reason).toMatch(/operator must promote or abort/);
  });

  it("reads no outcome without assignment counts", () => {
    const o = observed(50_000, { candidate: 0.5, control: 0.01 });
    o.assignments = { missing: "no series" };
    const e = decideGate(ctx(), o);
    expect(e).toMatchObject({ decision: "wait", metrics: [], srm: null });
  });

  it("fails a mismatched split before reading outcomes, with planned and observed counts", () => {
    const o = observed(10_000, { candidate: 0.01, control: 0.01 }, 0.14);
    const e = decideGate(ctx({ plannedCandidateShare: 0.1 }), o);
    expect(e.decision).toBe("fail");
    expect(e.reason).toMatch(
      /sample ratio mismatch: planned 10\.00%\/90\.00% candidate\/control, observed 1400\/8600/,
    );
    expect(e.metrics).toEqual([]);
  });

  it("never passes when the candidate gets no traffic", () => {
    for (const units of [0, 100, 10_000, 1_000_000]) {
      for (const elapsedMs of [0, 120_000, 600_000]) {
        const o = observed(units, { candidate: 0, control: 0.01 }, 0);
        expect(decideGate(ctx({ elapsedMs }), o).decision).not.toBe("pass");
      }
    }
  });

  it("a latency threshold that is not a bucket bound is missing, not a pass", () => {
    const a = Analysis.parse({
      ...analysis,
      metrics: [{ name: "slow", kind: "latency", threshold_ms: 250, margin: { absolute: 0.02 } }],
    });
    const o = observed(50_000, { candidate: 0.01, control: 0.01 });
    o.metrics.slow = o.metrics["slow-requests"] as GateObservations["metrics"][string];
    const e = decideGate(ctx({ analysis: a }), o);
    expect(e.decision).toBe("wait");
    expect(e.reason).toMatch(/slow \(candidate: no bucket with le=250\)/);
  });

  it("fails a certain SLO breach even when the control is as bad", () => {
    const a = Analysis.parse({
      ...analysis,
      metrics: [
        {
          name: "error-rate",
          kind: "ratio",
          better: "lower",
          margin: { relative: 0.2 },
          slo: 0.02,
        },
      ],
    });
    const e = decideGate(
      ctx({ analysis: a }),
      observed(50_000, { candidate: 0.05, control: 0.05 }),
    );
    expect(e.decision).toBe("fail");
    expect(e.reason).toMatch(
      /error-rate breaches its SLO: candidate lower bound 4\.\d+% > SLO 2\.00%/,
    );
  });

  it("a missing guardrail does not block; a breached guardrail fails, in the gate and in later waves", () => {
    const o = observed(50_000, { candidate: 0.01, control: 0.01 });
    o.metrics["slow-requests"] = { missing: "no series" };
    expect(decideGate(ctx(), o).decision).toBe("pass");
    const bad = observed(50_000, { candidate: 0.01, control: 0.01 });
    bad.metrics["slow-requests"] = {
      candidate: { kind: "latency", buckets: hist(10_000, 3000) },
      control: { kind: "latency", buckets: hist(40_000, 2000) },
    };
    expect(decideGate(ctx(), bad).reason).toMatch(/metric slow-requests is worse than its margin/);
    const watch = decideGate(ctx({ phase: "watch" }), bad);
    expect(watch.decision).toBe("fail");
    expect(watch.reason).toMatch(/^guardrail breached: metric slow-requests/);
    expect(watch.metrics.map((m) => m.name)).toEqual(["slow-requests"]);
    expect(decideGate(ctx({ phase: "watch" }), o)).toMatchObject({ decision: "pass" });
  });

  it("is pure: frozen input, same output twice", () => {
    const deepFreeze = <T>(v: T): T => {
      if (v && typeof v === "object") for (const x of Object.values(v)) deepFreeze(x);
      return Object.freeze(v);
    };
    const o = deepFreeze(observed(50_000, { candidate: 0.01, control: 0.01 }));
    const c = deepFreeze(ctx());
    expect(decideGate(c, o)).toEqual(decideGate(c, o));
  });
});
