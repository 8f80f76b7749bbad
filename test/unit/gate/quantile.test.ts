/**
 * The quantile metric kind: the mixture is a martingale (exact sum), each arm's bounds hold the
 * true quantile at the buckets' resolution, a 2× p99 regression fails with a reason that names
 * p99 in plain words, equal arms pass, missing data holds and never passes, and the recipe's
 * schema and contract check name the field that is wrong.
 */
import { describe, expect, it } from "vitest";
import { checkAndCompile } from "../../../engine/src/domain/compile.ts";
import type { Problem } from "../../../engine/src/domain/errors.ts";
import { Analysis } from "../../../engine/src/domain/gate/analysis.ts";
import {
  boundaryMultiplier,
  oneSidedMultiplier,
  tunedRho,
} from "../../../engine/src/domain/gate/confidence-sequence.ts";
import {
  decideGate,
  type GateContext,
  type GateObservations,
} from "../../../engine/src/domain/gate/decide.ts";
import { metricEvidence } from "../../../engine/src/domain/gate/evidence.ts";
import type { Bucket } from "../../../engine/src/domain/gate/observations.ts";
import {
  armQuantile,
  logMixture,
  quantileLabel,
  quantilePriorConcentration,
} from "../../../engine/src/domain/gate/quantile.ts";
import { decideStop } from "../../../engine/src/domain/gate/stop.ts";
import { stopConditionOf } from "../../../engine/src/domain/gate/stop-condition.ts";
import { metricLine } from "../../../engine/src/domain/gate/summary.ts";
import { goodRecipe } from "../recipe-fixture.ts";

const BOUNDS = [50, 100, 200, 300, 400, 500, 600, 800, 1000, 2500];

/**
 * A histogram of `n` latencies of a log-normal with median `median` ms and σ 0.6, as exact
 * expected counts (so tests need no random draws): count(≤ b) = n·Φ(ln(b/median)/0.6).
 */
function hist(n: number, median: number, addMs = 0): Bucket[] {
  const phi = (z: number) => 0.5 * (1 + erf(z / Math.SQRT2));
  return [
    ...BOUNDS.map((le) => ({
      le,
      count: le <= addMs ? 0 : Math.round(n * phi(Math.log((le - addMs) / median) / 0.6)),
    })),
    { le: Number.POSITIVE_INFINITY, count: n },
  ];
}

/** Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): enough for expected counts. */
function erf(x: number): number {
  const t = 1 / (1 + 0.3275911 * Math.abs(x));
  const y =
    1 -
    ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) *
      t *
      Math.exp(-x * x);
  return x >= 0 ? y : -y;
}

const analysis = Analysis.parse({
  min_samples: 1000,
  bake_ms: 60_000,
  max_wait_ms: 600_000,
  metrics: [{ name: "latency-p99", kind: "quantile", quantile: 0.99, margin: { ms: 100 } }],
});

const ctx = (over: Partial<GateContext> = {}): GateContext => ({
  analysis,
  plannedCandidateShare: 0.2,
  elapsedMs: 120_000,
  phase: "gate",
  ...over,
});

function observed(c: Bucket[], b: Bucket[]): GateObservations {
  const n = (h: Bucket[]) => (h[h.length - 1] as Bucket).count;
  return {
    assignments: { candidate: n(c), control: n(b) },
    metrics: {
      "latency-p99": {
        candidate: { kind: "latency", buckets: c },
        control: { kind: "latency", buckets: b },
      },
    },
  };
}

describe("quantile confidence sequence", () => {
  it("the beta-binomial mixture has mean 1 under the null (exact sum over the binomial)", () => {
    for (const [t, p, k] of [
      [30, 0.9, 5],
      [200, 0.99, 104],
      [57, 0.5, 2],
    ] as const) {
      let sum = 0;
      let logChoose = 0;
      for (let s = 0; s <= t; s++) {
        if (s > 0) logChoose += Math.log(t - s + 1) - Math.log(s);
        sum += Math.exp(
          logChoose + s * Math.log(p) + (t - s) * Math.log1p(-p) + logMixture(s, t, p, k),
        );
      }
      expect(sum).toBeCloseTo(1, 9);
    }
  });

  it("bounds an arm's p99 at the buckets' resolution: lower < true p99 ≤ upper", () => {
    // True p99 of the log-normal: 80·e^(0.6·2.326) ≈ 323 ms, in the bucket (300, 400].
    const k = quantilePriorConcentration(0.05, 1000);
    const few = armQuantile(hist(100, 80), 0.99, 0.05, k);
    const many = armQuantile(hist(50_000, 80), 0.99, 0.05, k);
    if (typeof few === "string" || typeof many === "string") throw new Error("unreadable");
    expect(many.bucket).toEqual({ low: 300, high: 400 });
    expect(many.lower).toBe(300);
    expect(many.upper).toBe(400);
    // With 100 observations nothing bounds it above yet, and the lower bound is looser.
    expect(few.upper).toBe(Number.POSITIVE_INFINITY);
    expect(few.lower).toBeLessThan(323);
    expect(quantileLabel(0.99)).toBe("p99");
    expect(quantileLabel(0.999)).toBe("p99.9");
    expect(quantileLabel(0.5)).toBe("p50");
  });
});

describe("decideGate with a quantile metric", () => {
  it("fails a 2× p99 regression, naming p99 and the buckets' resolution in plain words first", () => {
    const e = decideGate(ctx({ elapsedMs: 5_000 }), observed(hist(4000, 160), hist(16_000, 80)));
    expect(e.decision).toBe("fail");
    expect(e.reason).toMatch(
      /^latency-p99: candidate p99 600–800 ms vs control 300–400 ms, allowed \+100 ms: worse \(at the buckets' resolution the candidate's p99 is above 500 ms and the control's at most 400 ms, anytime-valid at α 0\.05; candidate 4,000 requests, control 16,000\)$/,
    );
  });

  it("fails a regression against a percent margin, and passes equal arms once both are bounded", () => {
    const pct = Analysis.parse({
      ...analysis,
      metrics: [{ name: "latency-p99", kind: "quantile", quantile: 0.99, margin: { percent: 20 } }],
    });
    const bad = decideGate(ctx({ analysis: pct }), observed(hist(4000, 160), hist(16_000, 80)));
    expect(bad.decision).toBe("fail");
    expect(bad.reason).toMatch(/allowed \+20%: worse/);
    const wide = Analysis.parse({
      ...analysis,
      metrics: [{ name: "latency-p99", kind: "quantile", quantile: 0.99, margin: { ms: 100 } }],
    });
    const same = decideGate(ctx({ analysis: wide }), observed(hist(20_000, 80), hist(80_000, 80)));
    expect(same.decision).toBe("pass");
    expect(same.reason).toMatch(
      /latency-p99: candidate p99 300–400 ms vs control 300–400 ms, allowed \+100 ms: within \(at the buckets' resolution the candidate's p99 is at most 400 ms and the control's above 300 ms/,
    );
  });

  it.each([
    ["a failed query", { missing: "query `q` failed: prometheus 500: boom", error: true }],
    [
      "no +Inf bucket",
      {
        candidate: { kind: "latency", buckets: [{ le: 100, count: 5 }] },
        control: { kind: "latency", buckets: hist(16_000, 80) },
      },
    ],
    [
      "no candidate samples",
      {
        candidate: { kind: "latency", buckets: hist(0, 80) },
        control: { kind: "latency", buckets: hist(16_000, 80) },
      },
    ],
  ] as const)("holds without data (%s): never passes; inconclusive at max wait", (_, m) => {
    const o = observed(hist(4000, 80), hist(16_000, 80));
    o.metrics["latency-p99"] = m as unknown as GateObservations["metrics"][string];
    const e = decideGate(ctx(), o);
    expect(e.decision).toBe("wait");
    expect(e.reason).toMatch(/^missing evidence: latency-p99 \(/);
    expect(decideGate(ctx({ elapsedMs: 600_000 }), o).decision).toBe("inconclusive");
  });

  it("keeps the bounds in the evidence (JSON-safe) and the summary line says p99", () => {
    const e = decideGate(ctx({ elapsedMs: 5_000 }), observed(hist(300, 80), hist(1_200, 80)));
    const stored = JSON.parse(JSON.stringify(e.metrics.map(metricEvidence)));
    expect(stored[0].quantile.candidate.upper).toBeNull();
    expect(metricLine(stored[0])).toMatch(
      /^latency-p99 \(primary\): candidate p99 300–400 ms vs control 300–400 ms, allowed \+100 ms: not yet shown within/,
    );
  });

  it("a quantile guardrail is part of the derived stop condition, which breaches on it", () => {
    const stop = stopConditionOf({
      waves: [
        {
          analysis: Analysis.parse({
            metrics: [
              { name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.01 } },
              {
                name: "latency-p99",
                kind: "quantile",
                quantile: 0.99,
                margin: { ms: 100 },
                required: false,
              },
            ],
          }),
        },
      ],
    });
    expect(stop?.metrics.map((m) => m.name)).toEqual(["latency-p99"]);
    const s = decideStop(
      stop as NonNullable<typeof stop>,
      { seq: 1, at: 0, wave: 0, since: 0 },
      observed(hist(4000, 80, 400), hist(16_000, 80)),
    );
    expect(s.breached).toBe(true);
    expect(s.reason).toMatch(/^stop condition breached: latency-p99: candidate p99 .* worse/);
  });
});

describe("recipe: quantile metrics", () => {
  const quantile = { name: "latency-p99", kind: "quantile", quantile: 0.99, margin: { ms: 100 } };
  const recipe = (metric: unknown) => ({ ...goodRecipe(), analysis: { metrics: [metric] } });
  const problems = (input: unknown): Problem[] => {
    const r = checkAndCompile(input);
    if (r.ok) throw new Error("expected problems");
    return r.problems;
  };

  it("compiles a quantile metric into the manifest", () => {
    const r = checkAndCompile(recipe(quantile));
    if (!r.ok) throw new Error(JSON.stringify(r.problems));
    expect(r.manifest.waves[0]?.analysis?.metrics[0]).toMatchObject(quantile);
  });

  it.each([
    [{ ...quantile, quantile: 99 }, "analysis.metrics.0.quantile", /quantile must be in \(0, 1\)/],
    [{ ...quantile, margin: { absolute: 0.01 } }, "analysis.metrics.0.margin", /\{ms: δ\}/],
    [{ ...quantile, margin: { ms: -5 } }, "analysis.metrics.0.margin", /margin/],
    [{ ...quantile, slo_ms: 0 }, "analysis.metrics.0.slo_ms", /slo_ms must be > 0/],
    [
      {
        ...quantile,
        query: { buckets: 'sum(increase(x_bucket{model="$model",$arm_selector}[$window]))' },
      },
      "analysis.metrics.0.query.buckets",
      /does not keep the `le` label/,
    ],
  ])("refuses %j naming the field", (metric, path, message) => {
    const found = problems(recipe(metric));
    expect(
      found.some((p) => p.path.startsWith(path) && message.test(p.message)),
      JSON.stringify(found),
    ).toBe(true);
  });
});

describe("the test at the margin", () => {
  const a = Analysis.parse({
    min_samples: 1000,
    metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0 } }],
  });
  const at = (xc: number) =>
    decideGate(
      { analysis: a, plannedCandidateShare: 0.2, elapsedMs: 5_000, phase: "gate" },
      {
        assignments: { candidate: 1000, control: 4000 },
        metrics: {
          "error-rate": {
            candidate: { kind: "ratio", counts: { numerator: xc, denominator: 1000 } },
            control: { kind: "ratio", counts: { numerator: 80, denominator: 4000 } },
          },
        },
      },
    );

  it("fails 35/1,000 against 80/4,000 (δ 0) with the null's variance, before the bound on Δ does", () => {
    const e = at(35);
    expect(e.decision).toBe("fail");
    expect(e.reason).toMatch(
      /^error-rate: candidate 3\.50% vs control 2\.00%, allowed \+0 points: worse \(more than 0 points worse than the control, tested at the margin, anytime-valid at α 0\.05;/,
    );
    // The plug-in bound on Δ alone does not show it yet.
    expect(e.metrics[0]?.difference?.upper ?? -1).toBeGreaterThan(0);
  });

  it("waits for 10 expected events per arm: 3 errors in the first 10 requests is no verdict yet", () => {
    const e = decideGate(
      { analysis: a, plannedCandidateShare: 0.2, elapsedMs: 5_000, phase: "gate" },
      {
        assignments: { candidate: 10, control: 40 },
        metrics: {
          "error-rate": {
            candidate: { kind: "ratio", counts: { numerator: 3, denominator: 10 } },
            control: { kind: "ratio", counts: { numerator: 0, denominator: 40 } },
          },
        },
      },
    );
    expect(e.decision).toBe("wait");
  });

  it("does not fail a candidate as good as the control", () => {
    expect(at(20).decision).not.toBe("fail");
    expect(at(24).decision).not.toBe("fail");
  });
});

describe("the fail side of a share's metric is one-sided at α", () => {
  it("c⁺ lies between the fixed-horizon one-sided z and the two-sided multiplier", () => {
    const rho = tunedRho(0.05, 2000);
    for (const t of [500, 2000, 5000, 50_000]) {
      const c = oneSidedMultiplier(t, rho, 0.05);
      expect(c).toBeGreaterThan(1.6449);
      expect(c).toBeLessThan(boundaryMultiplier(t, rho, 0.05));
    }
  });

  it("fails 40/1,000 against 80/4,000 (δ 0), which the two-sided bound alone would not", () => {
    const a = Analysis.parse({
      min_samples: 1000,
      metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0 } }],
    });
    const e = decideGate(
      { analysis: a, plannedCandidateShare: 0.2, elapsedMs: 5_000, phase: "gate" },
      {
        assignments: { candidate: 1000, control: 4000 },
        metrics: {
          "error-rate": {
            candidate: { kind: "ratio", counts: { numerator: 40, denominator: 1000 } },
            control: { kind: "ratio", counts: { numerator: 80, denominator: 4000 } },
          },
        },
      },
    );
    expect(e.decision).toBe("fail");
    expect(e.reason).toMatch(
      /^error-rate: candidate 4\.00% vs control 2\.00%, allowed \+0 points: worse/,
    );
  });
});
