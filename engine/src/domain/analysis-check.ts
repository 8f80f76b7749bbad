/**
 * Contract-check rules of the `analysis:` section (docs/gate.md) across fields: which waves a
 * gate can apply to, timing that could never pass, duplicate metric names, unknown template
 * variables. Reads only the parts of the raw input that are well typed (the schema reports
 * the rest); every problem has a path and a fix.
 */

import { allowlistFix, TOOL_ALLOWLIST } from "./allowlist.ts";
import type { Problem } from "./errors.ts";
import { DEFAULT_BAKE_MS, DEFAULT_INTERVAL_MS, DEFAULT_MAX_WAIT_MS } from "./gate/analysis.ts";
import { asArray as arr, asObject as obj } from "./json.ts";
import { promqlProblem } from "./promql-check.ts";
import { declaredPercents } from "./strategy.ts";

/**
 * Variables a PromQL template may use, filled per arm at query time (their values:
 * engine/src/adapters/prometheus/templates.ts and docs/gate.md).
 */
export const QUERY_VARIABLES = [
  "model",
  "release",
  "arm",
  "arm_selector",
  "image",
  "candidate_image",
  "lane",
  "baseline_lanes",
  "window",
] as const;
/** The variables whose value differs between the arms; a template must use one. */
const ARM_VARIABLES = ["arm_selector", "arm", "image"] as const;

/** Likely meanings of unknown variables people write, pointing at the right one. */
const VARIABLE_HINTS: Record<string, string> = {
  candidate: "`$candidate_image` is the candidate's image.",
  baseline:
    "`$baseline_lanes` is the lanes serving at release start; `$arm_selector` selects the control.",
  baseline_image:
    "The control is not one image: select it with `$arm_selector` (the baseline lanes, any image but `$candidate_image`).",
  control_image:
    "The control is not one image: select it with `$arm_selector` (the baseline lanes, any image but `$candidate_image`).",
  previous_image: "`$image` is the recipe's previous_image when the control arm is read.",
  lanes: "`$lane` is the recipe's lanes, `$baseline_lanes` the lanes serving at release start.",
  selector: "`$arm_selector` selects the arm being read.",
};

/** One of QUERY_VARIABLES. */
export type QueryVariable = (typeof QUERY_VARIABLES)[number];

const num = (v: unknown, d: number): number =>
  typeof v === "number" && Number.isFinite(v) ? v : d;

/** The checks of one section: unique names, allowlisted tools. */
function checkProblems(section: Record<string, unknown>, at: string): Problem[] {
  const problems: Problem[] = [];
  const seen = new Map<string, number>();
  arr(section.checks).forEach((c, i) => {
    const check = obj(c);
    const name = check?.name;
    if (typeof name === "string") {
      const j = seen.get(name);
      if (j !== undefined) {
        problems.push({
          path: `${at}.checks.${i}.name`,
          message: `duplicate check name \`${name}\` (also ${at}.checks.${j})`,
          fix: "Give every check of a gate its own name; its step's operation key is built from it.",
        });
      } else seen.set(name, i);
    }
    const tool = check?.tool;
    if (typeof tool === "string" && !TOOL_ALLOWLIST.includes(tool)) {
      problems.push({
        path: `${at}.checks.${i}.tool`,
        message: `check tool \`${tool}\` is not in the allowlist`,
        fix: allowlistFix(tool),
      });
    }
  });
  return problems;
}

/**
 * The metrics of a gate must include a required one: guardrails only watch for breaches, so a
 * gate of guardrails alone would have nothing to show before it passes. `metrics` is the list
 * in force (a wave's own, else the recipe's); `at` the path that holds it.
 */
function requiredProblems(metrics: unknown, at: string, wave?: number): Problem[] {
  const list = arr(metrics).map((m) => obj(m));
  if (list.length === 0) return [];
  const required = list.some((m) => m?.required !== false && m?.dry_run !== true);
  if (required) return [];
  return [
    {
      path: at,
      message: `${wave === undefined ? "the analysis" : `wave ${wave + 1}'s gate`} has no required metric: every metric is a guardrail (required: false) or a dry run, and a gate of guardrails alone would pass with nothing shown`,
      fix: "Mark at least one metric `required: true` (the default), e.g. the error rate with a margin; guardrails then watch beside it.",
    },
  ];
}

function sectionProblems(section: Record<string, unknown>, at: string): Problem[] {
  const problems: Problem[] = [...checkProblems(section, at)];
  const seen = new Map<string, number>();
  arr(section.metrics).forEach((m, i) => {
    const metric = obj(m);
    const name = metric?.name;
    if (typeof name === "string") {
      const j = seen.get(name);
      if (j !== undefined) {
        problems.push({
          path: `${at}.metrics.${i}.name`,
          message: `duplicate metric name \`${name}\` (also ${at}.metrics.${j})`,
          fix: "Give every metric of a gate its own name; evidence is stored per name.",
        });
      } else seen.set(name, i);
    }
    // `query` reads real traffic, `shadow_query` a shadow phase's mirrored requests: one rule.
    for (const key of ["query", "shadow_query"] as const)
      problems.push(...templateProblems(metric, key, `${at}.metrics.${i}`, i));
  });
  return problems;
}

/** The problems of one metric's templates under `key` (`query` or `shadow_query`). */
function templateProblems(
  metric: Record<string, unknown> | null | undefined,
  key: "query" | "shadow_query",
  at: string,
  i: number,
): Problem[] {
  const problems: Problem[] = [];
  const name = metric?.name;
  const templates = obj(metric?.[key]);
  const buckets = templates?.buckets;
  if (metric?.kind === "quantile" && typeof buckets === "string" && !/\ble\b/.test(buckets)) {
    problems.push({
      path: `${at}.${key}.buckets`,
      message: `quantile metric \`${typeof name === "string" ? name : `#${i + 1}`}\`: ${key}.buckets does not keep the \`le\` label, so the histogram's buckets cannot be told apart`,
      fix: `Sum by the bucket bound, e.g. \`sum by (le) (increase(${key === "query" ? "http_latency_ms_bucket" : "baton_shadow_latency_ms_bucket"}{model="$model",$arm_selector}[$window]))\`.`,
    });
  }
  for (const [field, text] of Object.entries(templates ?? {})) {
    if (typeof text !== "string") continue;
    const used = [...text.matchAll(/\$([A-Za-z_]\w*)/g)].map((m) => m[1] as string);
    for (const v of used) {
      if (!(QUERY_VARIABLES as readonly string[]).includes(v)) {
        const hint = VARIABLE_HINTS[v];
        problems.push({
          path: `${at}.${key}.${field}`,
          message: `${key} uses unknown variable \`$${v}\``,
          fix: `${hint ? `${hint} ` : ""}Use only ${QUERY_VARIABLES.map((q) => `$${q}`).join(", ")} (docs/gate.md); write other values literally.`,
        });
      }
    }
    // Parsed with Prometheus's grammar once filled (only when every variable is known).
    if (used.every((v) => (QUERY_VARIABLES as readonly string[]).includes(v))) {
      const bad = promqlProblem(text);
      if (bad) {
        problems.push({
          path: `${at}.${key}.${field}`,
          message: `metric \`${typeof name === "string" ? name : `#${i + 1}`}\`, ${field}: ${bad.message}`,
          fix: bad.fix,
        });
      }
    }
    if (!used.some((v) => (ARM_VARIABLES as readonly string[]).includes(v))) {
      problems.push({
        path: `${at}.${key}.${field}`,
        message: `${key} reads the same series for the candidate and the control: it uses none of $arm_selector, $arm, $image`,
        fix:
          key === "query"
            ? "Select the arm inside the braces, e.g. `{model=\"$model\",$arm_selector}` (the control is what the observed baseline's lanes serve with any image but the candidate's)."
            : 'Select the arm inside the braces, e.g. `{model="$model",$arm_selector}` (in a shadow phase `arm="candidate"` for the copies\' answers, `arm="control"` for the same requests\' answers on the baseline).',
      });
    }
  }
  return problems;
}

/** Every problem of the recipe's and the waves' `analysis`. Never throws. */
export function analysisProblems(input: unknown): Problem[] {
  const root = obj(input);
  if (!root) return [];
  const problems: Problem[] = [];
  const top = root.analysis === undefined ? undefined : obj(root.analysis);
  if (top) {
    problems.push(...sectionProblems(top, "analysis"));
    problems.push(...requiredProblems(top.metrics, "analysis.metrics"));
  }
  const stop = obj(root.stop_condition);
  if (stop) problems.push(...stopProblems(stop));
  const waves = arr(obj(root.rollout)?.waves).map((w) => obj(w));
  let gated = 0;
  // Under rolling and blue_green the percents are derived from the strategy (strategy.ts).
  const percents = declaredPercents(input);
  waves.forEach((wave, w) => {
    // A shadow phase is gated on mirrored requests although its traffic is 0
    // (docs/gate.md "Shadow phases"): read like a canary wave's gate.
    const traffic = wave?.shadow !== undefined && wave?.traffic === 0 ? 50 : percents[w];
    if (typeof traffic !== "number") return;
    const raw = wave?.analysis;
    if (raw === false) return;
    const own = obj(raw);
    const at = `rollout.waves.${w}.analysis`;
    if (own) {
      problems.push(...sectionProblems(own, at));
      if (traffic === 100 || traffic === 0) {
        problems.push({
          path: at,
          message:
            traffic === 100
              ? `wave ${w + 1} sets traffic to 100%, so no control serves beside the candidate and a gate has nothing to compare`
              : `wave ${w + 1} sets traffic to 0%, so the candidate serves nothing and a gate could never pass`,
          fix: "Gate a wave with traffic between 1 and 99, or remove `analysis` from this wave.",
        });
        return;
      }
      if (own.metrics === undefined && !top) {
        problems.push({
          path: `${at}.metrics`,
          message: `wave ${w + 1}'s analysis names no metrics and the recipe has no \`analysis\` section`,
          fix: "List `metrics` in this wave's analysis, or declare them in the recipe's `analysis`.",
        });
      }
    } else if (!top || traffic === 0 || traffic === 100) return;
    gated++;
    if (own?.metrics !== undefined)
      problems.push(...requiredProblems(own.metrics, `${at}.metrics`, w));
    const eff = { ...(top ?? {}), ...(own ?? {}) };
    const mine = (field: string) => own !== undefined && field in own;
    const where = (field: string) => (mine(field) ? `${at}.${field}` : `analysis.${field}`);
    const who = (field: string) => (mine(field) ? `wave ${w + 1}: ` : "");
    const bake = num(eff.bake_ms, DEFAULT_BAKE_MS);
    const maxWait = num(eff.max_wait_ms, DEFAULT_MAX_WAIT_MS);
    const interval = num(eff.interval_ms, DEFAULT_INTERVAL_MS);
    if (bake > maxWait) {
      problems.push({
        path: where("bake_ms"),
        message: `${who("bake_ms")}bake_ms ${bake} is longer than max_wait_ms ${maxWait}, so the gate would be inconclusive before it could pass`,
        fix: "Make max_wait_ms at least bake_ms (a few evaluation intervals more is better).",
      });
    }
    if (interval > maxWait) {
      problems.push({
        path: where("interval_ms"),
        message: `${who("interval_ms")}interval_ms ${interval} is longer than max_wait_ms ${maxWait}, so the gate is never evaluated before it times out`,
        fix: "Make interval_ms shorter than max_wait_ms.",
      });
    }
  });
  if (top && gated === 0 && waves.length > 0) {
    problems.push({
      path: "analysis",
      message: "the analysis gates no wave: every wave sets traffic to 0% or 100% (or opts out)",
      fix: "Add a canary wave with traffic between 1 and 99 (e.g. 10) before the 100% wave.",
    });
  }
  // A problem reported once per wave for the recipe's own field is one problem.
  return problems.filter(
    (p, i) => problems.findIndex((q) => q.path === p.path && q.message === p.message) === i,
  );
}

/** The stop condition: each metric has a margin or an SLO; names unique; templates as a gate's. */
function stopProblems(stop: Record<string, unknown>): Problem[] {
  const at = "stop_condition";
  const problems = sectionProblems({ metrics: stop.metrics }, at);
  arr(stop.metrics).forEach((m, i) => {
    const metric = obj(m);
    if (
      metric &&
      metric.margin === undefined &&
      metric.slo === undefined &&
      metric.slo_ms === undefined
    ) {
      problems.push({
        path: `${at}.metrics.${i}`,
        message: `stop-condition metric \`${typeof metric.name === "string" ? metric.name : `#${i + 1}`}\` has neither a margin nor an slo, so nothing could breach it`,
        fix: "Give it `margin` (a breach: certainly worse than the control by more than δ), `slo` (a breach: certainly beyond the limit; `slo_ms` for a quantile metric), or both.",
      });
    }
  });
  return problems;
}
