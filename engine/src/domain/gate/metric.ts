/**
 * One metric at one evaluation: the two arms' shares, the confidence sequence of their
 * difference against the margin, the candidate's own against its SLO, and the verdict; and the
 * sentence a person reads about it, plain comparison first, statistics after. Shared by the
 * gate (decide.ts) and the stop condition (stop.ts). Pure.
 */
import type { Margin } from "./analysis.ts";
import { csInterval, type Interval, oneSidedMultiplier, tunedRho } from "./confidence-sequence.ts";
import {
  type ArmObservation,
  latencyShare,
  ratioShare,
  type Share,
  type ShareOrMissing,
  shareVariance,
  unitShareVariance,
} from "./observations.ts";
import {
  type ArmQuantile,
  armQuantile,
  type QuantileResult,
  type QuantileSpec,
  quantilePriorConcentration,
  quantileSentence,
  quantileVerdict,
} from "./quantile.ts";
import { fraction, percent, points } from "./words.ts";

/** A value that could not be observed, and why (query failed, empty, NaN, timeout…). */
export interface Missing {
  /** For people: the metric's query and what went wrong. */
  missing: string;
  /**
   * True when a read failed (HTTP or PromQL error, timeout, unreachable source), as opposed to
   * data that is not there yet (no series, no samples): what `consecutive_error_limit` counts.
   */
  error?: boolean;
}

/** True when `v` is a {@link Missing}. */
export const isMissing = (v: object): v is Missing => "missing" in v;

/** One metric's observation: both arms, or why it is missing. */
export type MetricObservation = { candidate: ArmObservation; control: ArmObservation } | Missing;

/** What evaluating a metric needs to know about it (a gate metric or a stop metric). */
export type MetricSpec = ShareMetricSpec | QuantileMetricSpec;

/** A quantile metric (quantile.ts): a level, a margin in ms or percent, an SLO in ms. */
export interface QuantileMetricSpec extends QuantileSpec {
  name: string;
  kind: "quantile";
}

/** A metric whose value is a share (ratio, or the share of requests slower than a bound). */
export interface ShareMetricSpec {
  name: string;
  kind: "ratio" | "latency";
  better?: "lower" | "higher";
  threshold_ms?: number;
  /** Absent: no comparison with the control (a stop metric with only an SLO). */
  margin?: Margin;
  slo?: number;
}

/** The statistics settings of an evaluation. */
export interface Tuning {
  alpha: number;
  min_samples: number;
}

/** One metric's result at one evaluation. */
export interface MetricResult {
  name: string;
  kind: "ratio" | "latency" | "quantile";
  required: boolean;
  /** Recorded, never decides. */
  dryRun: boolean;
  better: "lower" | "higher";
  /** Missing evidence's reason, or null. */
  missing: string | null;
  /** True when the metric is missing because a read failed (see {@link Missing.error}). */
  readError: boolean;
  candidate: Share | null;
  control: Share | null;
  /**
   * Δ = candidate − control oriented so that positive is better, with its CS bounds: `lower`
   * from the two-sided boundary (a pass reads it), `upper` from the one-sided boundary at α (a
   * fail reads it: "worse than the margin" is claimed in that direction only). Each claim is
   * wrong with probability ≤ α at every look at once.
   */
  difference: Interval | null;
  /** The margin δ ≥ 0 in the metric's unit (a relative margin resolved on the control). */
  margin: number | null;
  /** True when a relative margin was raised to its floor (the control's value was too low). */
  floored: boolean;
  /** The candidate's own CS against its SLO, when one is declared. */
  slo: { limit: number; lower: number; upper: number } | null;
  verdict: "non_inferior" | "inferior" | "slo_breached" | "undecided" | "missing";
  /**
   * A quantile metric's bounds (quantile.ts); its `candidate`/`control` shares then count the
   * requests in and above the bucket holding each arm's quantile, and `difference` is null.
   */
  quantile?: QuantileResult;
}

function share(metric: ShareMetricSpec, o: ArmObservation): ShareOrMissing {
  if (metric.kind === "ratio") {
    return o.kind === "ratio" ? ratioShare(o.counts) : { ok: false, reason: "not a ratio" };
  }
  return o.kind === "latency"
    ? latencyShare(o.buckets, metric.threshold_ms ?? Number.NaN)
    : { ok: false, reason: "not a histogram" };
}

/**
 * δ of `margin` with the control at `control` (a share): an absolute margin as written; a
 * relative one is `relative × control`, never below its floor (`floor`, default one event in
 * `min_samples`): a control with no errors would otherwise give δ = 0, which no candidate can be
 * shown within, however many requests it serves without an error.
 */
export function resolveMargin(
  margin: Margin,
  control: number,
  t: Tuning,
): { delta: number; floored: boolean } {
  if ("absolute" in margin) return { delta: margin.absolute, floored: false };
  const floor = margin.floor ?? 1 / t.min_samples;
  const raw = margin.relative * control;
  return raw >= floor ? { delta: raw, floored: false } : { delta: floor, floored: true };
}

/** Assignment units per arm behind a metric's requests (a non-`request` assignment unit). */
export interface ArmUnits {
  candidate: number;
  control: number;
}

/**
 * Variance and sample size of one arm's share: per request, or, when `units` is given, per
 * assignment unit (`unitShareVariance`, the units as the observations).
 */
function spread(s: Share, units: number | undefined): { variance: number; t: number } {
  return units === undefined
    ? { variance: shareVariance(s), t: s.n }
    : { variance: unitShareVariance(s, units), t: Math.min(units, s.n) };
}

/**
 * Evaluates `metric` on `obs`. Never throws: anything unreadable is `missing` with its reason.
 * `control` false reads the candidate alone (no control serves beside it): only the SLO.
 * `units` (absent under `request` assignment): the variance counts units, not requests.
 */
export function evaluateMetric(
  metric: MetricSpec,
  obs: MetricObservation | undefined,
  t: Tuning,
  flags: { required: boolean; dryRun: boolean; controlOptional?: boolean; units?: ArmUnits } = {
    required: true,
    dryRun: false,
  },
): MetricResult {
  if (metric.kind === "quantile") return evaluateQuantile(metric, obs, t, flags);
  const better = metric.kind === "ratio" ? (metric.better ?? "lower") : "lower";
  const base = unread(metric.name, metric.kind, better, flags);
  if (!obs) return { ...base, missing: NOTHING_RETURNED };
  if (isMissing(obs)) return { ...base, missing: obs.missing, readError: obs.error === true };
  const c = share(metric, obs.candidate);
  const b = share(metric, obs.control);
  if (!c.ok) return { ...base, missing: `candidate: ${c.reason}` };
  if (!b.ok) return { ...base, missing: `control: ${b.reason}` };
  const cs = c.share;
  const bs = b.share;
  // The stop condition reads a 100% wave too, where no control serves: its SLO still counts.
  const noControl = bs.n === 0 && flags.controlOptional === true && metric.slo !== undefined;
  const compare = metric.margin !== undefined && !noControl;
  if (cs.n === 0 || (compare && bs.n === 0)) {
    return {
      ...base,
      candidate: cs,
      control: bs,
      missing: `no ${cs.n === 0 ? "candidate" : "control"} samples yet`,
    };
  }
  const pc = cs.x / cs.n;
  const sc = spread(cs, flags.units?.candidate);
  let slo: MetricResult["slo"] = null;
  let sloBreached = false;
  let sloMet = true;
  if (metric.slo !== undefined) {
    const own = csInterval(pc, sc.variance, sc.t, tunedRho(t.alpha, t.min_samples), t.alpha);
    slo = { limit: metric.slo, lower: own.lower, upper: own.upper };
    sloBreached = better === "lower" ? own.lower > metric.slo : own.upper < metric.slo;
    sloMet = better === "lower" ? own.upper <= metric.slo : own.lower >= metric.slo;
  }
  if (!compare || !metric.margin) {
    const verdict = sloBreached ? "slo_breached" : sloMet ? "non_inferior" : "undecided";
    return { ...base, candidate: cs, control: bs.n > 0 ? bs : null, slo, verdict };
  }
  const pb = bs.x / bs.n;
  const sign = better === "lower" ? -1 : 1;
  const sb = spread(bs, flags.units?.control);
  const variance = sc.variance + sb.variance;
  const rho = tunedRho(t.alpha, 2 * t.min_samples);
  const two = csInterval(sign * (pc - pb), variance, sc.t + sb.t, rho, t.alpha);
  // "Worse than the margin" is a claim in one direction only: its bound is one-sided at α
  // (confidence-sequence.ts, oneSidedMultiplier), the pass side keeps the two-sided bound.
  const difference = {
    ...two,
    upper: two.estimate + oneSidedMultiplier(sc.t + sb.t, rho, t.alpha) * Math.sqrt(variance),
  };
  const { delta: margin, floored } = resolveMargin(metric.margin, pb, t);
  if (Number.isNaN(difference.lower)) {
    return { ...base, candidate: cs, control: bs, missing: "bounds are NaN" };
  }
  const worseAtMargin = marginTest(
    sign * (pc - pb),
    (bs.x + 1) / (bs.n + 2),
    { candidate: sc.t, control: sb.t },
    margin,
    better,
    oneSidedMultiplier(sc.t + sb.t, rho, t.alpha),
  );
  const verdict: MetricResult["verdict"] = sloBreached
    ? "slo_breached"
    : difference.upper < -margin || worseAtMargin
      ? "inferior"
      : difference.lower >= -margin && sloMet
        ? "non_inferior"
        : "undecided";
  return { ...base, candidate: cs, control: bs, difference, margin, floored, slo, verdict };
}

/** Expected events (or non-events) under the null per arm before the test at the margin applies. */
export const MARGIN_TEST_MIN_EVENTS = 10;

/**
 * The one-sided test of "the candidate is worse than the control by more than δ" at the margin
 * itself: the estimate Δ̂ (oriented, positive is better) against −δ, with the variance the
 * boundary null gives (the control's rate p_b, regularised, and the candidate's at exactly δ
 * worse, p₀ = p_b ± δ) rather than the candidate's observed one, as a score test does: a
 * candidate that is worse has the larger variance, and the plug-in bound pays for it. Rejects
 * when Δ̂ + c⁺·sqrt(p₀(1−p₀)/n_c + p_b(1−p_b)/n_b) < −δ, c⁺ the one-sided multiplier at α;
 * n_c, n_b are the arms' sample sizes as the variance counts them (units under a sticky
 * assignment unit, requests otherwise), p_b the control's share regularised to (x+1)/(n+2).
 * Nulls inside the margin have Δ > −δ and, with p₀ on the same side of ½ as every such null
 * (checked: otherwise no test), a variance no larger than p₀'s: the boundary is the hardest
 * null, so the test is wrong with probability ≤ α for every candidate no worse than δ. Only
 * once each arm expects {@link MARGIN_TEST_MIN_EVENTS} events under the null (the normal
 * approximation's usual condition); before, the bound on Δ alone decides.
 */
function marginTest(
  estimate: number,
  pb: number,
  n: { candidate: number; control: number },
  delta: number,
  better: "lower" | "higher",
  multiplier: number,
): boolean {
  const p0 = better === "lower" ? pb + delta : pb - delta;
  if (better === "lower" ? p0 > 0.5 : p0 < 0.5) return false;
  // The normal approximation needs events: at least MARGIN_TEST_MIN_EVENTS expected under the
  // null on each arm (3 errors in the first 10 requests against a 2% control would otherwise
  // fail the candidate on an approximation that does not hold at such counts).
  const events = (k: number, p: number) => k * Math.min(p, 1 - p);
  if (
    events(n.candidate, p0) < MARGIN_TEST_MIN_EVENTS ||
    events(n.control, pb) < MARGIN_TEST_MIN_EVENTS
  ) {
    return false;
  }
  const v0 = (p0 * (1 - p0)) / n.candidate + (pb * (1 - pb)) / n.control;
  return Number.isFinite(v0) && estimate + multiplier * Math.sqrt(v0) < -delta;
}

const NOTHING_RETURNED = "the metrics source returned nothing for it";

/** A metric's result before anything is read: no figures, verdict `missing`. */
function unread(
  name: string,
  kind: MetricResult["kind"],
  better: MetricResult["better"],
  flags: { required: boolean; dryRun: boolean },
): MetricResult {
  return {
    name,
    kind,
    required: flags.required,
    dryRun: flags.dryRun,
    better,
    missing: null,
    readError: false,
    candidate: null,
    control: null,
    difference: null,
    margin: null,
    floored: false,
    slo: null,
    verdict: "missing",
  };
}

/**
 * A quantile metric (quantile.ts) on `obs`: each arm's quantile bounded at the buckets'
 * resolution, then compared. Missing evidence as for a share: no histogram, malformed buckets,
 * no samples on an arm the comparison needs.
 */
function evaluateQuantile(
  metric: QuantileMetricSpec,
  obs: MetricObservation | undefined,
  t: Tuning,
  flags: { required: boolean; dryRun: boolean; controlOptional?: boolean },
): MetricResult {
  const base = unread(metric.name, "quantile", "lower", flags);
  if (!obs) return { ...base, missing: NOTHING_RETURNED };
  if (isMissing(obs)) return { ...base, missing: obs.missing, readError: obs.error === true };
  const k = quantilePriorConcentration(t.alpha, t.min_samples);
  const arm = (o: ArmObservation) =>
    o.kind === "latency" ? armQuantile(o.buckets, metric.quantile, t.alpha, k) : "not a histogram";
  const c = arm(obs.candidate);
  const b = arm(obs.control);
  if (typeof c === "string") return { ...base, missing: `candidate: ${c}` };
  if (typeof b === "string") return { ...base, missing: `control: ${b}` };
  const tail = (a: ArmQuantile, o: ArmObservation): Share => {
    const below =
      o.kind === "latency" ? (o.buckets.find((x) => x.le === a.bucket.low)?.count ?? 0) : 0;
    return { x: a.n - below, n: a.n };
  };
  const cs = tail(c, obs.candidate);
  const bs = tail(b, obs.control);
  const noControl = b.n === 0 && flags.controlOptional === true && metric.slo_ms !== undefined;
  const compare = metric.margin !== undefined && !noControl;
  if (c.n === 0 || (compare && b.n === 0)) {
    return {
      ...base,
      candidate: cs,
      control: bs,
      missing: `no ${c.n === 0 ? "candidate" : "control"} samples yet`,
    };
  }
  const q: QuantileResult = {
    quantile: metric.quantile,
    candidate: c,
    control: compare || b.n > 0 ? b : null,
    margin: compare ? (metric.margin ?? null) : null,
    slo_ms: metric.slo_ms ?? null,
  };
  return {
    ...base,
    candidate: cs,
    control: b.n > 0 ? bs : null,
    verdict: quantileVerdict(q),
    quantile: q,
  };
}

const ratioOf = (s: Share) => s.x / s.n;

/** `+2.0 points` for a lower-is-better metric (worse is up), `−2.0 points` otherwise. */
function allowed(m: MetricResult): string {
  const sign = m.better === "lower" ? "+" : "−";
  return `${sign}${points(m.margin ?? 0)} points${m.floored ? " (the floor of its relative margin)" : ""}`;
}

/**
 * The plain comparison a person reads first: `error-rate: candidate 5.78% vs control 0.91%,
 * allowed +2.0 points: worse`. `word` is the verdict in words (worse, within, not yet within).
 */
export function comparison(m: MetricResult, word: string): string {
  const c = m.candidate ? percent(ratioOf(m.candidate)) : "—";
  const b = m.control && m.control.n > 0 ? percent(ratioOf(m.control)) : "—";
  if (m.margin === null) return `${m.name}: candidate ${c}, SLO ${slos(m)}: ${word}`;
  return `${m.name}: candidate ${c} vs control ${b}, allowed ${allowed(m)}: ${word}`;
}

function slos(m: MetricResult): string {
  if (!m.slo) return "—";
  return `${m.better === "lower" ? "≤" : "≥"} ${percent(m.slo.limit)}`;
}

/** The counts behind a comparison: `candidate 62/1,059, control 90/9,741, lower is better`. */
function counts(m: MetricResult): string {
  const arm = (name: string, s: Share | null) => (s ? `${name} ${fraction(s.x, s.n)}` : null);
  return [arm("candidate", m.candidate), arm("control", m.control), `${m.better} is better`]
    .filter(Boolean)
    .join(", ");
}

/** How much worse the candidate may be, at most (from the lower bound of Δ): `+0.41 points`. */
function worseAtMost(d: Interval): string {
  return d.lower >= 0
    ? "no worse than the control"
    : `at most ${points(-d.lower)} points worse than the control`;
}

/**
 * The sentence for a metric that decided or waits, plain comparison first, then the bound that
 * decided and the counts: `error-rate: candidate 5.85% vs control 0.92%, allowed +3.0 points:
 * worse (at least 3.6 points worse at every look, α 0.05; candidate 62/1,059, control 90/9,741,
 * lower is better)`.
 */
export function metricSentence(m: MetricResult, alpha: number): string {
  if (m.missing) return `${m.name}: no data (${m.missing})`;
  if (m.quantile && m.verdict !== "missing") {
    return quantileSentence(m.name, m.quantile, m.verdict, alpha);
  }
  const stat = `anytime-valid at α ${alpha}`;
  if (m.verdict === "slo_breached" && m.slo) {
    const bound =
      m.better === "lower"
        ? `the candidate's own value is at least ${percent(m.slo.lower)}`
        : `the candidate's own value is at most ${percent(m.slo.upper)}`;
    const c = m.candidate ? percent(ratioOf(m.candidate)) : "—";
    return `${m.name}: candidate ${c}, SLO ${slos(m)}: breached (${bound}, ${stat}; ${counts(m)})`;
  }
  const d = m.difference;
  if (!d) {
    // SLO only (a stop metric): met or not yet shown.
    const word = m.verdict === "non_inferior" ? "within" : "not yet shown within";
    const s = m.slo;
    const bound = s
      ? m.better === "lower"
        ? `upper bound ${percent(s.upper)}`
        : `lower bound ${percent(s.lower)}`
      : "";
    return `${comparison(m, word)} (${bound}, ${stat}; ${counts(m)})`;
  }
  if (m.verdict === "inferior") {
    // Shown by the test at the margin before the bound on Δ passed it (marginTest).
    const atLeast =
      d.upper < -(m.margin ?? 0)
        ? `at least ${points(-d.upper)} points worse than the control`
        : `more than ${points(m.margin ?? 0)} points worse than the control, tested at the margin`;
    return `${comparison(m, "worse")} (${atLeast}, ${stat}; ${counts(m)})`;
  }
  if (m.verdict === "non_inferior") {
    return `${comparison(m, "within")} (${worseAtMost(d)}, ${stat}; ${counts(m)})`;
  }
  const slo =
    m.slo && d.lower >= -(m.margin ?? 0)
      ? `; SLO ${slos(m)} not yet shown (upper bound ${percent(m.slo.upper)})`
      : "";
  return `${comparison(m, "not yet shown within")} (${worseAtMost(d)}, ${stat}; ${counts(m)})${slo}`;
}
