/**
 * The stop condition's decision at one evaluation (docs/gate.md "The stop condition"): pure,
 * from the stop condition in force and what the metrics source returned since the latest
 * observed exposure. A metric breaches when the candidate is certainly worse than the control
 * by more than its margin, or certainly beyond its SLO (the same confidence sequences as the
 * gate, `metric.ts`). Nothing else is decided here: no data is recorded, never a breach and
 * never a pass; the gates themselves do not pass without data.
 */
import type { StopEvaluation } from "../types.ts";
import type { GateObservations } from "./decide.ts";
import { metricEvidence } from "./evidence.ts";
import { evaluateMetric, isMissing, type MetricResult, metricSentence } from "./metric.ts";
import type { StopCondition } from "./stop-condition.ts";

/** Where the evaluation stands: which read, which wave, counted from when. */
export interface StopContext {
  seq: number;
  at: number;
  wave: number;
  since: number;
}

const named = (list: readonly MetricResult[]) =>
  list.map((m) => `${m.name} (${m.missing})`).join("; ");

/** Decides one evaluation of `stop` on `obs`. Never throws for bad observations. */
export function decideStop(
  stop: StopCondition,
  ctx: StopContext,
  obs: GateObservations,
): StopEvaluation {
  const base = { seq: ctx.seq, at: ctx.at, wave: ctx.wave, since: ctx.since };
  const a = obs.assignments;
  const arms = isMissing(a) ? null : { candidate: a.candidate, control: a.control };
  const results = stop.metrics.map((m) =>
    evaluateMetric(m, obs.metrics[m.name], stop, {
      required: false,
      dryRun: false,
      controlOptional: true,
    }),
  );
  const metrics = results.map(metricEvidence);
  const breached = results.filter((m) => m.verdict === "inferior" || m.verdict === "slo_breached");
  if (breached.length > 0) {
    return {
      ...base,
      breached: true,
      no_data: false,
      reason: `stop condition breached: ${breached.map((m) => metricSentence(m, stop.alpha)).join("; ")}`,
      arms,
      metrics,
    };
  }
  const missing = results.filter((m) => m.missing);
  return {
    ...base,
    breached: false,
    no_data: missing.length > 0,
    reason:
      missing.length > 0
        ? `no breach seen; no data for ${named(missing)}`
        : `no breach: ${results.map((m) => metricSentence(m, stop.alpha)).join("; ")}`,
    arms,
    metrics,
  };
}
