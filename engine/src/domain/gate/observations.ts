/**
 * What a metrics source returns for one arm, and how it becomes a share with its variance.
 * Anything malformed (NaN, negative, numerator above denominator, buckets that are not
 * cumulative, no bucket at the threshold) is missing evidence with a reason: never a pass.
 */

/** A ratio metric's counts for one arm (e.g. errors and requests since the wave began). */
export interface RatioCounts {
  numerator: number;
  denominator: number;
}

/** One cumulative histogram bucket, as Prometheus exposes it: count of values ≤ `le` (ms). */
export interface Bucket {
  le: number;
  count: number;
}

/** One arm's observation of one metric. */
export type ArmObservation =
  | { kind: "ratio"; counts: RatioCounts }
  | { kind: "latency"; buckets: Bucket[] };

/** A share x/n with its sample size; `x` counts the events the metric is about. */
export interface Share {
  x: number;
  n: number;
}

/** A share, or the reason it cannot be formed. */
export type ShareOrMissing = { ok: true; share: Share } | { ok: false; reason: string };

/** A ratio's counts as a share; invalid counts are missing. */
export function ratioShare(c: RatioCounts): ShareOrMissing {
  const { numerator: x, denominator: n } = c;
  if (!Number.isFinite(x) || !Number.isFinite(n)) return { ok: false, reason: "value is NaN" };
  if (x < 0 || n < 0) return { ok: false, reason: "negative count" };
  if (x > n) return { ok: false, reason: `numerator ${x} above denominator ${n}` };
  return { ok: true, share: { x, n } };
}

/**
 * A latency histogram as the share of values slower than `thresholdMs`: x = count(+Inf) −
 * count(le = threshold), n = count(+Inf). The threshold must be one of the bucket bounds
 * (a share between bounds would need interpolation, which is an estimate, not a count).
 */
export function latencyShare(buckets: readonly Bucket[], thresholdMs: number): ShareOrMissing {
  if (buckets.length === 0) return { ok: false, reason: "no histogram buckets" };
  const sorted = [...buckets].sort((a, b) => a.le - b.le);
  let prev = 0;
  for (const b of sorted) {
    if (Number.isNaN(b.le) || !Number.isFinite(b.count) || b.count < 0) {
      return { ok: false, reason: "bucket value is NaN or negative" };
    }
    if (b.count < prev) return { ok: false, reason: "buckets are not cumulative" };
    prev = b.count;
  }
  const inf = sorted[sorted.length - 1] as Bucket;
  if (inf.le !== Number.POSITIVE_INFINITY) return { ok: false, reason: "no +Inf bucket" };
  const at = sorted.find((b) => Math.abs(b.le - thresholdMs) <= 1e-9 * Math.max(1, thresholdMs));
  if (!at) return { ok: false, reason: `no bucket with le=${thresholdMs}` };
  return { ok: true, share: { x: inf.count - at.count, n: inf.count } };
}

/**
 * Plug-in variance of a share's estimate x/n, with the share regularised to (x+1)/(n+2) so
 * that 0 events in n does not give a zero-width interval (Agresti & Coull, "Approximate is
 * better than exact", Am. Stat. 1998, use the same shrinkage toward ½).
 */
export function shareVariance(s: Share): number {
  if (s.n <= 0) return Number.POSITIVE_INFINITY;
  const p = (s.x + 1) / (s.n + 2);
  return (p * (1 - p)) / s.n;
}

/**
 * Variance of a share's estimate x/n when its n requests come from `units` assignment units
 * (sessions, users, tenants) whose requests may fail together: the plug-in variance of
 * {@link shareVariance} with the units, not the requests, as the sample size,
 * p(1 − p) / min(units, n). That is the variance when every request of a unit has the same
 * outcome and units are of equal size (the largest design effect, m requests per unit);
 * with units ≥ n it is {@link shareVariance}. `units` ≤ 0 gives +∞.
 */
export function unitShareVariance(s: Share, units: number): number {
  const m = Math.min(units, s.n);
  if (!(m > 0)) return Number.POSITIVE_INFINITY;
  const p = (s.x + 1) / (s.n + 2);
  return (p * (1 - p)) / m;
}
