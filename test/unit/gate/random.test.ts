/**
 * The seeded draws behind simulated traffic and the gate's simulations: replayable, from
 * MT19937, and distributed as documented (checked on fixed seeds, so deterministic).
 */
import { describe, expect, it } from "vitest";
import { seededNormal, seededUniform } from "../../../engine/src/control-plane/random.ts";
import { gammaln } from "../../../engine/src/domain/gate/gammaln.ts";
import { seededBinomial } from "../../support/binomial.ts";

const take = (draw: () => number, n: number) => Array.from({ length: n }, draw);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const variance = (xs: number[]) => {
  const m = mean(xs);
  return xs.reduce((a, b) => a + (b - m) ** 2, 0) / (xs.length - 1);
};
/** Pearson's χ² of observed counts against expected counts. */
const chiSquare = (observed: number[], expected: number[]) =>
  observed.reduce((s, o, i) => s + (o - (expected[i] as number)) ** 2 / (expected[i] as number), 0);

describe("seeded uniform and normal draws", () => {
  it("are MT19937: seed 5489 gives its reference first outputs 3499211612, 581869302", () => {
    const expected =
      (3499211612 & (2 ** 26 - 1)) * 2 ** -26 + (581869302 & (2 ** 27 - 1)) * 2 ** -53;
    expect(seededUniform(5489)()).toBe(expected);
  });

  it("replay with the same seed and differ between seeds", () => {
    expect(take(seededUniform(11), 50)).toEqual(take(seededUniform(11), 50));
    expect(take(seededNormal(11), 51)).toEqual(take(seededNormal(11), 51));
    expect(take(seededUniform(11), 50)).not.toEqual(take(seededUniform(12), 50));
  });

  it("uniform: in [0, 1), flat over 20 bins (χ², 19 df, below the 0.1% point)", () => {
    const n = 100_000;
    const xs = take(seededUniform(3), n);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    const bins = new Array(20).fill(0);
    for (const x of xs) bins[Math.floor(x * 20)]++;
    expect(chiSquare(bins, new Array(20).fill(n / 20))).toBeLessThan(43.82);
    expect(Math.abs(mean(xs) - 0.5)).toBeLessThan(4 * Math.sqrt(1 / 12 / n));
  });

  it("normal: mean 0, variance 1, 5% beyond ±1.96", () => {
    const n = 100_000;
    const zs = take(seededNormal(4), n);
    expect(Math.abs(mean(zs))).toBeLessThan(4 / Math.sqrt(n));
    expect(Math.abs(variance(zs) - 1)).toBeLessThan(4 * Math.sqrt(2 / n));
    const tail = zs.filter((z) => Math.abs(z) > 1.959963984540054).length / n;
    expect(Math.abs(tail - 0.05)).toBeLessThan(4 * Math.sqrt((0.05 * 0.95) / n));
  });
});

describe("seeded binomial draws", () => {
  const pmf = (n: number, p: number, k: number) =>
    Math.exp(
      gammaln(n + 1) -
        gammaln(k + 1) -
        gammaln(n - k + 1) +
        k * Math.log(p) +
        (n - k) * Math.log1p(-p),
    );

  it.each([
    [20, 0.3],
    [200, 0.1],
    [50, 0.85],
  ])("B(%d, %d): whole numbers in [0, n] distributed as the pmf (χ², 0.1% point)", (n, p) => {
    const draws = 50_000;
    const draw = seededBinomial(9);
    const counts = new Array(n + 1).fill(0);
    let outside = 0;
    for (let i = 0; i < draws; i++) {
      const k = draw(n, p);
      if (Number.isInteger(k) && k >= 0 && k <= n) counts[k]++;
      else outside++;
    }
    expect(outside).toBe(0);
    // Pool neighbouring values into cells expecting at least 5 draws each.
    const observed: number[] = [];
    const expected: number[] = [];
    let o = 0;
    let e = 0;
    for (let k = 0; k <= n; k++) {
      o += counts[k];
      e += draws * pmf(n, p, k);
      if (e >= 5) {
        observed.push(o);
        expected.push(e);
        o = 0;
        e = 0;
      }
    }
    const last = observed.length - 1; // the upper tail left over joins the last cell
    observed[last] = (observed[last] as number) + o;
    expected[last] = (expected[last] as number) + e;
    // 0.1% points of χ² for the cells' degrees of freedom (cells − 1), up to 40 df.
    const df = observed.length - 1;
    expect(df).toBeGreaterThan(3);
    expect(chiSquare(observed, expected)).toBeLessThan(CHI2_999[df] as number);
  });

  it("B(1000, 0.2) and B(10⁶, 0.3): mean np and variance np(1 − p)", () => {
    for (const [n, p] of [
      [1000, 0.2],
      [1_000_000, 0.3],
    ] as const) {
      const draw = seededBinomial(5);
      const xs = Array.from({ length: 20_000 }, () => draw(n, p));
      const v = n * p * (1 - p);
      expect(Math.abs(mean(xs) - n * p)).toBeLessThan(4 * Math.sqrt(v / xs.length));
      expect(Math.abs(variance(xs) / v - 1)).toBeLessThan(4 * Math.sqrt(2 / xs.length));
    }
  });

  it("has the degenerate cases exactly and refuses a bad n or p", () => {
    const draw = seededBinomial(1);
    expect(draw(0, 0.4)).toBe(0);
    expect(draw(17, 0)).toBe(0);
    expect(draw(17, 1)).toBe(17);
    expect(() => draw(-1, 0.5)).toThrow(/n must be an integer ≥ 0/);
    expect(() => draw(2.5, 0.5)).toThrow(/n must be an integer ≥ 0/);
    expect(() => draw(10, 1.5)).toThrow(/p must be in \[0, 1\]/);
    expect(() => draw(10, Number.NaN)).toThrow(/p must be in \[0, 1\]/);
  });
});

/** χ² 0.999 quantiles by degrees of freedom (index = df). */
const CHI2_999 = [
  Number.NaN,
  10.83,
  13.82,
  16.27,
  18.47,
  20.52,
  22.46,
  24.32,
  26.12,
  27.88,
  29.59,
  31.26,
  32.91,
  34.53,
  36.12,
  37.7,
  39.25,
  40.79,
  42.31,
  43.82,
  45.31,
  46.8,
  48.27,
  49.73,
  51.18,
  52.62,
  54.05,
  55.48,
  56.89,
  58.3,
  59.7,
  61.1,
  62.49,
  63.87,
  65.25,
  66.62,
  67.99,
  69.35,
  70.7,
  72.05,
  73.4,
];
