/**
 * Seeded binomial draws for the gate's simulations (tests and `bench:gate`): exact inversion
 * searching outwards from the mode (A. W. Kemp, "Efficient generation of logarithmic and
 * binomial variates", 1981; L. Devroye, "Non-Uniform Random Variate Generation", 1986, §X.4),
 * one uniform per draw, about √(npq) steps.
 */
import { seededUniform } from "../../engine/src/control-plane/random.ts";
import { gammaln } from "../../engine/src/domain/gate/gammaln.ts";

/** A binomial draw: successes in `n` trials (an integer ≥ 0) of probability `p` (0..1). */
export type BinomialDraw = (n: number, p: number) => number;

/** Binomial draws from the uniform stream of `seed`. Throws RangeError on a bad n or p. */
export function seededBinomial(seed: number): BinomialDraw {
  const uniform = seededUniform(seed);
  const draw: BinomialDraw = (n, p) => {
    if (!Number.isInteger(n) || n < 0)
      throw new RangeError(`binomial: n must be an integer ≥ 0, got ${n}`);
    if (!(p >= 0 && p <= 1)) throw new RangeError(`binomial: p must be in [0, 1], got ${p}`);
    if (n === 0 || p === 0) return 0;
    if (p === 1) return n;
    if (p > 0.5) return n - draw(n, 1 - p);
    const q = 1 - p;
    const mode = Math.floor((n + 1) * p);
    const pmfMode = Math.exp(
      gammaln(n + 1) -
        gammaln(mode + 1) -
        gammaln(n - mode + 1) +
        mode * Math.log(p) +
        (n - mode) * Math.log(q),
    );
    let u = uniform() - pmfMode;
    if (u < 0) return mode;
    let lo = mode;
    let pLo = pmfMode;
    let hi = mode;
    let pHi = pmfMode;
    // Each pass takes one more value below and one above the mode: at most n passes.
    while (lo > 0 || hi < n) {
      if (lo > 0) {
        pLo *= (lo / (n - lo + 1)) * (q / p);
        lo--;
        u -= pLo;
        if (u < 0) return lo;
      }
      if (hi < n) {
        pHi *= ((n - hi) / (hi + 1)) * (p / q);
        hi++;
        u -= pHi;
        if (u < 0) return hi;
      }
    }
    return mode; // only rounding was left of u
  };
  return draw;
}
