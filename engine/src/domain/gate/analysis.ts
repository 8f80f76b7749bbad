/**
 * The recipe's `analysis:` section: the gate a wave must pass before exposure widens
 * (docs/gate.md). Predeclared before the release and part of the manifest digest.
 * The schema is the type; cross-field rules (a wave's override, traffic 0 or 100 on a gated
 * wave) live in `contract-check.ts`.
 */
import * as z from "zod";
import { lazySchema } from "../../protocol/lazy-schema.ts";

/** What is sticky to one arm for the whole wave. */
export const AssignmentUnit = {
  request: "request",
  session: "session",
  user: "user",
  tenant: "tenant",
} as const;
export type AssignmentUnit = (typeof AssignmentUnit)[keyof typeof AssignmentUnit];

/** Default level of every test in the gate (SRM and the confidence sequences). */
export const DEFAULT_ALPHA = 0.05;
/** Defaults of the timing fields, ms. */
export const DEFAULT_BAKE_MS = 60_000;
export const DEFAULT_INTERVAL_MS = 10_000;
export const DEFAULT_MAX_WAIT_MS = 30 * 60_000;
export const DEFAULT_MIN_SAMPLES = 1000;
/**
 * Default `consecutive_error_limit`: evaluations in a row whose data could not be read (a query
 * failed, timed out, or Prometheus was unreachable) before the gate ends inconclusive. Argo
 * Rollouts' `consecutiveErrorLimit` defaults to 4 as well.
 */
export const DEFAULT_CONSECUTIVE_ERROR_LIMIT = 4;

const METRIC_NAME = /^[a-z][a-z0-9_-]{0,62}$/;
/** A PromQL template; its `$variables` are listed in `analysis-check.ts` (QUERY_VARIABLES). */
const PromQl = lazySchema(() =>
  z
    .string()
    .min(1, "a query must not be empty")
    .max(4096, "a query must be at most 4096 characters"),
);

/** The non-inferiority margin δ: absolute (in the metric's unit) or relative to the control. */
export const Margin = lazySchema(() =>
  z.union(
    [
      z
        .object({
          absolute: z
            .number()
            .min(0, "margin.absolute must be ≥ 0")
            .max(1, "margin.absolute must be ≤ 1 (metrics are shares)")
            .describe("δ in the metric's unit, e.g. 0.005 = half a percentage point."),
        })
        .strict(),
      z
        .object({
          relative: z
            .number()
            .min(0, "margin.relative must be ≥ 0")
            .max(10, "margin.relative must be ≤ 10")
            .describe("δ as a fraction of the control's value, e.g. 0.1 = 10% worse at most."),
          floor: z
            .number()
            .min(0, "margin.floor must be ≥ 0")
            .max(1, "margin.floor must be ≤ 1 (metrics are shares)")
            .optional()
            .describe(
              "Smallest δ, in the metric's unit, whatever the control's value (default 1/min_samples: one event in the sample a pass needs). A control with no errors would otherwise give δ = 0, which nothing can pass.",
            ),
        })
        .strict(),
    ],
    {
      error:
        "margin must be one of {absolute: δ} (e.g. {absolute: 0.005}) or {relative: fraction of the control} (e.g. {relative: 0.1})",
    },
  ),
);
export type Margin = z.infer<typeof Margin>;

const Common = lazySchema(() =>
  lazySchema(() => ({
    name: z
      .string()
      .regex(METRIC_NAME, "metric name must be lowercase letters, digits, '_' or '-' (≤ 63)")
      .describe("Metric name, unique in the section, e.g. error-rate."),
    margin: Margin.describe("Non-inferiority margin δ: pass needs lower bound ≥ −δ."),
    slo: z
      .number()
      .min(0, "slo must be a share in 0..1")
      .max(1, "slo must be a share in 0..1")
      .optional()
      .describe("Absolute limit on the candidate's value, whatever the control does."),
    required: z
      .boolean()
      .default(true)
      .describe(
        "true: primary, must be shown non-inferior to promote; false: guardrail, only its breach counts, and it is watched through every later wave. Either way, a metric without data never passes.",
      ),
    dry_run: z
      .boolean()
      .optional()
      .describe(
        "true: evaluated and recorded in the evidence, but never decides (neither blocks nor fails the gate). A way to try a new metric on real releases.",
      ),
  })),
);

/** A latency metric's template read in a shadow phase instead of its `query`. */
const ShadowBuckets = lazySchema(() =>
  z
    .object({
      buckets: PromQl.describe(
        "PromQL giving the cumulative bucket counts (with an `le` label, in ms) of one arm on mirrored requests.",
      ),
    })
    .strict()
    .optional()
    .describe(
      "Prometheus template read in a shadow phase instead of `query`; default: the reference router's shadow latency histogram.",
    ),
);

/** A ratio of counts, such as errors / requests. */
export const RatioMetric = lazySchema(() =>
  z
    .object({
      ...Common,
      kind: z.literal("ratio"),
      better: z
        .enum(["lower", "higher"])
        .describe("Which direction is better: lower for error rates, higher for success rates."),
      query: z
        .object({
          numerator: PromQl.describe("PromQL giving the numerator count of one arm."),
          denominator: PromQl.describe("PromQL giving the denominator count of one arm."),
        })
        .strict()
        .optional()
        .describe("Prometheus templates; default: the reference router's request counters."),
      shadow_query: z
        .object({
          numerator: PromQl.describe(
            "PromQL giving the numerator count of one arm on mirrored requests.",
          ),
          denominator: PromQl.describe(
            "PromQL giving the denominator count of one arm on mirrored requests.",
          ),
        })
        .strict()
        .optional()
        .describe(
          "Prometheus templates read in a shadow phase instead of `query`; default: the reference router's shadow counters.",
        ),
    })
    .strict(),
);

/** A latency distribution from histogram buckets: the share of requests slower than a bound. */
export const LatencyMetric = lazySchema(() =>
  z
    .object({
      ...Common,
      kind: z.literal("latency"),
      threshold_ms: z
        .number()
        .positive("threshold_ms must be > 0")
        .describe("A bucket bound (le) in ms; the metric is the share of requests slower than it."),
      query: z
        .object({
          buckets: PromQl.describe(
            "PromQL giving the cumulative bucket counts (with an `le` label) of one arm.",
          ),
        })
        .strict()
        .optional()
        .describe("Prometheus template; default: the reference router's latency histogram."),
      shadow_query: ShadowBuckets,
    })
    .strict(),
);

/** How much slower the candidate's quantile may be than the control's: ms, or percent. */
export const QuantileMargin = lazySchema(() =>
  z.union(
    [
      z
        .object({
          ms: z
            .number()
            .min(0, "margin.ms must be ≥ 0")
            .max(3_600_000, "margin.ms must be ≤ 3600000 (an hour)")
            .describe(
              "δ in ms: the candidate's quantile may be at most this much above the control's.",
            ),
        })
        .strict(),
      z
        .object({
          percent: z
            .number()
            .min(0, "margin.percent must be ≥ 0")
            .max(1000, "margin.percent must be ≤ 1000")
            .describe("δ in percent of the control's quantile, e.g. 20 = at most 20% slower."),
        })
        .strict(),
    ],
    {
      error:
        "a quantile metric's margin must be one of {ms: δ} (e.g. {ms: 100}) or {percent: r} (e.g. {percent: 20})",
    },
  ),
);
export type QuantileMargin = z.infer<typeof QuantileMargin>;

/**
 * A latency quantile (e.g. p99) from histogram buckets, candidate against control, with
 * anytime-valid bounds at the buckets' resolution (quantile.ts).
 */
export const QuantileMetric = lazySchema(() =>
  z
    .object({
      name: Common.name,
      kind: z.literal("quantile"),
      quantile: z
        .number({ error: "quantile must be a number in (0, 1), e.g. 0.99 for p99" })
        .gt(0, "quantile must be in (0, 1), e.g. 0.99 for p99")
        .lt(1, "quantile must be in (0, 1), e.g. 0.99 for p99")
        .describe("The level compared, e.g. 0.99 for p99, 0.5 for the median."),
      margin: QuantileMargin.describe(
        "How much slower the candidate's quantile may be: fail when it is certainly slower by more, pass when certainly slower by less.",
      ),
      slo_ms: z
        .number()
        .positive("slo_ms must be > 0 (ms)")
        .optional()
        .describe("Absolute limit on the candidate's quantile, ms, whatever the control does."),
      required: Common.required,
      dry_run: Common.dry_run,
      query: z
        .object({
          buckets: PromQl.describe(
            "PromQL giving the cumulative bucket counts (with an `le` label, in ms) of one arm.",
          ),
        })
        .strict()
        .optional()
        .describe("Prometheus template; default: the reference router's latency histogram."),
      shadow_query: ShadowBuckets,
    })
    .strict(),
);
export type QuantileMetric = z.infer<typeof QuantileMetric>;

/** One metric of the gate. */
export const GateMetric = lazySchema(() =>
  z.discriminatedUnion("kind", [RatioMetric, LatencyMetric, QuantileMetric]),
);
export type GateMetric = z.infer<typeof GateMetric>;

const CHECK_NAME = /^[a-z][a-z0-9_-]{0,62}$/;

/**
 * A deterministic check of a gate: an allowlisted runner tool run against each lane of the
 * gated wave once its exposure is observed, through the step protocol (dispatch, preflight,
 * callback, result files). Compiled into the step table as `assert_check_passed` steps; one
 * failure blocks the wave's promotion whatever the statistics say.
 */
export const GateCheck = lazySchema(() =>
  z
    .object({
      name: z
        .string()
        .regex(CHECK_NAME, "check name must be lowercase letters, digits, '_' or '-' (≤ 63)")
        .describe("Check name, unique in the gate, e.g. task-set."),
      tool: z
        .string()
        .regex(/^[a-z][a-z0-9-]{0,63}$/, "tool must be a tool name such as run-smoke")
        .describe(
          "Allowlisted runner tool (scripts/release/allowlist.json) run against each candidate lane of the wave.",
        ),
      args: z
        .record(z.string().max(64), z.union([z.string().max(1024), z.number(), z.boolean()]))
        .optional()
        .describe(
          "Extra arguments for the tool (strings, numbers, booleans), passed as `check.args` beside the lane.",
        ),
    })
    .strict(),
);
export type GateCheck = z.infer<typeof GateCheck>;

const fields = lazySchema(() => ({
  assignment_unit: z
    .enum(["request", "session", "user", "tenant"])
    .describe("Unit sticky to one arm for the whole wave."),
  alpha: z
    .number()
    .gt(0, "alpha must be in (0, 0.5]")
    .max(0.5, "alpha must be in (0, 0.5]")
    .describe("Error level of every test (default 0.05)."),
  min_samples: z
    .number()
    .int("min_samples must be a whole number")
    .min(1, "min_samples must be ≥ 1")
    .max(1e9, "min_samples must be ≤ 1e9")
    .describe("Minimum denominator count per arm of every primary metric before a pass."),
  bake_ms: z
    .number()
    .int("bake_ms must be a whole number of ms")
    .min(0, "bake_ms must be ≥ 0")
    .max(7 * 86_400_000, "bake_ms must be ≤ 7 days")
    .describe("Minimum time a wave is observed before it may pass."),
  interval_ms: z
    .number()
    .int("interval_ms must be a whole number of ms")
    .min(1000, "interval_ms must be ≥ 1000")
    .max(3_600_000, "interval_ms must be ≤ 1 h")
    .describe("Time between evaluations."),
  max_wait_ms: z
    .number()
    .int("max_wait_ms must be a whole number of ms")
    .min(1000, "max_wait_ms must be ≥ 1000")
    .max(7 * 86_400_000, "max_wait_ms must be ≤ 7 days")
    .describe("After this long without a decision the gate is inconclusive (operator decides)."),
  metrics: z
    .array(GateMetric)
    .min(1, "analysis needs at least one metric")
    .max(32, "analysis has at most 32 metrics"),
  consecutive_error_limit: z
    .number()
    .int("consecutive_error_limit must be a whole number of evaluations")
    .min(1, "consecutive_error_limit must be ≥ 1")
    .max(1000, "consecutive_error_limit must be ≤ 1000")
    .describe(
      `Evaluations in a row whose data could not be read (a query failed, timed out, or the source was unreachable) before the gate ends inconclusive (default ${DEFAULT_CONSECUTIVE_ERROR_LIMIT}).`,
    ),
  inconclusive_limit: z
    .number()
    .int("inconclusive_limit must be a whole number of evaluations")
    .min(1, "inconclusive_limit must be ≥ 1")
    .max(1000, "inconclusive_limit must be ≤ 1000")
    .describe(
      "Evaluations in a row that had all their data, min_samples and the bake, and still could not show every primary metric within its margin, before the gate ends inconclusive (default: none; max_wait_ms decides).",
    ),
  checks: z
    .array(GateCheck)
    .min(1, "checks lists at least one check (or leave it out)")
    .max(8, "a gate has at most 8 checks"),
}));

/** The recipe-level section; every wave with 0 < traffic < 100 is gated by it. */
export const Analysis = lazySchema(() =>
  z
    .object({
      assignment_unit: fields.assignment_unit.default(AssignmentUnit.request),
      alpha: fields.alpha.default(DEFAULT_ALPHA),
      min_samples: fields.min_samples.default(DEFAULT_MIN_SAMPLES),
      bake_ms: fields.bake_ms.default(DEFAULT_BAKE_MS),
      interval_ms: fields.interval_ms.default(DEFAULT_INTERVAL_MS),
      max_wait_ms: fields.max_wait_ms.default(DEFAULT_MAX_WAIT_MS),
      metrics: fields.metrics,
      consecutive_error_limit: fields.consecutive_error_limit.optional(),
      inconclusive_limit: fields.inconclusive_limit.optional(),
      checks: fields.checks.optional(),
    })
    .strict()
    .describe("Evidence gate: a canary against a concurrent control (docs/gate.md)."),
);
export type Analysis = z.infer<typeof Analysis>;

/**
 * A wave's override: fields given replace the recipe's (metrics as a whole list);
 * `false` leaves the wave ungated (guardrails are still watched).
 */
export const WaveAnalysis = lazySchema(() =>
  z.union([
    z.literal(false),
    z
      .object({
        assignment_unit: fields.assignment_unit.optional(),
        alpha: fields.alpha.optional(),
        min_samples: fields.min_samples.optional(),
        bake_ms: fields.bake_ms.optional(),
        interval_ms: fields.interval_ms.optional(),
        max_wait_ms: fields.max_wait_ms.optional(),
        metrics: fields.metrics.optional(),
        consecutive_error_limit: fields.consecutive_error_limit.optional(),
        inconclusive_limit: fields.inconclusive_limit.optional(),
        checks: fields.checks.optional(),
      })
      .strict(),
  ]),
);
export type WaveAnalysis = z.infer<typeof WaveAnalysis>;

/**
 * The analysis in force for one wave, or null when the wave is not gated: a wave is gated by
 * its own override, or by the recipe's section when 0 < traffic < 100 (a gate needs both a
 * candidate and a concurrent control; the contract check refuses an override without them).
 */
export function analysisForWave(
  recipe: Analysis | undefined,
  wave: WaveAnalysis | undefined,
  traffic: number,
): Analysis | null {
  if (wave === false) return null;
  if (wave === undefined) return traffic > 0 && traffic < 100 ? (recipe ?? null) : null;
  const base = recipe;
  const metrics = wave.metrics ?? base?.metrics;
  if (!metrics) return null;
  return Analysis.parse({ ...(base ?? {}), ...wave, metrics });
}
