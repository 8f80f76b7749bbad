/**
 * Seeded random draws for simulated traffic (and the tests' and benchmarks' simulations): one
 * seed gives one sequence, on every platform, so a run can be replayed. The bits come from the
 * Mersenne Twister MT19937 (pure-rand's `mersenne`), seeded as Matsumoto and Nishimura's
 * `init_genrand` does.
 */
import { uniformFloat64 } from "pure-rand/distribution/uniformFloat64";
import { mersenne } from "pure-rand/generator/mersenne";

/** A stream of draws: each call returns the next one. */
export type Draws = () => number;

/** Uniform draws on [0, 1), multiples of 2⁻⁵³. `seed`: an integer (its low 32 bits count). */
export function seededUniform(seed: number): Draws {
  const rng = mersenne(seed);
  return () => uniformFloat64(rng);
}

/**
 * Standard normal draws N(0, 1) by the Box–Muller transform (G. E. P. Box, M. E. Muller, "A
 * note on the generation of random normal deviates", Ann. Math. Statist. 29(2), 1958): two
 * uniforms give two independent normals, the second kept for the next call. No rejection, so
 * every draw costs a bounded amount of work.
 */
export function seededNormal(seed: number): Draws {
  const uniform = seededUniform(seed);
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const z = spare;
      spare = null;
      return z;
    }
    const r = Math.sqrt(-2 * Math.log(1 - uniform())); // 1 − u is in (0, 1]: log is finite
    const theta = 2 * Math.PI * uniform();
    spare = r * Math.sin(theta);
    return r * Math.cos(theta);
  };
}
