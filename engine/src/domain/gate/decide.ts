/**
 * The gate's decision at one evaluation: pure, from the analysis in force, the planned split,
 * the time the wave has been observed and what the metrics source returned (docs/gate.md).
 *
 * Order, as the release question is asked (docs/state-machine.md rule 11):
 * 1. Evidence complete? No assignment counts → nothing can be read (wait). A metric whose
 *    query failed, returned nothing or NaN is missing: a missing primary never passes.
 * 2. Sample ratio mismatch (`srm.ts`) before any outcome is read: a mismatch fails closed.
 * 3. Each metric's confidence sequence (`confidence-sequence.ts`) on Δ = candidate − control,
 *    oriented so that higher is better. Fail at once when a metric is certainly worse than its
 *    margin (upper < −δ) or certainly breaches its SLO (any metric, primary or guardrail).
 *    Pass when every primary metric has lower ≥ −δ (and meets its SLO with confidence), every
 *    arm has `min_samples` and `bake_ms` has elapsed.
 * 4. Otherwise wait; at `max_wait_ms` the gate is `inconclusive` and an operator decides.
 * In the `watch` phase (waves after the gated one) only guardrails are read, for breaches.
 *
 * Passing needs every primary metric (an intersection-union test: no multiplicity correction
 * is needed for the pass). Failing on any one of k metrics is at most k·α false fails: the
 * error falls on the safe side.
 */
import type { Analysis, GateMetric } from "./analysis.ts";
import { csInterval, type Interval, tunedRho } from "./confidence-sequence.ts";
import {
  type ArmObservation,
  latencyShare,
  ratioShare,
  type Share,
  type ShareOrMissing,
  shareVariance,
} from "./observations.ts";
import { type SrmResult, srmTest } from "./srm.ts";

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

/** A value that could not be observed, and why (query failed, empty, NaN, timeout…). */
export interface Missing {
  missing: string;
}

/** What the metrics source returned for one evaluation. */
export interface GateObservations {
  /** Units assigned per arm since the wave began. */
  assignments: { candidate: number; control: number } | Missing;
  /** Per metric name: each arm's observation. */
  metrics: Record<string, { candidate: ArmObservation; control: ArmObservation } | Missing>;
}

/** Everything the decision depends on besides the observations. */
export interface GateContext {
  analysis: Analysis;
  /** Planned share of the gated traffic on the candidate arm, in (0, 1). */
  plannedCandidateShare: number;
  /** ms since the wave's exposure was observed at the router. */
  elapsedMs: number;
  phase: GatePhase;
}

/** One metric's result at one evaluation. */
export interface MetricResult {
  name: string;
  kind: GateMetric["kind"];
  required: boolean;
  better: "lower" | "higher";
  /** Missing evidence's reason, or null. */
  missing: string | null;
  candidate: Share | null;
  control: Share | null;
  /** Δ = candidate − control oriented so that positive is better, with its CS bounds. */
  difference: Interval | null;
  /** The margin δ ≥ 0 in the metric's unit (a relative margin resolved on the control). */
  margin: number | null;
  /** The candidate's own CS against its SLO, when one is declared. */
  slo: { limit: number; lower: number; upper: number } | null;
  verdict: "non_inferior" | "inferior" | "slo_breached" | "undecided" | "missing";
}

/** The decision with everything it was made from (stored as evidence). */
export interface GateEvaluation {
  decision: GateDecision;
  /** One sentence naming what decided (metric, bound, margin; or planned vs observed). */
  reason: string;
  phase: GatePhase;
  alpha: number;
  elapsedMs: number;
  arms: { candidate: number; control: number } | null;
  srm: SrmResult | null;
  metrics: MetricResult[];
}

const pct = (v: number): string => `${(v * 100).toFixed(2)}%`;
const num = (v: number): string =>
  Math.abs(v) < 1e-4 && v !== 0 ? v.toExponential(2) : v.toFixed(4);
const isMissing = (v: object): v is Missing => "missing" in v;

function share(metric: GateMetric, o: ArmObservation): ShareOrMissing {
  if (metric.kind === "ratio") {
    return o.kind === "ratio" ? ratioShare(o.counts) : { ok: false, reason: "not a ratio" };
  }
  return o.kind === "latency"
    ? latencyShare(o.buckets, metric.threshold_ms)
    : { ok: false, reason: "not a histogram" };
}

function evaluateMetric(
  metric: GateMetric,
  obs: GateObservations["metrics"][string] | undefined,
  analysis: Analysis,
): MetricResult {
  const better = metric.kind === "ratio" ? metric.better : "lower";
  const base: MetricResult = {
    name: metric.name,
    kind: metric.kind,
    required: metric.required,
    better,
    missing: null,
    candidate: null,
    control: null,
    difference: null,
    margin: null,
    slo: null,
    verdict: "missing",
  };
  if (!obs) return { ...base, missing: "no observation" };
  if (isMissing(obs)) return { ...base, missing: obs.missing };
  const c = share(metric, obs.candidate);
  const b = share(metric, obs.control);
  if (!c.ok) return { ...base, missing: `candidate: ${c.reason}` };
  if (!b.ok) return { ...base, missing: `control: ${b.reason}` };
  const cs = c.share;
  const bs = b.share;
  if (cs.n === 0 || bs.n === 0) {
    return {
      ...base,
      candidate: cs,
      control: bs,
      missing: `no ${cs.n === 0 ? "candidate" : "control"} samples`,
    };
  }
  const pc = cs.x / cs.n;
  const pb = bs.x / bs.n;
  const sign = better === "lower" ? -1 : 1;
  const rho = tunedRho(analysis.alpha, 2 * analysis.min_samples);
  const difference = csInterval(
    sign * (pc - pb),
    shareVariance(cs) + shareVariance(bs),
    cs.n + bs.n,
    rho,
    analysis.alpha,
  );
  const margin = "absolute" in metric.margin ? metric.margin.absolute : metric.margin.relative * pb;
  let slo: MetricResult["slo"] = null;
  let sloBreached = false;
  let sloMet = true;
  if (metric.slo !== undefined) {
    const own = csInterval(
      pc,
      shareVariance(cs),
      cs.n,
      tunedRho(analysis.alpha, analysis.min_samples),
      analysis.alpha,
    );
    slo = { limit: metric.slo, lower: own.lower, upper: own.upper };
    sloBreached = better === "lower" ? own.lower > metric.slo : own.upper < metric.slo;
    sloMet = better === "lower" ? own.upper <= metric.slo : own.lower >= metric.slo;
  }
  if (Number.isNaN(difference.lower)) {
    return { ...base, candidate: cs, control: bs, missing: "bounds are NaN" };
  }
  const verdict: MetricResult["verdict"] = sloBreached
    ? "slo_breached"
    : difference.upper < -margin
      ? "inferior"
      : difference.lower >= -margin && sloMet
        ? "non_inferior"
        : "undecided";
  return { ...base, candidate: cs, control: bs, difference, margin, slo, verdict };
}

function describeFailure(m: MetricResult): string {
  const c = m.candidate as Share;
  const b = m.control as Share;
  const values = `candidate ${pct(c.x / c.n)} (${c.x}/${c.n}) vs control ${pct(b.x / b.n)} (${b.x}/${b.n}), ${m.better} is better`;
  if (m.verdict === "slo_breached" && m.slo) {
    const bound =
      m.better === "lower"
        ? `lower bound ${pct(m.slo.lower)} > SLO`
        : `upper bound ${pct(m.slo.upper)} < SLO`;
    return `metric ${m.name} breaches its SLO: candidate ${bound} ${pct(m.slo.limit)} (${values})`;
  }
  const d = m.difference as Interval;
  return `metric ${m.name} is worse than its margin: upper bound of Δ ${num(d.upper)} < −δ ${num(-(m.margin as number))} (${values})`;
}

/**
 * Decides one evaluation. Pure: same input, same output; throws only on a malformed context
 * (planned share outside (0, 1)), never on bad observations (those are missing evidence).
 */
export function decideGate(ctx: GateContext, obs: GateObservations): GateEvaluation {
  const { analysis, plannedCandidateShare: share0, elapsedMs, phase } = ctx;
  if (!(share0 > 0 && share0 < 1)) {
    throw new RangeError("[gate] plannedCandidateShare must be in (0, 1): a gate needs both arms");
  }
  const out: GateEvaluation = {
    decision: GateDecision.wait,
    reason: "",
    phase,
    alpha: analysis.alpha,
    elapsedMs,
    arms: null,
    srm: null,
    metrics: [],
  };
  const timedOut = elapsedMs >= analysis.max_wait_ms;
  const waitOr = (reason: string): GateEvaluation =>
    timedOut
      ? {
          ...out,
          decision: GateDecision.inconclusive,
          reason: `inconclusive after ${Math.round(elapsedMs / 1000)} s (max_wait_ms ${analysis.max_wait_ms}): ${reason}; an operator must promote or abort`,
        }
      : { ...out, decision: GateDecision.wait, reason };

  // 1. Evidence: assignment counts first — without them no outcome may be read.
  const a = obs.assignments;
  if (isMissing(a)) return waitOr(`assignment counts missing (${a.missing})`);
  if (![a.candidate, a.control].every((v) => Number.isFinite(v) && v >= 0)) {
    return waitOr("assignment counts missing (NaN or negative)");
  }
  out.arms = { candidate: a.candidate, control: a.control };

  // 2. Sample ratio mismatch.
  const srm = srmTest([a.candidate, a.control], [share0, 1 - share0], analysis.alpha);
  out.srm = srm;
  if (srm.mismatch) {
    const total = a.candidate + a.control;
    return {
      ...out,
      decision: GateDecision.fail,
      reason: `sample ratio mismatch: planned ${pct(share0)}/${pct(1 - share0)} candidate/control, observed ${a.candidate}/${a.control} (${pct(a.candidate / total)}/${pct(a.control / total)}); Bayes factor ${Math.exp(srm.logBayesFactor).toPrecision(3)} ≥ 1/α = ${srm.threshold}`,
    };
  }

  // 3. Metrics: a certain breach of any read metric fails at once.
  const read = analysis.metrics.filter((m) => phase === "gate" || !m.required);
  out.metrics = read.map((m) => evaluateMetric(m, obs.metrics[m.name], analysis));
  const failed = out.metrics.filter(
    (m) => m.verdict === "inferior" || m.verdict === "slo_breached",
  );
  if (failed.length > 0) {
    const where = phase === "watch" ? "guardrail breached: " : "";
    return {
      ...out,
      decision: GateDecision.fail,
      reason: where + failed.map(describeFailure).join("; "),
    };
  }
  if (phase === "watch") {
    const missing = out.metrics.filter((m) => m.missing);
    return {
      ...out,
      decision: GateDecision.pass,
      reason:
        missing.length > 0
          ? `no guardrail breached; missing: ${missing.map((m) => `${m.name} (${m.missing})`).join(", ")}`
          : "no guardrail breached",
    };
  }

  const primaries = out.metrics.filter((m) => m.required);
  const missing = primaries.filter((m) => m.missing);
  if (missing.length > 0) {
    return waitOr(`missing evidence: ${missing.map((m) => `${m.name} (${m.missing})`).join(", ")}`);
  }
  const few = primaries.filter(
    (m) =>
      (m.candidate as Share).n < analysis.min_samples ||
      (m.control as Share).n < analysis.min_samples,
  );
  if (few.length > 0) {
    const m = few[0] as MetricResult;
    return waitOr(
      `too few samples: ${m.name} has ${(m.candidate as Share).n} candidate / ${(m.control as Share).n} control, min_samples ${analysis.min_samples} per arm`,
    );
  }
  const undecided = primaries.filter((m) => m.verdict !== "non_inferior");
  if (undecided.length > 0) {
    const m = undecided[0] as MetricResult;
    const d = m.difference as Interval;
    const sloNote =
      m.slo && d.lower >= -(m.margin as number)
        ? `; SLO ${pct(m.slo.limit)} not yet met (upper ${pct(m.slo.upper)})`
        : "";
    return waitOr(
      `not yet non-inferior: ${m.name} lower bound of Δ ${num(d.lower)} < −δ ${num(-(m.margin as number))}${sloNote}`,
    );
  }
  if (elapsedMs < analysis.bake_ms) {
    return {
      ...out,
      decision: GateDecision.wait,
      reason: `baking: ${Math.round(elapsedMs / 1000)} s of ${Math.round(analysis.bake_ms / 1000)} s`,
    };
  }
  return {
    ...out,
    decision: GateDecision.pass,
    reason: `every primary metric is non-inferior: ${primaries
      .map(
        (m) =>
          `${m.name} lower bound ${num((m.difference as Interval).lower)} ≥ −δ ${num(-(m.margin as number))}`,
      )
      .join("; ")}; sample ratio consistent with the plan`,
  };
}
