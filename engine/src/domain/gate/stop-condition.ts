/**
 * The stop condition (docs/gate.md "The stop condition"): guardrails and absolute SLO bounds
 * that hold for the whole release, evaluated every `interval_ms` in every state where the
 * candidate serves traffic (held at a gate, baking, paused, held for a manual promotion, in a
 * re-run window, between waves, through a bake after the last wave). A breach compensates, or
 * holds the release when `on_breach` is `hold`.
 *
 * A recipe declares it in `stop_condition`; without one, the guardrails of its analysis (every
 * metric with `required: false`, not `dry_run`) and the SLO bounds of its primary metrics serve,
 * resolved from the manifest by {@link stopConditionOf} (so manifests of recipes that declare
 * none keep their digest).
 */
import * as z from "zod";
import { lazySchema } from "../../protocol/lazy-schema.ts";
import {
  type Analysis,
  DEFAULT_ALPHA,
  DEFAULT_INTERVAL_MS,
  DEFAULT_MIN_SAMPLES,
  LatencyMetric,
  Margin,
  QuantileMargin,
  QuantileMetric,
  RatioMetric,
} from "./analysis.ts";

const stopFields = lazySchema(() => ({
  margin: Margin.optional().describe(
    "Breach when the candidate is certainly worse than the control by more than δ (absent: no comparison with the control, only the SLO).",
  ),
}));

/** A metric of the stop condition: a margin against the control, an SLO, or both. */
export const StopMetric = lazySchema(() =>
  z.discriminatedUnion("kind", [
    RatioMetric.omit({ required: true, dry_run: true }).extend(stopFields),
    LatencyMetric.omit({ required: true, dry_run: true }).extend(stopFields),
    QuantileMetric.omit({ required: true, dry_run: true }).extend({
      margin: QuantileMargin.optional().describe(
        "Breach when the candidate's quantile is certainly slower than the control's by more than δ (absent: only slo_ms).",
      ),
    }),
  ]),
);
export type StopMetric = z.infer<typeof StopMetric>;

/** What a breach of the stop condition does. */
export const OnBreach = {
  compensate: "compensate",
  hold: "hold",
} as const;
export type OnBreach = (typeof OnBreach)[keyof typeof OnBreach];

/** The recipe's `stop_condition` section. */
export const StopConditionInput = lazySchema(() =>
  z
    .object({
      metrics: z
        .array(StopMetric)
        .min(1, "stop_condition.metrics lists at least one metric (or leave it out)")
        .max(32, "stop_condition has at most 32 metrics")
        .optional()
        .describe(
          "Metrics watched for the whole release; absent: the analysis's guardrails and the SLO bounds of its primary metrics.",
        ),
      on_breach: z
        .enum(["compensate", "hold"], {
          error: "on_breach must be compensate (undo the release) or hold (pause for an operator)",
        })
        .optional()
        .describe(
          "compensate (default): undo the release; hold: pause it for an operator (resume or abort).",
        ),
      interval_ms: z
        .number()
        .int("interval_ms must be a whole number of ms")
        .min(1000, "interval_ms must be ≥ 1000")
        .max(3_600_000, "interval_ms must be ≤ 1 h")
        .optional()
        .describe("Time between evaluations (default: the analysis's interval_ms, else 10000)."),
      bake_ms: z
        .number()
        .int("bake_ms must be a whole number of ms")
        .min(0, "bake_ms must be ≥ 0")
        .max(7 * 86_400_000, "bake_ms must be ≤ 7 days")
        .optional()
        .describe(
          "After the last wave, the release stays running this long, watched, before it succeeds (default 0).",
        ),
    })
    .strict()
    .describe(
      "Stop condition for the whole release: evaluated in every state where the candidate serves traffic; a breach compensates (docs/gate.md).",
    ),
);
export type StopConditionInput = z.infer<typeof StopConditionInput>;

/** The stop condition in force for a release, resolved. */
export interface StopCondition {
  metrics: StopMetric[];
  on_breach: OnBreach;
  interval_ms: number;
  /** ms the release stays running, watched, after its last step before it succeeds. */
  bake_ms: number;
  alpha: number;
  /** Tunes the confidence sequences (as the analysis's min_samples does); not a threshold. */
  min_samples: number;
  /** Where it came from: the recipe's `stop_condition`, or derived from the analysis. */
  declared: boolean;
}

/** What {@link stopConditionOf} reads of a manifest. */
export interface StopConditionSource {
  waves: readonly { analysis?: Analysis }[];
  stop_condition?: StopConditionInput;
}

/** The analysis the derived stop condition takes its timing and α from: the first gated wave's. */
function firstAnalysis(m: StopConditionSource): Analysis | undefined {
  return m.waves.find((w) => w.analysis)?.analysis;
}

/**
 * The stop condition of a manifest, or null when it has none (no `stop_condition` and no
 * guardrail or SLO in any wave's analysis). Derived: every guardrail (not `dry_run`) of the
 * waves' analyses with its margin and SLO, and every primary metric's SLO bound alone; the
 * first wave to name a metric gives it.
 */
export function stopConditionOf(m: StopConditionSource): StopCondition | null {
  const a = firstAnalysis(m);
  const declared = m.stop_condition;
  const base = {
    interval_ms: declared?.interval_ms ?? a?.interval_ms ?? DEFAULT_INTERVAL_MS,
    bake_ms: declared?.bake_ms ?? 0,
    alpha: a?.alpha ?? DEFAULT_ALPHA,
    min_samples: a?.min_samples ?? DEFAULT_MIN_SAMPLES,
    on_breach: declared?.on_breach ?? OnBreach.compensate,
  };
  if (declared?.metrics) return { ...base, metrics: declared.metrics, declared: true };
  const seen = new Set<string>();
  const metrics: StopMetric[] = [];
  for (const w of m.waves) {
    for (const metric of w.analysis?.metrics ?? []) {
      if (seen.has(metric.name) || metric.dry_run) continue;
      const { required, dry_run: _d, ...rest } = metric;
      if (!required) {
        seen.add(metric.name);
        metrics.push(rest);
      } else if ((metric.kind === "quantile" ? metric.slo_ms : metric.slo) !== undefined) {
        seen.add(metric.name);
        const { margin: _m, ...sloOnly } = rest;
        metrics.push(sloOnly);
      }
    }
  }
  if (metrics.length === 0) return null;
  return { ...base, metrics, declared: declared !== undefined };
}
