/**
 * Confidence sequences (CS): intervals valid at every look at once, so a gate may look at the
 * data as often as it likes without inflating its error rate (a fixed-horizon interval
 * re-tested at every look does inflate it; see `bench/gate.bench.ts`).
 *
 * The boundary is the two-sided normal-mixture boundary (Robbins 1970; Howard, Ramdas,
 * McAuliffe, Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence sequences",
 * Ann. Statist. 2021, §3.5 eq. (14)) used as the asymptotic confidence sequence of
 * Waudby-Smith, Arbour, Sinha, Kennedy, Ramdas, "Time-uniform central limit theory and
 * asymptotic confidence sequences" (Ann. Statist. 2024, Thm 2.2):
 *
 *   estimate ± sqrt(V) · sqrt( (1 + 1/(t ρ²)) · (2 log(1/α) + log(1 + t ρ²)) )
 *
 * where V is the (plug-in) variance of the estimate, t the number of observations behind it
 * and ρ > 0 a tuning constant fixed before the data (the boundary is tightest near the sample
 * size t* it was tuned for, see {@link tunedRho}). For a mean of t observations with variance
 * σ², V = σ²/t and this is exactly their boundary σ̂ · sqrt(2(tρ²+1)/(t²ρ²) · log(√(tρ²+1)/α)).
 * For a difference of two arms' means, V = σ²_c/n_c + σ²_b/n_b and t = n_c + n_b (the same
 * boundary as the mixture SPRT of Johari, Koomen, Pekelis, Walsh, "Peeking at A/B tests",
 * KDD 2017, with mixing variance τ² = ρ²·V·t).
 */

/**
 * ρ that minimises the boundary's width at t* observations (Waudby-Smith et al. 2024, §B.2):
 * ρ = sqrt( (−2 log α + log(−2 log α + 1)) / t* ). `alpha` in (0, 1), `tStar` > 0.
 */
export function tunedRho(alpha: number, tStar: number): number {
  const l = -2 * Math.log(alpha);
  return Math.sqrt((l + Math.log(l + 1)) / Math.max(1, tStar));
}

/**
 * The multiplier c_t of sqrt(V) at t observations: the CS is estimate ± c_t·sqrt(V).
 * Always larger than the fixed-horizon z_{1−α/2}, and grows like sqrt(log t).
 */
export function boundaryMultiplier(t: number, rho: number, alpha: number): number {
  const tr = Math.max(t, 1) * rho * rho;
  return Math.sqrt((1 + 1 / tr) * (2 * Math.log(1 / alpha) + Math.log1p(tr)));
}

/** An estimate and its time-uniform bounds, in the estimate's unit. */
export interface Interval {
  estimate: number;
  lower: number;
  upper: number;
}

/**
 * The (1 − α) confidence sequence's interval at this look for an estimate with plug-in
 * variance `variance` (≥ 0) computed from `t` observations. Non-finite input gives an
 * interval of NaN, which callers treat as missing evidence.
 */
export function csInterval(
  estimate: number,
  variance: number,
  t: number,
  rho: number,
  alpha: number,
): Interval {
  if (!Number.isFinite(estimate) || !Number.isFinite(variance) || variance < 0 || !(t > 0)) {
    return { estimate: Number.NaN, lower: Number.NaN, upper: Number.NaN };
  }
  const half = boundaryMultiplier(t, rho, alpha) * Math.sqrt(variance);
  return { estimate, lower: estimate - half, upper: estimate + half };
}

/** Φ(x) for x ≥ 0 (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7): enough for a boundary. */
function phiNonNegative(x: number): number {
  const u = x / Math.SQRT2;
  const k = 1 / (1 + 0.3275911 * u);
  const erf =
    1 -
    ((((1.061405429 * k - 1.453152027) * k + 1.421413741) * k - 0.284496736) * k + 0.254829592) *
      k *
      Math.exp(-u * u);
  return 0.5 * (1 + erf);
}

/**
 * The multiplier c⁺_t of sqrt(V) for a one-sided claim at level α (the estimate is above
 * estimate − c⁺·sqrt(V) at every look, with probability ≥ 1 − α): the one-sided normal mixture
 * (Howard et al. 2021, §3.5: the mixing density of the two-sided mixture restricted to λ ≥ 0 and
 * doubled), which in z units (S = z·√t, V = t, mixing variance ρ²) is
 *
 *   M⁺(z) = 2 / sqrt(1 + tρ²) · exp( tρ² z² / (2(1 + tρ²)) ) · Φ( ρ√t · z / sqrt(1 + tρ²) ),
 *
 * a non-negative supermartingale under the null with M⁺ ≥ 1/α only with probability ≤ α
 * (Ville); c⁺ solves M⁺(c⁺) = 1/α (bisection; M⁺ increases with z). The two-sided boundary at
 * α spends only about α/2 on each side: a claim that only ever goes one way (the gate's "the
 * candidate is worse") may spend all of α on that side, and is decided sooner.
 */
export function oneSidedMultiplier(t: number, rho: number, alpha: number): number {
  const tr = Math.max(t, 1) * rho * rho;
  const target = Math.log(1 / alpha);
  const logM = (z: number) =>
    Math.LN2 -
    0.5 * Math.log1p(tr) +
    (tr * z * z) / (2 * (1 + tr)) +
    Math.log(phiNonNegative((Math.sqrt(tr) * z) / Math.sqrt(1 + tr)));
  let lo = 0;
  let hi = boundaryMultiplier(t, rho, alpha);
  // M⁺ ≥ the two-sided M for z > 0, so the two-sided multiplier is an upper end.
  for (let i = 0; i < 60 && hi - lo > 1e-9; i++) {
    const mid = (lo + hi) / 2;
    if (logM(mid) >= target) hi = mid;
    else lo = mid;
  }
  return hi;
}
