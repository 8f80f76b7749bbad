/**
 * PromQL templates of a gate and how they are filled. Defaults read the reference router's
 * series (engine/src/control-plane/traffic.ts); a metric's `query` replaces them. A shadow
 * phase's gate reads the router's shadow series instead (`baton_shadow_*`,
 * engine/src/control-plane/shadow-metrics.ts), and a metric's `shadow_query` replaces those.
 */
import { QUERY_VARIABLES, type QueryVariable } from "../../domain/analysis-check.ts";
import type { GateMetric } from "../../domain/gate/analysis.ts";

/**
 * Variables filled into a template, per arm (docs/gate.md, "Where the numbers come from"):
 * - `model`, `release`: the model and the release id;
 * - `arm`: `candidate` or `control`;
 * - `image`: the arm's assumed image (the candidate's, or the recipe's `previous_image`);
 * - `lane`: the recipe's lanes as an anchored-regex alternation `a|b|c` (for `=~`, each id
 *   regex-escaped, so `lane.a` matches only itself, not `laneXa`);
 * - `candidate_image`: the candidate's image, for both arms;
 * - `baseline_lanes`: the lanes serving the model at release start (the observed baseline,
 *   weight > 0, not excluded) as an anchored-regex alternation `a|b` (for `=~`, each id
 *   regex-escaped); without an observed baseline, the recipe's lanes;
 * - `arm_selector`: label matchers selecting the arm, to put inside `{…}`: the candidate is
 *   `image="<candidate>"`; the control is `lane=~"<baseline lanes>",image!="<candidate>"`
 *   (whatever the baseline lanes serve but the candidate, e.g. a hotfix), or, without an
 *   observed baseline, `image="<previous_image>"`. In a shadow phase it is `arm="<arm>"`: the
 *   router labels a copy's answer `candidate` and the routed lane's answer to the same request
 *   `control`;
 * - `window`: seconds since the wave began, e.g. `125s`.
 * Every value but `arm_selector` and `window` is escaped for a PromQL double-quoted string.
 */
export type TemplateVars = Record<QueryVariable, string>;

/** Names of the template variables, longest first (so `$arm_selector` is not read as `$arm`). */
const BY_LENGTH = [...QUERY_VARIABLES].sort((a, b) => b.length - a.length);

const counter = (name: string) => `sum(increase(${name}{model="$model",$arm_selector}[$window]))`;

/** Assignment units of one arm (the SRM check's counts). */
export const UNITS_TEMPLATE = counter("baton_arm_units_total");
export const DEFAULT_NUMERATOR = counter("baton_arm_errors_total");
export const DEFAULT_DENOMINATOR = counter("baton_arm_requests_total");
export const DEFAULT_BUCKETS =
  'sum by (le) (increase(baton_arm_latency_ms_bucket{model="$model",$arm_selector}[$window]))';

/** Mirrored requests one arm answered (a shadow gate's SRM counts: one half each). */
export const SHADOW_UNITS_TEMPLATE = counter("baton_shadow_units_total");
export const DEFAULT_SHADOW_NUMERATOR = counter("baton_shadow_errors_total");
export const DEFAULT_SHADOW_DENOMINATOR = counter("baton_shadow_requests_total");
export const DEFAULT_SHADOW_BUCKETS =
  'sum by (le) (increase(baton_shadow_latency_ms_bucket{model="$model",$arm_selector}[$window]))';

/**
 * The templates a metric needs, by role: its `query` (or the defaults) on real traffic; in a
 * shadow phase (`shadow`) its `shadow_query` (or the shadow defaults), never its `query`, which
 * reads what users were served.
 */
export function metricTemplates(m: GateMetric, shadow = false): Record<string, string> {
  if (m.kind === "ratio") {
    const q = shadow ? m.shadow_query : m.query;
    return {
      numerator: q?.numerator ?? (shadow ? DEFAULT_SHADOW_NUMERATOR : DEFAULT_NUMERATOR),
      denominator: q?.denominator ?? (shadow ? DEFAULT_SHADOW_DENOMINATOR : DEFAULT_DENOMINATOR),
    };
  }
  const q = shadow ? m.shadow_query : m.query;
  return { buckets: q?.buckets ?? (shadow ? DEFAULT_SHADOW_BUCKETS : DEFAULT_BUCKETS) };
}

/** Escapes a value for a PromQL double-quoted string. */
export const promString = (v: string): string => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"');

/** Escapes RE2 metacharacters so a lane id matches only itself inside `=~`. */
export const regexLiteral = (v: string): string => v.replace(/[\\^$.|?*+()[\]{}]/g, "\\$&");

/**
 * The variables of one arm. `controlLanes` is the observed baseline's lanes (absent or empty:
 * none observed, and the control is `controlImage`). `shadow`: a shadow phase's read, where
 * the arm is the router's `arm` label. Values are unescaped; `fillTemplate` escapes them, and
 * `arm_selector` is built escaped.
 */
export function armVars(
  arm: "candidate" | "control",
  q: {
    model: string;
    releaseId: string;
    candidateImage: string;
    controlImage: string;
    lanes: string[];
    controlLanes?: string[];
    shadow?: true;
  },
  window: string,
): TemplateVars {
  const observed = q.controlLanes?.length ? q.controlLanes : null;
  const baselineLanes = (observed ?? q.lanes).map(regexLiteral).join("|");
  const armSelector = q.shadow
    ? `arm="${arm}"`
    : arm === "candidate"
      ? `image="${promString(q.candidateImage)}"`
      : observed
        ? `lane=~"${promString(baselineLanes)}",image!="${promString(q.candidateImage)}"`
        : `image="${promString(q.controlImage)}"`;
  return {
    model: q.model,
    lane: q.lanes.map(regexLiteral).join("|"),
    arm,
    release: q.releaseId,
    image: arm === "candidate" ? q.candidateImage : q.controlImage,
    candidate_image: q.candidateImage,
    baseline_lanes: baselineLanes,
    arm_selector: armSelector,
    window,
  };
}

const VARIABLE = new RegExp(`\\$(${BY_LENGTH.join("|")})\\b`, "g");

/**
 * Fills `$name` variables. Values are escaped for a PromQL double-quoted string, except
 * `$arm_selector` (already label matchers) and `$window` (a duration); the contract check
 * refuses unknown variables, so none is left.
 */
export function fillTemplate(template: string, vars: TemplateVars): string {
  return template.replace(VARIABLE, (_, k: keyof TemplateVars) =>
    k === "window" || k === "arm_selector" ? vars[k] : promString(vars[k]),
  );
}
