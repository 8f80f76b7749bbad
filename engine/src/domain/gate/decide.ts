/**
 * The gate's decision at one evaluation: pure, from the analysis in force, the planned split,
 * the time the wave has been observed and what the metrics source returned (docs/gate.md).
 *
 * Order, as the release question is asked (docs/state-machine.md rule 11):
 * 1. Evidence complete? No unit counts → nothing can be read (wait). No candidate units while
 *    the control has some is insufficient data, never a verdict against the candidate (wait).
 * 2. Sample ratio mismatch (`srm.ts`) before any outcome is read: a mismatch fails closed.
 * 3. Each metric's confidence sequence (`metric.ts`) on Δ = candidate − control, oriented so
 *    that higher is better. Fail at once when a metric is certainly worse than its margin
 *    (upper < −δ) or certainly breaches its SLO (any metric, primary or guardrail).
 * 4. A metric without data never passes, primary or guardrail: the gate waits.
 * 5. Pass when every primary metric has lower ≥ −δ (and meets its SLO with confidence), every
 *    arm has `min_samples` and `bake_ms` has elapsed.
 * 6. Otherwise wait; at `max_wait_ms` the gate is `inconclusive` and an operator decides, and
 *    so it is earlier after `consecutive_error_limit` evaluations in a row whose reads failed,
 *    or `inconclusive_limit` in a row that had everything and still could not decide.
 * In the `watch` phase (waves after the gated one) only guardrails are read, for breaches.
 * `dry_run` metrics are evaluated and recorded but never decide.
 *
 * Passing needs every primary metric (an intersection-union test: no multiplicity correction
 * is needed for the pass). Failing on any one of k metrics is at most k·α false fails: the
 * error falls on the safe side.
 */
import { type Analysis, DEFAULT_CONSECUTIVE_ERROR_LIMIT } from "./analysis.ts";
import {
  evaluateMetric,
  isMissing,
  type MetricObservation,
  type MetricResult,
  type Missing,
  metricSentence,
} from "./metric.ts";
import { type SrmResult, srmTest } from "./srm.ts";
import { count, percent } from "./words.ts";

export type { MetricResult, Missing } from "./metric.ts";

/** The outcome of one evaluation. */
export const GateDecision = {
  pass: "pass",
  fail: "fail",
  wait: "wait",
  inconclusive: "inconclusive",
} as const;
export type GateDecision = (typeof GateDecision)[keyof typeof GateDecision];

/** `gate`: the wave being promoted; `watch`: a later wave, guardrails only. */
export type GatePhase = "gate" | "watch";

/** What the metrics source returned for one evaluation. */
export interface GateObservations {
  /** Units assigned per arm since the wave began. */
  assignments: { candidate: number; control: number } | Missing;
  /** Per metric name: each arm's observation. */
  metrics: Record<string, MetricObservation>;
}

/**
 * Evaluations in a row before this one (same gate) that could not read their data, and that
 * had everything and still could not decide: what the two limits count.
 */
export interface GateStreak {
  errors: number;
  undecided: number;
}

/** Everything the decision depends on besides the observations. */
export interface GateContext {
  analysis: Analysis;
  /** Planned share of the gated traffic on the candidate arm, in (0, 1). */
  plannedCandidateShare: number;
  /** ms since the wave's exposure was observed at the router. */
  elapsedMs: number;
  phase: GatePhase;
  /** Absent: none before this one. */
  streak?: GateStreak;
}

/** The decision with everything it was made from (stored as evidence). */
export interface GateEvaluation {
  decision: GateDecision;
  /** For people: the plain comparison that decided first, the statistics after. */
  reason: string;
  phase: GatePhase;
  alpha: number;
  elapsedMs: number;
  arms: { candidate: number; control: number } | null;
  srm: SrmResult | null;
  metrics: MetricResult[];
  /** This evaluation could not read data it needs (a failed read, not data yet to come). */
  readError: boolean;
  /** This evaluation had every datum, min_samples and the bake, and still could not decide. */
  undecided: boolean;
}

const named = (list: readonly MetricResult[]) =>
  list.map((m) => `${m.name} (${m.missing})`).join("; ");

/** What an inconclusive gate's reason ends with: the decision it leaves to a person. */
export const INCONCLUSIVE_ASKS = "an operator must promote or abort";

/**
 * Decides one evaluation. Pure: same input, same output; throws only on a malformed context
 * (planned share outside (0, 1)), never on bad observations (those are missing evidence).
 */
export function decideGate(ctx: GateContext, obs: GateObservations): GateEvaluation {
  const { analysis, plannedCandidateShare: share0, elapsedMs, phase } = ctx;
  if (!(share0 > 0 && share0 < 1)) {
    throw new RangeError("[gate] plannedCandidateShare must be in (0, 1): a gate needs both arms");
  }
  const streak = ctx.streak ?? { errors: 0, undecided: 0 };
  const errorLimit = analysis.consecutive_error_limit ?? DEFAULT_CONSECUTIVE_ERROR_LIMIT;
  const out: GateEvaluation = {
    decision: GateDecision.wait,
    reason: "",
    phase,
    alpha: analysis.alpha,
    elapsedMs,
    arms: null,
    srm: null,
    metrics: [],
    readError: false,
    undecided: false,
  };
  const timedOut = elapsedMs >= analysis.max_wait_ms;
  const operator = INCONCLUSIVE_ASKS;
  const waitOr = (reason: string, o: { readError?: boolean; undecided?: boolean } = {}) => {
    const e = { ...out, readError: o.readError === true, undecided: o.undecided === true };
    if (e.readError && streak.errors + 1 >= errorLimit) {
      return {
        ...e,
        decision: GateDecision.inconclusive,
        reason: `inconclusive: ${streak.errors + 1} evaluations in a row could not read their data (consecutive_error_limit ${errorLimit}): ${reason}; ${operator}`,
      };
    }
    const limit = analysis.inconclusive_limit;
    if (e.undecided && limit !== undefined && streak.undecided + 1 >= limit) {
      return {
        ...e,
        decision: GateDecision.inconclusive,
        reason: `inconclusive: ${streak.undecided + 1} evaluations in a row had all their data and could not decide (inconclusive_limit ${limit}): ${reason}; ${operator}`,
      };
    }
    return timedOut
      ? {
          ...e,
          decision: GateDecision.inconclusive,
          reason: `inconclusive after ${count(Math.round(elapsedMs / 1000))} s (max_wait_ms ${count(analysis.max_wait_ms)}): ${reason}; ${operator}`,
        }
      : { ...e, decision: GateDecision.wait, reason };
  };

  // 1. Evidence: unit counts first — without them no outcome may be read.
  const a = obs.assignments;
  if (isMissing(a)) {
    return waitOr(`insufficient data: the unit counts could not be read: ${a.missing}`, {
      readError: a.error === true,
    });
  }
  if (![a.candidate, a.control].every((v) => Number.isFinite(v) && v >= 0)) {
    return waitOr(
      `insufficient data: the unit counts are not counts (candidate ${a.candidate}, control ${a.control})`,
    );
  }
  out.arms = { candidate: a.candidate, control: a.control };
  if (a.candidate === 0) {
    // No exposure yet (or a router that sends the candidate nothing): a lack of data, which
    // holds the gate; it is no verdict against an unvalidated canary.
    return waitOr(
      a.control > 0
        ? `insufficient data: the candidate received no units (planned ${percent(share0, 1)}), the control ${count(a.control)}`
        : "insufficient data: no units on either arm yet",
    );
  }

  // 2. Sample ratio mismatch.
  const srm = srmTest([a.candidate, a.control], [share0, 1 - share0], analysis.alpha);
  out.srm = srm;
  const total = a.candidate + a.control;
  if (srm.mismatch) {
    return {
      ...out,
      decision: GateDecision.fail,
      reason: `sample ratio mismatch: candidate ${percent(a.candidate / total)} of units vs planned ${percent(share0)} (candidate ${count(a.candidate)}, control ${count(a.control)}): the split served is not the one planned, so the arms do not compare; Bayes factor ${Math.exp(srm.logBayesFactor).toPrecision(3)} ≥ 1/α = ${srm.threshold}`,
    };
  }

  // 3. Metrics: a certain breach of any deciding metric fails at once.
  const read = analysis.metrics.filter((m) => phase === "gate" || !m.required);
  // Sticky units (session, user, tenant): their requests are not independent, so each
  // metric's variance counts units, as the SRM test does.
  const units = analysis.assignment_unit === "request" ? undefined : out.arms;
  out.metrics = read.map((m) =>
    evaluateMetric(m, obs.metrics[m.name], analysis, {
      required: m.required,
      dryRun: m.dry_run === true,
      ...(units ? { units } : {}),
    }),
  );
  const deciding = out.metrics.filter((m) => !m.dryRun);
  const failed = deciding.filter((m) => m.verdict === "inferior" || m.verdict === "slo_breached");
  if (failed.length > 0) {
    const where = phase === "watch" ? "guardrail breached: " : "";
    return {
      ...out,
      decision: GateDecision.fail,
      reason: where + failed.map((m) => metricSentence(m, analysis.alpha)).join("; "),
    };
  }

  // 4. A metric without data never passes, primary or guardrail.
  const missing = deciding.filter((m) => m.missing);
  if (missing.length > 0) {
    return waitOr(`missing evidence: ${named(missing)}`, {
      readError: missing.some((m) => m.readError),
    });
  }
  const noData = out.metrics.filter((m) => m.dryRun && m.missing);
  const dryNote = noData.length > 0 ? `; no data for dry-run ${named(noData)}` : "";
  if (phase === "watch") {
    if (elapsedMs < analysis.bake_ms) {
      return waitOr(
        `watching: no guardrail breached in ${count(Math.round(elapsedMs / 1000))} s of ${count(Math.round(analysis.bake_ms / 1000))} s${dryNote}`,
      );
    }
    return {
      ...out,
      decision: GateDecision.pass,
      reason: `no guardrail breached: ${deciding.map((m) => metricSentence(m, analysis.alpha)).join("; ")}${dryNote}`,
    };
  }

  const primaries = deciding.filter((m) => m.required);
  const few = primaries.filter(
    (m) =>
      (m.candidate?.n ?? 0) < analysis.min_samples || (m.control?.n ?? 0) < analysis.min_samples,
  );
  if (few.length > 0) {
    const m = few[0] as MetricResult;
    return waitOr(
      `too few samples: ${m.name} has ${count(m.candidate?.n ?? 0)} candidate / ${count(m.control?.n ?? 0)} control, min_samples ${count(analysis.min_samples)} per arm`,
    );
  }
  const undecided = primaries.filter((m) => m.verdict !== "non_inferior");
  if (undecided.length > 0) {
    return waitOr(
      `not yet shown within the margin: ${undecided.map((m) => metricSentence(m, analysis.alpha)).join("; ")}`,
      { undecided: elapsedMs >= analysis.bake_ms },
    );
  }
  if (elapsedMs < analysis.bake_ms) {
    return {
      ...out,
      decision: GateDecision.wait,
      reason: `baking: ${count(Math.round(elapsedMs / 1000))} s of ${count(Math.round(analysis.bake_ms / 1000))} s`,
    };
  }
  return {
    ...out,
    decision: GateDecision.pass,
    reason: `every primary metric is within its margin: ${primaries
      .map((m) => metricSentence(m, analysis.alpha))
      .join(
        "; ",
      )}; sample ratio consistent with the plan (candidate ${percent(a.candidate / total)} of ${count(total)} units, planned ${percent(share0)})${dryNote}`,
  };
}
