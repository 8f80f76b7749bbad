/**
 * The recipe's `analysis:` section: parsed with defaults, compiled per wave into the manifest
 * (so it is part of the digest), and refused with path and fix where it could never work.
 */
import { describe, expect, it } from "vitest";
import { checkAndCompile } from "../../../engine/src/domain/compile.ts";
import type { Problem } from "../../../engine/src/domain/errors.ts";
import { manifestDigest } from "../../../engine/src/recipes/digest.ts";
import { goodRecipe } from "../recipe-fixture.ts";

const errorRate = {
  name: "error-rate",
  kind: "ratio",
  better: "lower",
  margin: { absolute: 0.01 },
};

// biome-ignore lint/suspicious/noExplicitAny: recipes under test are raw YAML-shaped values
function gated(analysis: unknown = { metrics: [errorRate] }): any {
  return { ...goodRecipe(), analysis };
}

function problems(input: unknown): Problem[] {
  const r = checkAndCompile(input);
  if (r.ok) throw new Error("expected problems");
  return r.problems;
}

describe("analysis section", () => {
  it("gates every wave with 0 < traffic < 100, with defaults filled, and is part of the digest", () => {
    const r = checkAndCompile(gated());
    if (!r.ok) throw new Error(JSON.stringify(r.problems));
    const waves = r.manifest.waves;
    expect(waves[0]?.analysis).toMatchObject({
      assignment_unit: "request",
      alpha: 0.05,
      min_samples: 1000,
      metrics: [{ ...errorRate, required: true }],
    });
    expect(waves[1]?.analysis).toBeDefined();
    expect(waves[2]).not.toHaveProperty("analysis");
    const plain = checkAndCompile(goodRecipe());
    if (!plain.ok) throw new Error("plain recipe must compile");
    expect(plain.canonical).not.toMatch(/analysis/);
    expect(manifestDigest(r.canonical)).not.toBe(manifestDigest(plain.canonical));
    const other = gated({ metrics: [{ ...errorRate, margin: { absolute: 0.02 } }] });
    const r2 = checkAndCompile(other);
    expect(r2.ok && manifestDigest(r2.canonical)).not.toBe(manifestDigest(r.canonical));
  });

  it("a wave overrides fields, or opts out with false", () => {
    const input = gated({ bake_ms: 120_000, max_wait_ms: 600_000, metrics: [errorRate] });
    input.rollout.waves[0].analysis = { min_samples: 50, bake_ms: 5000 };
    input.rollout.waves[1].analysis = false;
    const r = checkAndCompile(input);
    if (!r.ok) throw new Error(JSON.stringify(r.problems));
    expect(r.manifest.waves[0]?.analysis).toMatchObject({
      min_samples: 50,
      bake_ms: 5000,
      max_wait_ms: 600_000,
    });
    expect(r.manifest.waves[1]).not.toHaveProperty("analysis");
  });

  it("accepts templates using the baseline variables", () => {
    const r = checkAndCompile(
      gated({
        metrics: [
          {
            ...errorRate,
            query: {
              numerator:
                'sum(increase(errors{model="$model",$arm_selector,release="$release"}[$window]))',
              denominator:
                'sum(requests{lane=~"$baseline_lanes",image!="$candidate_image",arm="$arm"}) or sum(requests{image="$image",lane=~"$lane"})',
            },
          },
        ],
      }),
    );
    expect(r.ok, r.ok ? "" : JSON.stringify(r.problems)).toBe(true);
  });

  it.each([
    [
      "a gate on the 100% wave",
      (x: ReturnType<typeof gated>) => {
        x.rollout.waves[2].analysis = { bake_ms: 1000 };
      },
      "rollout.waves.2.analysis",
      /no control serves beside the candidate/,
    ],
    [
      "bake longer than max wait",
      (x: ReturnType<typeof gated>) => {
        x.analysis.bake_ms = 700_000;
        x.analysis.max_wait_ms = 600_000;
      },
      "analysis.bake_ms",
      /inconclusive before it could pass/,
    ],
    [
      "duplicate metric names",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics.push({ ...errorRate });
      },
      "analysis.metrics.1.name",
      /duplicate metric name `error-rate`/,
    ],
    [
      "an unknown query variable",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics[0] = {
          ...errorRate,
          query: { numerator: 'sum(errors{arm="$side"})', denominator: "sum(requests)" },
        };
      },
      "analysis.metrics.0.query.numerator",
      /unknown variable `\$side`/,
    ],
    [
      "a control image variable (the control is the observed baseline, not one image)",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics[0] = {
          ...errorRate,
          query: {
            numerator: 'sum(errors{image="$baseline_image"})',
            denominator: "sum(requests{$arm_selector})",
          },
        };
      },
      "analysis.metrics.0.query.numerator",
      /unknown variable `\$baseline_image`/,
    ],
    [
      "a query that reads the same series for both arms",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics[0] = {
          ...errorRate,
          query: {
            numerator: 'sum(errors{lane=~"$baseline_lanes",image!="$candidate_image"})',
            denominator: "sum(requests{$arm_selector})",
          },
        };
      },
      "analysis.metrics.0.query.numerator",
      /same series for the candidate and the control/,
    ],
    [
      "a template that is not valid PromQL (a bracket left open)",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics[0] = {
          ...errorRate,
          query: {
            numerator: 'sum(increase(errors{model="$model",$arm_selector}[$window])',
            denominator: 'sum(increase(requests{model="$model",$arm_selector}[$window]))',
          },
        };
      },
      "analysis.metrics.0.query.numerator",
      /^metric `error-rate`, numerator: query is not valid PromQL once its variables are filled: the query ends too early/,
    ],
    [
      "a template with a stray token (names the character and shows where)",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics[0] = {
          ...errorRate,
          query: {
            numerator: 'sum(increase(errors{model="$model",$arm_selector}[$window]))',
            denominator: 'sum(increase(requests{model="$model",$arm_selector}[$window])) )',
          },
        };
      },
      "analysis.metrics.0.query.denominator",
      /^metric `error-rate`, denominator: query is not valid PromQL .*unexpected `\)` at character \d+ \(.*⟨here⟩\)/,
    ],
    [
      "a template with an unquoted label value",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics[0] = {
          ...errorRate,
          query: {
            numerator: "sum(errors{model=$model,$arm_selector})",
            denominator: 'sum(requests{model="$model",$arm_selector})',
          },
        };
      },
      "analysis.metrics.0.query.numerator",
      /not valid PromQL/,
    ],
    [
      "$lane in an equality matcher (it is a regex alternation)",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics[0] = {
          ...errorRate,
          query: {
            numerator: 'sum(errors{lane="$lane",$arm_selector})',
            denominator: 'sum(requests{lane=~"$lane",$arm_selector})',
          },
        };
      },
      "analysis.metrics.0.query.numerator",
      /^metric `error-rate`, numerator: query uses `\$lane` outside a regex matcher/,
    ],
    [
      "$baseline_lanes outside any matcher",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics[0] = {
          ...errorRate,
          kind: "latency",
          threshold_ms: 200,
          query: {
            buckets:
              'label_replace(sum by (le) (x{$arm_selector}), "l", "$baseline_lanes", "", "")',
          },
        };
      },
      "analysis.metrics.0.query.buckets",
      /query uses `\$baseline_lanes` outside a regex matcher/,
    ],
    [
      "no gated wave",
      (x: ReturnType<typeof gated>) => {
        x.rollout.waves = [{ lanes: ["lane-a", "lane-b", "lane-c"], traffic: 100 }];
      },
      "analysis",
      /gates no wave/,
    ],
    [
      "a metric without a margin",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics[0] = { name: "error-rate", kind: "ratio", better: "lower" };
      },
      "analysis.metrics.0.margin",
      /./,
    ],
    [
      "alpha above 0.5",
      (x: ReturnType<typeof gated>) => {
        x.analysis.alpha = 0.7;
      },
      "analysis.alpha",
      /alpha must be in \(0, 0\.5\]/,
    ],
    [
      "a wave override without metrics anywhere",
      (x: ReturnType<typeof gated>) => {
        delete x.analysis;
        x.rollout.waves[0].analysis = { bake_ms: 1000 };
      },
      "rollout.waves.0.analysis.metrics",
      /names no metrics/,
    ],
    [
      "an analysis of guardrails only",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics = [{ ...errorRate, required: false }];
      },
      "analysis.metrics",
      /^the analysis has no required metric: every metric is a guardrail \(required: false\) or a dry run/,
    ],
    [
      "an analysis whose only required metric is a dry run",
      (x: ReturnType<typeof gated>) => {
        x.analysis.metrics = [{ ...errorRate, dry_run: true }];
      },
      "analysis.metrics",
      /has no required metric/,
    ],
    [
      "a wave's own metrics with guardrails only",
      (x: ReturnType<typeof gated>) => {
        x.rollout.waves[1].analysis = { metrics: [{ ...errorRate, required: false }] };
      },
      "rollout.waves.1.analysis.metrics",
      /^wave 2's gate has no required metric/,
    ],
    [
      "a check whose tool is not allowlisted",
      (x: ReturnType<typeof gated>) => {
        x.analysis.checks = [{ name: "task-set", tool: "curl-anything" }];
      },
      "analysis.checks.0.tool",
      /^check tool `curl-anything` is not in the allowlist/,
    ],
    [
      "two checks of one name",
      (x: ReturnType<typeof gated>) => {
        x.analysis.checks = [
          { name: "task-set", tool: "run-smoke" },
          { name: "task-set", tool: "run-smoke" },
        ];
      },
      "analysis.checks.1.name",
      /duplicate check name `task-set`/,
    ],
    [
      "a stop-condition metric with neither margin nor SLO",
      (x: ReturnType<typeof gated>) => {
        x.stop_condition = { metrics: [{ name: "errors", kind: "ratio", better: "lower" }] };
      },
      "stop_condition.metrics.0",
      /has neither a margin nor an slo/,
    ],
    [
      "an unknown on_breach",
      (x: ReturnType<typeof gated>) => {
        x.stop_condition = { on_breach: "rollback" };
      },
      "stop_condition.on_breach",
      /on_breach must be compensate .* or hold/,
    ],
  ])("refuses %s with path and fix", (_, mutate, path, message) => {
    const input = gated({ metrics: [{ ...errorRate }] });
    mutate(input);
    const found = problems(input).find((p) => p.path === path);
    expect(found, JSON.stringify(problems(input))).toBeDefined();
    expect(found?.message).toMatch(message);
    expect(found?.fix.length).toBeGreaterThan(10);
  });
});

describe("checks and the stop condition in the manifest", () => {
  it("compiles each check into one assert_check_passed step per lane, after the traffic assert", () => {
    const input = gated({
      metrics: [errorRate],
      checks: [{ name: "task-set", tool: "run-smoke", args: { suite: "golden-20" } }],
    });
    input.rollout.waves[0].lanes = ["lane-a"];
    const r = checkAndCompile(input);
    if (!r.ok) throw new Error(JSON.stringify(r.problems));
    const wave0 = r.manifest.steps.filter((s) => s.wave === 0);
    expect(wave0.map((s) => s.name).slice(-3)).toEqual([
      "set_traffic",
      "assert_traffic_observed",
      "assert_check_passed",
    ]);
    const check = wave0.at(-1);
    expect(check).toMatchObject({
      kind: "runner",
      lane: null,
      backward: null,
      forward: {
        kind: "runner",
        tool: "run-smoke",
        target: "lane=lane-a:check=task-set",
        args: {
          lane: { id: "lane-a" },
          image: input.image,
          check: { name: "task-set", args: { suite: "golden-20" } },
        },
      },
    });
    // The 50% wave inherits the recipe's checks; the 100% wave has no gate and no check.
    expect(
      r.manifest.steps.filter((s) => s.name === "assert_check_passed").map((s) => s.wave),
    ).toEqual([0, 1]);
  });

  it("keeps a declared stop condition in the manifest; without one the manifest is unchanged", () => {
    const plain = checkAndCompile(gated());
    const stop = checkAndCompile({
      ...gated(),
      stop_condition: {
        on_breach: "hold",
        metrics: [{ name: "errors", kind: "ratio", better: "lower", slo: 0.05 }],
      },
    });
    if (!plain.ok || !stop.ok) throw new Error("both compile");
    expect(plain.canonical).not.toMatch(/stop_condition/);
    expect(stop.manifest.stop_condition).toEqual({
      on_breach: "hold",
      metrics: [{ name: "errors", kind: "ratio", better: "lower", slo: 0.05 }],
    });
    expect(manifestDigest(stop.canonical)).not.toBe(manifestDigest(plain.canonical));
  });
});

describe("recipes/gated.yaml", () => {
  it("compiles, gating the 10% and 50% waves", async () => {
    const { readFileSync } = await import("node:fs");
    const { parse } = await import("yaml");
    const r = checkAndCompile(parse(readFileSync("recipes/gated.yaml", "utf8")));
    if (!r.ok) throw new Error(JSON.stringify(r.problems));
    expect(r.manifest.waves.map((w) => w.analysis?.metrics.map((m) => m.name) ?? null)).toEqual([
      ["error-rate", "slow-requests"],
      ["error-rate", "slow-requests"],
      null,
    ]);
  });
});
