/**
 * Latency quantiles (e.g. p99) of the two arms from Prometheus histograms, with anytime-valid
 * bounds at the buckets' resolution, and the comparison of candidate against control. Pure.
 *
 * Method: the fixed-quantile confidence sequence of Howard & Ramdas, "Sequential estimation of
 * quantiles with applications to A/B-testing and best-arm identification", Bernoulli 28(3),
 * 2022: the quantile Q(p) of one arm is tracked through the count of observations at or below
 * a value, whose increments are Bernoulli, with a time-uniform boundary on that count. Here the
 * boundary is the beta-binomial mixture (Robbins's method of mixtures; the two-arm case of the
 * Dirichlet-multinomial mixture `srm.ts` uses), and it is applied at the histogram's bucket
 * bounds only, since a histogram says nothing finer.
 *
 * Derivation. One arm, t observations X₁…X_t i.i.d., level p ∈ (0, 1), S(b) = #{Xᵢ ≤ b} (a
 * histogram's cumulative bucket count at `le = b`, t its `+Inf` count). With a Beta(p·k, (1−p)·k)
 * prior on the success probability r,
 *
 *   M_t(s) = B(p·k + s, (1−p)·k + t − s) / B(p·k, (1−p)·k) / ( p^s · (1−p)^(t−s) )
 *
 * is, at s = S(Q(p)) (whose increments are Bernoulli(p) for a continuous distribution), a
 * non-negative martingale with mean 1 (a likelihood ratio mixed over r), so by Ville's
 * inequality P(∃t: M_t(S(Q(p))) ≥ 2/α) ≤ α/2. ln M_t(s) is convex in s (a log of a mixture of
 * exponentials of s), so {s : M_t(s) ≥ 2/α} is the complement of one interval around t·p when
 * M_t(t·p) < 2/α. Hence, for every bucket bound b at once, at every t:
 *
 *   - S(b) < t·p and M_t(S(b)) ≥ 2/α  ⟹  Q(p) > b   (were Q(p) ≤ b, S(Q(p)) ≤ S(b) would cross too);
 *   - S(b) ≥ t·p and M_t(S(b)) ≥ 2/α  ⟹  Q(p) ≤ b   (symmetrically, with S of values < Q(p)).
 *
 * Both sides of both claims fail only on the one event of probability ≤ α/2 (for a distribution
 * with atoms, the count at Q(p) is coupled with a Binomial(t, p) one on the side that matters).
 * The arm's lower bound L is the largest bound proven below Q(p) (0 when none), its upper bound
 * U the smallest proven at or above it (+∞ when none): L < Q(p) ≤ U at every look, with
 * probability ≥ 1 − α/2. With both arms so bounded (≤ α in all):
 *
 *   - worse:  L_c − U_b ≥ δ (margin in ms), or L_c ≥ (1 + r)·U_b (margin r in percent), proves
 *     Q_c − Q_b > δ (resp. Q_c > (1 + r)·Q_b);
 *   - within: U_c − L_b ≤ δ, or U_c ≤ (1 + r)·L_b, proves Q_c − Q_b < δ (resp. Q_c < (1 + r)·Q_b);
 *   - an SLO Q_c ≤ ℓ is breached when L_c ≥ ℓ and met when U_c ≤ ℓ.
 *
 * k tunes where the boundary is tightest (validity holds for any k > 0): as for the normal
 * mixture (`confidence-sequence.ts`), a prior variance p(1−p)/(k + 1) of c/t* times the
 * per-observation variance, c = −2 ln(α/2) + ln(1 − 2 ln(α/2)), with t* = `min_samples`.
 */
import { gammaln } from "./gammaln.ts";
import type { Bucket } from "./observations.ts";
import { count } from "./words.ts";

/** A quantile metric's margin: the candidate may be this much slower (ms, or percent). */
export type QuantileMargin = { ms: number } | { percent: number };

/** What evaluating a quantile needs to know about its metric. */
export interface QuantileSpec {
  /** The level, e.g. 0.99 for p99. */
  quantile: number;
  margin?: QuantileMargin;
  /** Absolute limit on the candidate's quantile, ms. */
  slo_ms?: number;
}

/** One arm's quantile at the buckets' resolution. */
export interface ArmQuantile {
  /** Observations (the `+Inf` bucket's count). */
  n: number;
  /** The bucket holding the empirical quantile: low < Q̂ ≤ high, ms (high +∞: above the last bound). */
  bucket: { low: number; high: number };
  /** Anytime-valid bounds: lower < Q(p) ≤ upper, ms (lower 0, upper +∞ when nothing is shown yet). */
  lower: number;
  upper: number;
}

/** The quantile comparison of one evaluation, as evidence keeps it. */
export interface QuantileResult {
  /** The level, e.g. 0.99. */
  quantile: number;
  candidate: ArmQuantile;
  /** Null when no control serves (a stop condition's SLO alone). */
  control: ArmQuantile | null;
  margin: QuantileMargin | null;
  slo_ms: number | null;
}

/** `p99` for 0.99, `p99.9` for 0.999, `p50` for 0.5. */
export function quantileLabel(q: number): string {
  return `p${Number((q * 100).toPrecision(6))}`;
}

/** −2 ln(a) + ln(1 − 2 ln(a)) at a = α/2: the constant of the tuning of k. */
function tuningConstant(alpha: number): number {
  const l = -2 * Math.log(alpha / 2);
  return l + Math.log1p(l);
}

/** Prior concentration k of the beta mixture, tuned to be tightest near `tStar` observations. */
export function quantilePriorConcentration(alpha: number, tStar: number): number {
  return Math.max(1, Math.max(1, tStar) / tuningConstant(alpha) - 1);
}

const lnBeta = (a: number, b: number) => gammaln(a) + gammaln(b) - gammaln(a + b);

/** ln M_t(s) of the module comment: the log mixture martingale at count s of t, level p. */
export function logMixture(s: number, t: number, p: number, k: number): number {
  const a = p * k;
  const b = (1 - p) * k;
  return lnBeta(a + s, b + t - s) - lnBeta(a, b) - s * Math.log(p) - (t - s) * Math.log1p(-p);
}

/** Sorted, validated cumulative buckets ending at +Inf, or the reason they cannot be read. */
function sortedBuckets(buckets: readonly Bucket[]): Bucket[] | string {
  if (buckets.length === 0) return "no histogram buckets";
  const sorted = [...buckets].sort((a, b) => a.le - b.le);
  let prev = 0;
  for (const b of sorted) {
    if (Number.isNaN(b.le) || !Number.isFinite(b.count) || b.count < 0) {
      return "bucket value is NaN or negative";
    }
    if (b.count < prev) return "buckets are not cumulative";
    prev = b.count;
  }
  if ((sorted[sorted.length - 1] as Bucket).le !== Number.POSITIVE_INFINITY) {
    return "no +Inf bucket";
  }
  if (sorted.length < 2) return "only the +Inf bucket: a quantile needs bucket bounds";
  return sorted;
}

/**
 * One arm's quantile `p` and its anytime-valid bounds from `buckets` (cumulative, with `le` in
 * ms and a `+Inf` bucket). `k` from {@link quantilePriorConcentration}. A reason string when
 * the buckets cannot be read; `n` 0 when there are no observations yet.
 */
export function armQuantile(
  buckets: readonly Bucket[],
  p: number,
  alpha: number,
  k: number,
): ArmQuantile | string {
  const sorted = sortedBuckets(buckets);
  if (typeof sorted === "string") return sorted;
  const n = (sorted[sorted.length - 1] as Bucket).count;
  const finite = sorted.slice(0, -1);
  const out: ArmQuantile = {
    n,
    bucket: { low: 0, high: Number.POSITIVE_INFINITY },
    lower: 0,
    upper: Number.POSITIVE_INFINITY,
  };
  if (n === 0) return out;
  let low = 0;
  for (const b of finite) {
    if (b.count >= p * n) {
      out.bucket = { low, high: b.le };
      break;
    }
    low = b.le;
    out.bucket = { low, high: Number.POSITIVE_INFINITY };
  }
  const threshold = Math.log(2 / alpha);
  // The boundary's structure (module comment) needs the centre not to cross.
  if (logMixture(p * n, n, p, k) >= threshold) return out;
  for (const b of finite) {
    const crossed = logMixture(b.count, n, p, k) >= threshold;
    if (!crossed) continue;
    if (b.count < p * n) out.lower = b.le;
    else if (out.upper === Number.POSITIVE_INFINITY) out.upper = b.le;
  }
  return out;
}

/** The verdict of a quantile comparison (the same words as a share's, `metric.ts`). */
export type QuantileVerdict = "non_inferior" | "inferior" | "slo_breached" | "undecided";

/** Whether the SLO is breached, met, or not yet shown either way. */
function sloState(r: QuantileResult): "breached" | "met" | "open" | null {
  if (r.slo_ms === null) return null;
  if (r.candidate.lower >= r.slo_ms) return "breached";
  return r.candidate.upper <= r.slo_ms ? "met" : "open";
}

/** The candidate is proven slower than the control by more than the margin. */
function provenWorse(c: ArmQuantile, b: ArmQuantile, m: QuantileMargin): boolean {
  if (b.upper === Number.POSITIVE_INFINITY) return false;
  return "ms" in m ? c.lower - b.upper >= m.ms : c.lower >= (1 + m.percent / 100) * b.upper;
}

/** The candidate is proven slower than the control by less than the margin. */
function provenWithin(c: ArmQuantile, b: ArmQuantile, m: QuantileMargin): boolean {
  if (c.upper === Number.POSITIVE_INFINITY) return false;
  return "ms" in m
    ? c.upper - b.lower <= m.ms
    : b.lower > 0 && c.upper <= (1 + m.percent / 100) * b.lower;
}

/** The verdict on `r`: an SLO breach or a proven regression fails; within needs both shown. */
export function quantileVerdict(r: QuantileResult): QuantileVerdict {
  const slo = sloState(r);
  if (slo === "breached") return "slo_breached";
  const b = r.control;
  if (!r.margin || !b) return slo === "met" ? "non_inferior" : "undecided";
  if (provenWorse(r.candidate, b, r.margin)) return "inferior";
  return provenWithin(r.candidate, b, r.margin) && slo !== "open" ? "non_inferior" : "undecided";
}

/**
 * The difference in ms oriented so that positive is better (Δ = Q_b − Q_c), with its bounds
 * (lower = L_b − U_c, upper = U_b − L_c; infinite when an arm is unbounded) and the bucket
 * midpoints' difference as the estimate: what a share's metric stores as its interval.
 */
export function quantileDifference(r: QuantileResult): {
  estimate: number;
  lower: number;
  upper: number;
} | null {
  const b = r.control;
  if (!b) return null;
  const mid = (a: ArmQuantile) =>
    a.bucket.high === Number.POSITIVE_INFINITY ? a.bucket.low : (a.bucket.low + a.bucket.high) / 2;
  return {
    estimate: mid(b) - mid(r.candidate),
    lower: b.lower - r.candidate.upper,
    upper: b.upper - r.candidate.lower,
  };
}

const ms = (v: number) => `${count(v)} ms`;

/** `250–500 ms`, `≤ 5 ms` (first bucket), `above 5,000 ms` (the +Inf bucket). */
export function bucketWords(a: ArmQuantile): string {
  if (a.bucket.high === Number.POSITIVE_INFINITY) return `above ${ms(a.bucket.low)}`;
  if (a.bucket.low === 0) return `≤ ${ms(a.bucket.high)}`;
  return `${count(a.bucket.low)}–${ms(a.bucket.high)}`;
}

/** `+100 ms` / `+20%`. */
function allowedWords(m: QuantileMargin): string {
  return "ms" in m ? `+${ms(m.ms)}` : `+${count(m.percent)}%`;
}

/** `above 500 ms` / `at most 400 ms`, or `not yet bounded`. */
const above = (a: ArmQuantile) => (a.lower > 0 ? `above ${ms(a.lower)}` : "not yet bounded below");
const atMost = (a: ArmQuantile) =>
  a.upper < Number.POSITIVE_INFINITY ? `at most ${ms(a.upper)}` : "not yet bounded above";

/**
 * The sentence for a quantile metric, plain comparison first, then the bounds that decided,
 * the resolution and the counts: `latency-p99: candidate p99 500–1,000 ms vs control 250–500
 * ms, allowed +100 ms: worse (at the buckets' resolution the candidate's p99 is above 500 ms and
 * the control's at most 400 ms, anytime-valid at α 0.05; candidate 4,000 requests, control
 * 36,000)`.
 */
export function quantileSentence(
  name: string,
  r: QuantileResult,
  verdict: QuantileVerdict,
  alpha: number,
): string {
  const label = quantileLabel(r.quantile);
  const c = r.candidate;
  const b = r.control;
  const stat = `anytime-valid at α ${alpha}`;
  const counts = `candidate ${count(c.n)} requests${b ? `, control ${count(b.n)}` : ""}`;
  const slo = r.slo_ms === null ? "" : `SLO ≤ ${ms(r.slo_ms)}`;
  if (verdict === "slo_breached") {
    return `${name}: candidate ${label} ${bucketWords(c)}, ${slo}: breached (at the buckets' resolution the candidate's ${label} is ${above(c)}, ${stat}; ${counts})`;
  }
  const word =
    verdict === "inferior"
      ? "worse"
      : verdict === "non_inferior"
        ? "within"
        : "not yet shown within";
  if (!b || !r.margin) {
    return `${name}: candidate ${label} ${bucketWords(c)}, ${slo}: ${word} (at the buckets' resolution the candidate's ${label} is ${atMost(c)}, ${stat}; ${counts})`;
  }
  const head = `${name}: candidate ${label} ${bucketWords(c)} vs control ${bucketWords(b)}, allowed ${allowedWords(r.margin)}${slo ? `, ${slo}` : ""}: ${word}`;
  const bounds =
    verdict === "inferior"
      ? `the candidate's ${label} is ${above(c)} and the control's ${atMost(b)}`
      : `the candidate's ${label} is ${atMost(c)} and the control's ${above(b)}`;
  return `${head} (at the buckets' resolution ${bounds}, ${stat}; ${counts})`;
}
