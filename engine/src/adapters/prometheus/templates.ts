/**
 * PromQL templates of a gate and how they are filled. Defaults read the reference router's
 * series (engine/src/control-plane/traffic.ts); a metric's `query` replaces them.
 */
import type { GateMetric } from "../../domain/gate/analysis.ts";

/** Variables filled into a template, e.g. `{model: "m", image: "…", arm: "candidate"}`. */
export type TemplateVars = Record<
  "model" | "lane" | "arm" | "release" | "image" | "window",
  string
>;

const counter = (name: string) => `sum(increase(${name}{model="$model",image="$image"}[$window]))`;

/** Assignment units of one arm (the SRM check's counts). */
export const UNITS_TEMPLATE = counter("baton_arm_units_total");
export const DEFAULT_NUMERATOR = counter("baton_arm_errors_total");
export const DEFAULT_DENOMINATOR = counter("baton_arm_requests_total");
export const DEFAULT_BUCKETS =
  'sum by (le) (increase(baton_arm_latency_ms_bucket{model="$model",image="$image"}[$window]))';

/** The templates a metric needs, by role. */
export function metricTemplates(m: GateMetric): Record<string, string> {
  if (m.kind === "ratio") {
    return {
      numerator: m.query?.numerator ?? DEFAULT_NUMERATOR,
      denominator: m.query?.denominator ?? DEFAULT_DENOMINATOR,
    };
  }
  return { buckets: m.query?.buckets ?? DEFAULT_BUCKETS };
}

/**
 * Fills `$name` variables. Values are escaped for a PromQL double-quoted string (the
 * contract check refuses unknown variables, so none is left).
 */
export function fillTemplate(template: string, vars: TemplateVars): string {
  return template.replace(
    /\$(model|lane|arm|release|image|window)\b/g,
    (_, k: keyof TemplateVars) =>
      k === "window" ? vars.window : vars[k].replace(/\\/g, "\\\\").replace(/"/g, '\\"'),
  );
}
