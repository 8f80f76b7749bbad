/**
 * The traffic generator as a shadow router (the demo's router; docs/control-plane.md "The router
 * as a shadow router"), read by the embedded metrics source: copies go only to shadow-safe lanes
 * serving the candidate at weight 0, within the share cap; users' counters are untouched by
 * them; a shadow gate reads the copies' outcomes beside the baseline's on the same requests.
 * The router exposes those pairs as `baton_shadow_*` series, the Prometheus source reads a
 * shadow gate through its shadow templates (or a metric's `shadow_query`), and the contract
 * check refuses a bad `shadow_query` naming the field and the fix.
 */
import { describe, expect, it } from "vitest";
import { EmbeddedMetricsSource } from "../../../engine/src/adapters/embedded-metrics/index.ts";
import { PrometheusMetricsSource } from "../../../engine/src/adapters/prometheus/index.ts";
import {
  armVars,
  DEFAULT_SHADOW_BUCKETS,
  DEFAULT_SHADOW_DENOMINATOR,
  DEFAULT_SHADOW_NUMERATOR,
  fillTemplate,
  SHADOW_UNITS_TEMPLATE,
} from "../../../engine/src/adapters/prometheus/templates.ts";
import { ControlPlaneCore } from "../../../engine/src/control-plane/core.ts";
import { MemoryCpStore } from "../../../engine/src/control-plane/memory-store.ts";
import { TrafficGenerator } from "../../../engine/src/control-plane/traffic.ts";
import { checkAndCompile } from "../../../engine/src/domain/compile.ts";
import type { Problem } from "../../../engine/src/domain/errors.ts";
import { Analysis } from "../../../engine/src/domain/gate/analysis.ts";
import type { GateQuery } from "../../../engine/src/ports/metrics-source.ts";
import { goodRecipe } from "../recipe-fixture.ts";

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

  it("the embedded source reads a shadow gate from the shadow counters: a metric's query is not read there, a shadow_query cannot be", async () => {
    const { t } = world();
    const source = new EmbeddedMetricsSource(t);
    const a = Analysis.parse({
      metrics: [
        {
          name: "error-rate",
          kind: "ratio",
          better: "lower",
          margin: { absolute: 0.01 },
          query: { numerator: "sum(e{$arm_selector})", denominator: "sum(r{$arm_selector})" },
        },
        {
          name: "own",
          kind: "ratio",
          better: "lower",
          margin: { absolute: 0.01 },
          shadow_query: {
            numerator: "sum(e{$arm_selector})",
            denominator: "sum(r{$arm_selector})",
          },
        },
      ],
    });
    await source.observe({ ...query(true), analysis: a });
    t.send(400);
    const o = await source.observe({ ...query(true), analysis: a });
    expect(o.metrics["error-rate"]).toMatchObject({
      candidate: { counts: { denominator: 100 } },
      control: { counts: { denominator: 100 } },
    });
    expect(o.metrics.own).toMatchObject({
      error: true,
      missing: expect.stringContaining("Prometheus"),
    });
    // Outside a shadow phase the metric's query is what cannot be read here.
    const users = await source.observe({ ...query(false), analysis: a });
    expect(users.metrics["error-rate"]).toMatchObject({ error: true });
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

  it("exposes the mirrored pairs as baton_shadow_* series, labelled as the users' traffic, every lane opened at 0", () => {
    const { t } = world();
    t.send(1000);
    // A lane given an image while the phase is in force opens its series too.
    t.setLaneImage("late", CANDIDATE);
    const text = t.metricsText();
    expect(text).toContain(
      `baton_shadow_units_total{model="m",lane="late",image="${CANDIDATE}",arm="candidate"} 0`,
    );
    const at = (lane: string, image: string, arm: string) =>
      `{model="m",lane="${lane}",image="${image}",arm="${arm}"}`;
    expect(text).toContain(`baton_shadow_units_total${at("safe", CANDIDATE, "candidate")} 250`);
    expect(text).toContain(`baton_shadow_units_total${at("base", BASELINE, "control")} 250`);
    expect(text).toContain(`baton_shadow_requests_total${at("base", BASELINE, "control")} 250`);
    // A lane that is not shadow-safe took no copy: its series is there, at 0.
    expect(text).toContain(`baton_shadow_requests_total${at("unsafe", CANDIDATE, "candidate")} 0`);
    const errors = Number(
      /baton_shadow_errors_total\{model="m",lane="safe",[^}]*\} (\d+)/.exec(text)?.[1],
    );
    const own = t.shadowSnapshot().find((c) => c.lane === "safe")!;
    expect(errors).toBe(own.errors);
    expect(errors).toBeGreaterThan(80);
    expect(text).toContain(
      `baton_shadow_latency_ms_bucket{model="m",lane="safe",image="${CANDIDATE}",arm="candidate",le="+Inf"} 250`,
    );
    expect(text).toContain("# TYPE baton_shadow_latency_ms histogram");
  });

  it("the shadow templates select the arm by the router's arm label", () => {
    const vars = (arm: "candidate" | "control") =>
      armVars(arm, { ...query(true), controlLanes: ["base"] }, "30s");
    expect(fillTemplate(SHADOW_UNITS_TEMPLATE, vars("candidate"))).toBe(
      'sum(increase(baton_shadow_units_total{model="m",arm="candidate"}[30s]))',
    );
    expect(fillTemplate(DEFAULT_SHADOW_NUMERATOR, vars("control"))).toBe(
      'sum(increase(baton_shadow_errors_total{model="m",arm="control"}[30s]))',
    );
    expect(fillTemplate(DEFAULT_SHADOW_DENOMINATOR, vars("control"))).toBe(
      'sum(increase(baton_shadow_requests_total{model="m",arm="control"}[30s]))',
    );
    expect(fillTemplate(DEFAULT_SHADOW_BUCKETS, vars("candidate"))).toBe(
      'sum by (le) (increase(baton_shadow_latency_ms_bucket{model="m",arm="candidate"}[30s]))',
    );
    // Outside a shadow phase the same query selects by image, as before.
    expect(
      fillTemplate(SHADOW_UNITS_TEMPLATE, armVars("candidate", query(false), "30s")),
    ).toContain(`image="${CANDIDATE}"`);
  });

  it("the Prometheus source reads a shadow gate through the shadow templates, or a metric's shadow_query", async () => {
    const asked: string[] = [];
    const fetch = (async (url: string) => {
      const promql = new URL(url).searchParams.get("query") ?? "";
      asked.push(promql);
      const candidate = promql.includes('arm="candidate"');
      const value = promql.includes("errors") ? (candidate ? 120 : 3) : 250;
      return new Response(
        JSON.stringify({
          status: "success",
          data: { resultType: "vector", result: [{ metric: {}, value: [1, String(value)] }] },
        }),
      );
    }) as typeof globalThis.fetch;
    const p = new PrometheusMetricsSource({ baseUrl: "http://prom.test", fetch });
    const withOwn = Analysis.parse({
      metrics: [
        {
          name: "error-rate",
          kind: "ratio",
          better: "lower",
          margin: { absolute: 0.01 },
          // Real traffic's template: never read in a shadow phase.
          query: {
            numerator: "sum(users_errors{$arm_selector})",
            denominator: "sum(users{$arm_selector})",
          },
        },
        {
          name: "own-errors",
          kind: "ratio",
          better: "lower",
          margin: { absolute: 0.01 },
          shadow_query: {
            numerator: 'sum(increase(my_mirror_errors{arm="$arm"}[$window]))',
            denominator: 'sum(increase(my_mirror_requests{arm="$arm"}[$window]))',
          },
        },
      ],
    });
    const o = await p.observe({ ...query(true), analysis: withOwn, sinceMs: 0, nowMs: 60_000 });
    expect(o.assignments).toEqual({ candidate: 250, control: 250 });
    expect(o.metrics["error-rate"]).toEqual({
      candidate: { kind: "ratio", counts: { numerator: 120, denominator: 250 } },
      control: { kind: "ratio", counts: { numerator: 3, denominator: 250 } },
    });
    expect(o.metrics["own-errors"]).toMatchObject({
      candidate: { counts: { numerator: 120, denominator: 250 } },
    });
    expect(asked).toContain(
      'sum(increase(baton_shadow_units_total{model="m",arm="control"}[60s]))',
    );
    expect(asked).toContain(
      'sum(increase(baton_shadow_errors_total{model="m",arm="candidate"}[60s]))',
    );
    expect(asked).toContain('sum(increase(my_mirror_errors{arm="candidate"}[60s]))');
    expect(asked.some((q) => q.includes("users") || q.includes("baton_arm_"))).toBe(false);
  });

  it("the contract check refuses a bad shadow_query, naming the field and the fix", () => {
    const errorRate = {
      name: "error-rate",
      kind: "ratio",
      better: "lower",
      margin: { absolute: 0.01 },
    };
    const problemsOf = (shadow_query: unknown, kind: "ratio" | "quantile" = "ratio") => {
      const metric =
        kind === "ratio"
          ? { ...errorRate, name: "shadow-errors", shadow_query }
          : { name: "p99", kind: "quantile", quantile: 0.99, margin: { ms: 50 }, shadow_query };
      const r = checkAndCompile({ ...goodRecipe(), analysis: { metrics: [errorRate, metric] } });
      return r.ok ? [] : r.problems;
    };
    const at = (p: Problem[], path: string) => p.find((x) => x.path === path);
    const unknown = problemsOf({
      numerator: 'sum(increase(baton_shadow_errors_total{arm="$side"}[$window]))',
      denominator: "sum(increase(baton_shadow_requests_total{$arm_selector}[$window]))",
    });
    expect(at(unknown, "analysis.metrics.1.shadow_query.numerator")).toMatchObject({
      message: "shadow_query uses unknown variable `$side`",
      fix: expect.stringContaining("Use only $model"),
    });
    const same = problemsOf({
      numerator: "sum(increase(baton_shadow_errors_total[$window]))",
      denominator: "sum(increase(baton_shadow_requests_total{$arm_selector}[$window]))",
    });
    expect(at(same, "analysis.metrics.1.shadow_query.numerator")).toMatchObject({
      message: expect.stringContaining("reads the same series for the candidate and the control"),
      fix: expect.stringContaining('arm="candidate"'),
    });
    const broken = problemsOf({
      numerator: "sum(increase(baton_shadow_errors_total{$arm_selector}[$window])",
      denominator: "sum(increase(baton_shadow_requests_total{$arm_selector}[$window]))",
    });
    expect(at(broken, "analysis.metrics.1.shadow_query.numerator")?.message).toMatch(
      /^metric `shadow-errors`, numerator: .*not valid PromQL/,
    );
    const noLe = problemsOf(
      { buckets: "sum(increase(baton_shadow_latency_ms_bucket{$arm_selector}[$window]))" },
      "quantile",
    );
    expect(at(noLe, "analysis.metrics.1.shadow_query.buckets")).toMatchObject({
      message: expect.stringContaining("shadow_query.buckets does not keep the `le` label"),
      fix: expect.stringContaining("sum by (le)"),
    });
    // A good one passes the check.
    expect(
      problemsOf({
        numerator: "sum(increase(baton_shadow_errors_total{$arm_selector}[$window]))",
        denominator: "sum(increase(baton_shadow_requests_total{$arm_selector}[$window]))",
      }),
    ).toEqual([]);
  });
});
