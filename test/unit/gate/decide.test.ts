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
    // The plain comparison first, the statistics after; no double minus.
    expect(e.reason).toMatch(
      /^every primary metric is within its margin: error-rate: candidate 1\.00% vs control 1\.00%, allowed \+1\.0 points: within \(at most 0\.\d+ points worse than the control, anytime-valid at α 0\.05; candidate 100\/10,000, control 400\/40,000, lower is better\); sample ratio consistent with the plan \(candidate 20\.00% of 50,000 units, planned 20\.00%\)$/,
    );
    expect(e.reason).not.toMatch(/−δ|- ?-|−-|-−/);
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
      /^error-rate: candidate 5\.00% vs control 1\.00%, allowed \+1\.0 points: worse \(at least \d\.\d points worse than the control, anytime-valid at α 0\.05; candidate 200\/4,000, control 160\/16,000, lower is better\)$/,
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
      /^sample ratio mismatch: candidate 14\.00% of units vs planned 10\.00% \(candidate 1,400, control 8,600\)/,
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
      /^error-rate: candidate 5\.00%, SLO ≤ 2\.00%: breached \(the candidate's own value is at least 4\.\d+%/,
    );
  });

  it("a missing guardrail never passes, in the gate and in later waves; a breached guardrail fails in both", () => {
    const o = observed(50_000, { candidate: 0.01, control: 0.01 });
    o.metrics["slow-requests"] = {
      missing: "candidate: query `q` failed: prometheus 500: boom",
      error: true,
    };
    const gate = decideGate(ctx(), o);
    expect(gate.decision).toBe("wait");
    expect(gate.reason).toBe(
      "missing evidence: slow-requests (candidate: query `q` failed: prometheus 500: boom)",
    );
    expect(decideGate(ctx({ elapsedMs: 600_000 }), o).decision).toBe("inconclusive");
    const watching = decideGate(ctx({ phase: "watch" }), o);
    expect(watching.decision).toBe("wait");
    expect(watching.reason).toMatch(/^missing evidence: slow-requests/);
    expect(decideGate(ctx({ phase: "watch", elapsedMs: 600_000 }), o).decision).toBe(
      "inconclusive",
    );
    const bad = observed(50_000, { candidate: 0.01, control: 0.01 });
    bad.metrics["slow-requests"] = {
      candidate: { kind: "latency", buckets: hist(10_000, 3000) },
      control: { kind: "latency", buckets: hist(40_000, 2000) },
    };
    expect(decideGate(ctx(), bad).reason).toMatch(
      /^slow-requests: candidate 30\.00% vs control 5\.00%, allowed \+2\.0 points: worse/,
    );
    const watch = decideGate(ctx({ phase: "watch" }), bad);
    expect(watch.decision).toBe("fail");
    expect(watch.reason).toMatch(
      /^guardrail breached: slow-requests: candidate 30\.00% vs control 5\.00%/,
    );
    expect(watch.metrics.map((m) => m.name)).toEqual(["slow-requests"]);
    const fine = observed(50_000, { candidate: 0.01, control: 0.01 });
    expect(decideGate(ctx({ phase: "watch" }), fine)).toMatchObject({ decision: "pass" });
    expect(decideGate(ctx({ phase: "watch", elapsedMs: 10_000 }), fine)).toMatchObject({
      decision: "wait",
    });
  });

  it("no candidate units while the control has some is insufficient data, held to max wait, never a verdict", () => {
    for (const control of [800, 1, 40_000]) {
      const o: GateObservations = {
        assignments: { candidate: 0, control },
        metrics: observed(50_000, { candidate: 0.01, control: 0.01 }).metrics,
      };
      const e = decideGate(ctx(), o);
      expect(e.decision).toBe("wait");
      expect(e.reason).toBe(
        `insufficient data: the candidate received no units (planned 20.0%), the control ${control.toLocaleString("en-US")}`,
      );
      expect(e.srm).toBeNull();
      const late = decideGate(ctx({ elapsedMs: 600_000 }), o);
      expect(late.decision).toBe("inconclusive");
      expect(late.reason).toMatch(/the candidate received no units \(planned 20\.0%\)/);
    }
  });

  it("a relative margin on a control with no errors has a floor: 0/4,000 vs 0/36,000 passes", () => {
    const rel = (margin: Record<string, number>) =>
      Analysis.parse({
        ...analysis,
        metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin }],
      });
    const zero: GateObservations = {
      assignments: { candidate: 4000, control: 36_000 },
      metrics: {
        "error-rate": {
          candidate: { kind: "ratio", counts: { numerator: 0, denominator: 4000 } },
          control: { kind: "ratio", counts: { numerator: 0, denominator: 36_000 } },
        },
      },
    };
    const c = (a: Analysis) => ctx({ analysis: a, plannedCandidateShare: 0.1 });
    const e = decideGate(c(rel({ relative: 0.1 })), zero);
    expect(e.decision).toBe("pass");
    // The default floor is one event in min_samples: 1/1000 = 0.1 points.
    expect(e.metrics[0]).toMatchObject({ margin: 0.001, floored: true });
    expect(e.reason).toMatch(/allowed \+0\.10 points \(the floor of its relative margin\): within/);
    // A floor written in the recipe replaces it; a tighter one cannot be shown at this size.
    expect(decideGate(c(rel({ relative: 0.1, floor: 0.0001 })), zero).decision).toBe("wait");
    // Above the floor the relative margin is as written: 10% of 5% = 0.5 points.
    const five = structuredClone(zero) as GateObservations;
    five.metrics["error-rate"] = {
      candidate: { kind: "ratio", counts: { numerator: 200, denominator: 4000 } },
      control: { kind: "ratio", counts: { numerator: 1800, denominator: 36_000 } },
    };
    expect(decideGate(c(rel({ relative: 0.1 })), five).metrics[0]).toMatchObject({
      margin: expect.closeTo(0.005, 9),
      floored: false,
    });
  });

  it("dry-run metrics are recorded but never decide; a pass lists those without data", () => {
    const a = Analysis.parse({
      ...analysis,
      metrics: [
        ...analysis.metrics,
        {
          name: "new-errors",
          kind: "ratio",
          better: "lower",
          margin: { absolute: 0.001 },
          dry_run: true,
        },
        {
          name: "new-latency",
          kind: "latency",
          threshold_ms: 500,
          margin: { absolute: 0.001 },
          required: false,
          dry_run: true,
        },
      ],
    });
    const o = observed(50_000, { candidate: 0.01, control: 0.01 });
    // A certain breach of a dry-run metric: recorded, does not fail.
    o.metrics["new-errors"] = {
      candidate: { kind: "ratio", counts: { numerator: 2000, denominator: 10_000 } },
      control: { kind: "ratio", counts: { numerator: 400, denominator: 40_000 } },
    };
    o.metrics["new-latency"] = { missing: "candidate: no series yet for `q`" };
    const e = decideGate(ctx({ analysis: a }), o);
    expect(e.decision).toBe("pass");
    expect(e.metrics.find((m) => m.name === "new-errors")).toMatchObject({
      dryRun: true,
      verdict: "inferior",
    });
    expect(e.reason).toMatch(
      /; no data for dry-run new-latency \(candidate: no series yet for `q`\)$/,
    );
    expect(e.reason).not.toMatch(/new-errors/);
  });

  it("consecutive read errors end the gate inconclusive at the limit; data not there yet does not count", () => {
    const o = observed(50_000, { candidate: 0.01, control: 0.01 });
    o.metrics["error-rate"] = {
      missing: "candidate: query `sum(x)` failed: prometheus timeout after 2000 ms",
      error: true,
    };
    const first = decideGate(ctx(), o);
    expect(first).toMatchObject({ decision: "wait", readError: true });
    const fourth = decideGate(ctx({ streak: { errors: 3, undecided: 0 } }), o);
    expect(fourth.decision).toBe("inconclusive");
    expect(fourth.reason).toMatch(
      /^inconclusive: 4 evaluations in a row could not read their data \(consecutive_error_limit 4\): missing evidence: error-rate \(candidate: query `sum\(x\)` failed: prometheus timeout after 2000 ms\); an operator must promote or abort$/,
    );
    const own = Analysis.parse({ ...analysis, consecutive_error_limit: 10 });
    expect(
      decideGate(ctx({ analysis: own, streak: { errors: 3, undecided: 0 } }), o).decision,
    ).toBe("wait");
    const empty = observed(50_000, { candidate: 0.01, control: 0.01 });
    empty.metrics["error-rate"] = { missing: "candidate: no series yet for `sum(x)`" };
    expect(decideGate(ctx({ streak: { errors: 3, undecided: 0 } }), empty)).toMatchObject({
      decision: "wait",
      readError: false,
    });
  });

  it("inconclusive_limit ends a gate that has all its data and cannot decide", () => {
    const a = Analysis.parse({ ...analysis, inconclusive_limit: 3 });
    // 1.2% vs 1.0% with a margin of 1 point at 5,000 units: not yet shown within.
    const o = observed(5000, { candidate: 0.012, control: 0.01 });
    const e = decideGate(ctx({ analysis: a }), o);
    expect(e).toMatchObject({ decision: "wait", undecided: true });
    expect(e.reason).toMatch(
      /^not yet shown within the margin: error-rate: candidate 1\.20% vs control 1\.00%/,
    );
    const third = decideGate(ctx({ analysis: a, streak: { errors: 0, undecided: 2 } }), o);
    expect(third.decision).toBe("inconclusive");
    expect(third.reason).toMatch(
      /^inconclusive: 3 evaluations in a row had all their data and could not decide \(inconclusive_limit 3\)/,
    );
    // Before the bake nothing counts toward the limit; without the field nothing ends early.
    expect(decideGate(ctx({ analysis: a, elapsedMs: 10_000 }), o).undecided).toBe(false);
    expect(decideGate(ctx({ streak: { errors: 0, undecided: 50 } }), o).decision).toBe("wait");
  });

  it("counts are formatted for people: fractional Prometheus counts keep one decimal", () => {
    const o: GateObservations = {
      assignments: { candidate: 174.4360902255639, control: 1590.2 },
      metrics: {
        "error-rate": {
          candidate: {
            kind: "ratio",
            counts: { numerator: 1.7218, denominator: 174.4360902255639 },
          },
          control: { kind: "ratio", counts: { numerator: 15.9, denominator: 1590.2 } },
        },
        "slow-requests": observed(50_000, { candidate: 0.01, control: 0.01 }).metrics[
          "slow-requests"
        ] as GateObservations["metrics"][string],
      },
    };
    const e = decideGate(ctx({ plannedCandidateShare: 0.1 }), o);
    expect(e.reason).toBe(
      "too few samples: error-rate has 174.4 candidate / 1,590.2 control, min_samples 1,000 per arm",
    );
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
