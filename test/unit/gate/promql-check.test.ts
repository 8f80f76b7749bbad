/**
 * The PromQL contract check: templates are parsed with Prometheus's grammar
 * (@prometheus-io/lezer-promql) once filled; the defaults and the shipped recipe's templates
 * pass, broken ones are named with where the parser stopped.
 */
import { describe, expect, it } from "vitest";
import {
  DEFAULT_BUCKETS,
  DEFAULT_DENOMINATOR,
  DEFAULT_NUMERATOR,
  UNITS_TEMPLATE,
} from "../../../engine/src/adapters/prometheus/templates.ts";
import { fillSample, promqlProblem } from "../../../engine/src/domain/promql-check.ts";

describe("promqlProblem", () => {
  it("accepts the default templates and regex use of $lane / $baseline_lanes", () => {
    for (const t of [DEFAULT_BUCKETS, DEFAULT_DENOMINATOR, DEFAULT_NUMERATOR, UNITS_TEMPLATE])
      expect(promqlProblem(t), t).toBeUndefined();
    expect(
      promqlProblem(
        'sum(rate(x{lane=~"$lane",$arm_selector}[$window])) / sum(rate(x{lane!~"$baseline_lanes",image="$image"}[5m]))',
      ),
    ).toBeUndefined();
  });

  it("fills every known variable and leaves unknown ones alone", () => {
    expect(fillSample('x{model="$model",$arm_selector}[$window] $nope')).toBe(
      'x{model="model",image="registry.example/model@sha256:1"}[60s] $nope',
    );
  });

  it.each([
    ["sum(rate(x[5m])", /ends too early/],
    ["sum(rate(x[5m])))", /unexpected `\)` at character 17/],
    ['x{a="b"} +', /ends too early/],
    ["sum(x{$arm_selector}) by", /not valid PromQL/],
    ["rate(x{$arm_selector})[", /not valid PromQL/],
  ])("refuses %s", (t, re) => {
    const p = promqlProblem(t);
    expect(p?.kind).toBe("syntax");
    expect(p?.message).toMatch(re);
  });

  it("refuses $lane outside a regex matcher", () => {
    expect(promqlProblem('x{lane="$lane",$arm_selector}')?.kind).toBe("regex_variable");
    expect(promqlProblem('x{lane!="$baseline_lanes",$arm_selector}')?.kind).toBe("regex_variable");
  });
});
