/**
 * Sample ratio mismatch (SRM): is the split the arms actually got the split that was planned?
 *
 * The sequential Dirichlet-multinomial test of Lindon & Malek, "Anytime-valid inference for
 * multinomial count data", NeurIPS 2022 (§3, eq. (4)): with planned shares p₀ and a
 * Dirichlet(c·p₀) mixture over the alternative, the Bayes factor after counts n (N = Σnᵢ) is
 *
 *   BF = [ B(c·p₀ + n) / B(c·p₀) ] / ∏ p₀ᵢ^nᵢ,      B(a) = ∏Γ(aᵢ) / Γ(Σaᵢ)
 *
 * (the multinomial coefficient cancels). Under the planned split BF is a non-negative
 * martingale with mean 1, so by Ville's inequality P(BF ever ≥ 1/α) ≤ α: the test may be
 * run after every unit, or at every look, and still rejects a true split with probability at
 * most α. BF is an e-value; its reciprocal is an anytime-valid p-value.
 */
import { gammaln } from "./gammaln.ts";

/** Prior concentration c of the Dirichlet mixture (Lindon & Malek's examples use 100·p₀). */
export const DEFAULT_SRM_CONCENTRATION = 100;

/** The SRM test at one look. */
export interface SrmResult {
  /** Planned shares, summing to 1 (same order as `observed`). */
  planned: number[];
  /** Observed assignment counts per arm. */
  observed: number[];
  /** Observed shares (NaN when nothing was assigned yet). */
  observedShares: number[];
  /** log of the Bayes factor against the planned split (natural log). */
  logBayesFactor: number;
  /** Anytime-valid p-value: min(1, 1/BF). */
  pValue: number;
  /** Rejection threshold on BF: 1/α. */
  threshold: number;
  /** True when BF ≥ 1/α: the split served is not the split planned. */
  mismatch: boolean;
}

/**
 * Runs the test. `observed`: counts ≥ 0 (whole numbers); `planned`: shares ≥ 0 of the same
 * length summing to 1 (within 1e-9). An arm planned at 0 that received units is a mismatch
 * at once. Throws RangeError on malformed input (lengths, negatives, shares not summing to 1).
 */
export function srmTest(
  observed: readonly number[],
  planned: readonly number[],
  alpha: number,
  concentration: number = DEFAULT_SRM_CONCENTRATION,
): SrmResult {
  if (observed.length !== planned.length || observed.length < 2) {
    throw new RangeError("[gate] srm: observed and planned need the same length ≥ 2");
  }
  if (observed.some((n) => !Number.isFinite(n) || n < 0)) {
    throw new RangeError("[gate] srm: observed counts must be finite and ≥ 0");
  }
  const total = planned.reduce((a, b) => a + b, 0);
  if (planned.some((p) => !(p >= 0)) || Math.abs(total - 1) > 1e-9) {
    throw new RangeError("[gate] srm: planned shares must be ≥ 0 and sum to 1");
  }
  const n = observed.reduce((a, b) => a + b, 0);
  let logBf = 0;
  let sumPrior = 0;
  for (let i = 0; i < observed.length; i++) {
    const p = planned[i] as number;
    const x = observed[i] as number;
    if (p === 0) {
      if (x > 0) logBf = Number.POSITIVE_INFINITY;
      continue;
    }
    const a = concentration * p;
    sumPrior += a;
    logBf += gammaln(a + x) - gammaln(a) - x * Math.log(p);
  }
  if (Number.isFinite(logBf)) logBf += gammaln(sumPrior) - gammaln(sumPrior + n);
  const threshold = 1 / alpha;
  return {
    planned: [...planned],
    observed: [...observed],
    observedShares: observed.map((x) => (n > 0 ? x / n : Number.NaN)),
    logBayesFactor: logBf,
    pValue: Math.min(1, Math.exp(-logBf)),
    threshold,
    mismatch: logBf >= Math.log(threshold),
  };
}
