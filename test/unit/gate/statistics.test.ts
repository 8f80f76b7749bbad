/**
 * The gate's statistics against closed forms, and their error guarantees by simulation:
 * the confidence sequence covers the true difference at every look in ≥ 1 − α of streams,
 * and the SRM test alarms on a true split in ≤ α of streams (Ville's inequality).
 * Simulations are seeded (deterministic) and bounded in count.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  boundaryMultiplier,
  csInterval,
  tunedRho,
} from "../../../engine/src/domain/gate/confidence-sequence.ts";
import { shareVariance } from "../../../engine/src/domain/gate/observations.ts";
import { srmTest } from "../../../engine/src/domain/gate/srm.ts";
import { seededBinomial } from "../../support/binomial.ts";

/** Φ⁻¹(0.975), the two-sided 5% normal quantile. */
const Z_975 = 1.959963984540054;

describe("normal-mixture confidence sequence", () => {
  it("matches Waudby-Smith et al.'s closed form for a mean of t observations", () => {
    for (const [t, rho, alpha] of [
      [10, 0.1, 0.05],
      [1000, 0.05, 0.05],
      [123_456, 0.003, 0.01],
    ] as const) {
      const sigma = 2.5;
      const half = boundaryMultiplier(t, rho, alpha) * Math.sqrt((sigma * sigma) / t);
      const tr = t * rho * rho;
      const expected =
        sigma *
        Math.sqrt(((2 * (tr + 1)) / (t * t * rho * rho)) * Math.log(Math.sqrt(tr + 1) / alpha));
      expect(half).toBeCloseTo(expected, 10);
    }
    // By hand: t=1000, ρ=0.05, α=0.05 → sqrt(1.4·(2 ln 20 + ln 3.5)) = 3.18461…
    expect(boundaryMultiplier(1000, 0.05, 0.05)).toBeCloseTo(3.18461, 4);
  });

  it("is the level set {mixture martingale = 1/α} of Robbins' normal mixture", () => {
    // M = (1+τ²V)^(-1/2) exp(τ²S²/(2(1+τ²V))) with V = σ²t, τ² = ρ²/σ²; S at the boundary.
    const t = 500;
    const rho = 0.07;
    const alpha = 0.05;
    const sigma = 0.3;
    const S = t * boundaryMultiplier(t, rho, alpha) * Math.sqrt((sigma * sigma) / t);
    const V = sigma * sigma * t;
    const tau2 = (rho * rho) / (sigma * sigma);
    const logM = -0.5 * Math.log1p(tau2 * V) + (tau2 * S * S) / (2 * (1 + tau2 * V));
    expect(logM).toBeCloseTo(Math.log(1 / alpha), 9);
  });

  it("is always wider than the fixed-horizon interval at the same α", () => {
    const z = Z_975;
    for (const t of [1, 10, 100, 1e3, 1e4, 1e5, 1e6]) {
      expect(boundaryMultiplier(t, tunedRho(0.05, 2000), 0.05)).toBeGreaterThan(z);
    }
  });

  it("tuned ρ minimises the width at the target sample size", () => {
    const rho = tunedRho(0.05, 4000);
    const at = (r: number) => boundaryMultiplier(4000, r, 0.05);
    expect(at(rho)).toBeLessThan(at(rho * 1.3));
    expect(at(rho)).toBeLessThan(at(rho / 1.3));
  });

  it("gives NaN bounds (missing evidence) for non-finite input", () => {
    expect(Number.isNaN(csInterval(Number.NaN, 1, 10, 0.1, 0.05).lower)).toBe(true);
    expect(Number.isNaN(csInterval(0, Number.POSITIVE_INFINITY, 10, 0.1, 0.05).upper)).toBe(true);
    expect(Number.isNaN(csInterval(0, 1, 0, 0.1, 0.05).upper)).toBe(true);
  });

  it("covers the true difference of two shares at every look in ≥ 1 − α of streams (property)", () => {
    const alpha = 0.05;
    const streams = 300;
    const looks = 60;
    fc.assert(
      fc.property(
        fc.record({
          pc: fc.double({ min: 0.02, max: 0.5, noNaN: true }),
          pb: fc.double({ min: 0.02, max: 0.5, noNaN: true }),
          perLook: fc.integer({ min: 100, max: 400 }),
          candidateShare: fc.double({ min: 0.1, max: 0.5, noNaN: true }),
          seed: fc.integer({ min: 1, max: 2 ** 30 }),
        }),
        ({ pc, pb, perLook, candidateShare, seed }) => {
          const draw = seededBinomial(seed);
          const rho = tunedRho(alpha, 2000);
          const nc = Math.max(1, Math.round(perLook * candidateShare));
          const nb = perLook - nc;
          let misses = 0;
          for (let s = 0; s < streams; s++) {
            let xc = 0;
            let xb = 0;
            let missed = false;
            for (let k = 1; k <= looks && !missed; k++) {
              xc += draw(nc, pc);
              xb += draw(nb, pb);
              const c = { x: xc, n: nc * k };
              const b = { x: xb, n: nb * k };
              const ci = csInterval(
                c.x / c.n - b.x / b.n,
                shareVariance(c) + shareVariance(b),
                c.n + b.n,
                rho,
                alpha,
              );
              if (pc - pb < ci.lower || pc - pb > ci.upper) missed = true;
            }
            if (missed) misses++;
          }
          const se = Math.sqrt((alpha * (1 - alpha)) / streams);
          expect(misses / streams).toBeLessThanOrEqual(alpha + 3 * se);
        },
      ),
      { numRuns: 12, seed: 20261201 },
    );
  });
});

describe("Dirichlet-multinomial SRM test", () => {
  it("equals the Beta-binomial Bayes factor for two arms", () => {
    // B(cp + x, c(1 − p) + n − x) / B(cp, c(1 − p)) / (pˣ (1 − p)ⁿ⁻ˣ), in logarithms, computed
    // with stdlib's `betaln` 0.3.1 and printed to 17 digits: [x, n, log BF].
    const p = 0.1;
    const c = 100;
    for (const [x, n, expected] of [
      [0, 0, 0],
      [7, 100, -0.015021373308803376],
      [140, 1000, 6.0011693784055637],
      [1400, 10_000, 76.904165165676318],
    ] as const) {
      const r = srmTest([x, n - x], [p, 1 - p], 0.05, c);
      expect(r.logBayesFactor).toBeCloseTo(expected, 8);
    }
  });

  it("gives the log Bayes factors it gave with stdlib's gammaln, within rounding", () => {
    // [observed, planned, concentration, log BF with `@stdlib/math-base-special-gammaln` 0.3.1].
    // The terms are ln Γ of counts up to 10⁷ (about 10⁸), so the sum keeps about 1e-15 of the
    // largest term: the tolerance.
    const cases: [number[], number[], number | undefined, number][] = [
      [[7, 93], [0.1, 0.9], undefined, -0.015021373308456987],
      [[140, 860], [0.1, 0.9], undefined, 6.0011693784072122],
      [[1400, 8600], [0.1, 0.9], undefined, 76.904165165673476],
      [[5000, 5000], [0.5, 0.5], undefined, -2.3100354643102037],
      [[2012, 7988], [0.2, 0.8], undefined, -2.2696217055345187],
      [[333, 333, 334], [1 / 3, 1 / 3, 1 / 3], undefined, -2.4030456010123089],
      [[120, 300, 580], [0.1, 0.3, 0.6], undefined, -0.45358280984328303],
      [[251_000, 749_000], [0.25, 0.75], undefined, -1.9461238738149405],
      [[3, 97], [0.01, 0.99], 100, 0.034382211729280243],
      [[3, 97], [0.05, 0.95], 10, -0.67545763682051074],
      [[40, 60], [0.5, 0.5], 1, -0.51739448301515267],
      [[1_000_123, 8_999_877], [0.1, 0.9], undefined, -5.7565408647060394],
    ];
    for (const [observed, planned, c, expected] of cases) {
      const n = observed.reduce((a, b) => a + b, 0);
      const largestTerm = (n + 100) * Math.log(n + 100);
      const got = srmTest(observed, planned, 0.05, c).logBayesFactor;
      expect(Math.abs(got - expected)).toBeLessThanOrEqual(1e-14 * largestTerm);
    }
  });

  it("is 1 before any unit, small on the plan, large off it", () => {
    expect(srmTest([0, 0], [0.5, 0.5], 0.05).logBayesFactor).toBeCloseTo(0, 12);
    expect(srmTest([5000, 5000], [0.5, 0.5], 0.05).mismatch).toBe(false);
    const off = srmTest([1400, 8600], [0.1, 0.9], 0.05);
    expect(off.mismatch).toBe(true);
    expect(off.pValue).toBeLessThan(1e-6);
    expect(srmTest([1, 99], [0, 1], 0.05).mismatch).toBe(true);
    expect(srmTest([0, 99], [0, 1], 0.05).mismatch).toBe(false);
  });

  it("refuses malformed input", () => {
    expect(() => srmTest([1, 2], [0.5, 0.6], 0.05)).toThrow(/sum to 1/);
    expect(() => srmTest([1, -2], [0.5, 0.5], 0.05)).toThrow(/≥ 0/);
    expect(() => srmTest([1], [1], 0.05)).toThrow(/length/);
  });

  it("alarms on a true split in ≤ α of continuously monitored streams (Ville)", () => {
    const alpha = 0.05;
    const streams = 1000;
    const draw = seededBinomial(7);
    let alarms = 0;
    for (let s = 0; s < streams; s++) {
      let c = 0;
      let n = 0;
      for (let k = 0; k < 60; k++) {
        c += draw(200, 0.1);
        n += 200;
        if (srmTest([c, n - c], [0.1, 0.9], alpha).mismatch) {
          alarms++;
          break;
        }
      }
    }
    expect(alarms / streams).toBeLessThanOrEqual(
      alpha + 3 * Math.sqrt((alpha * (1 - alpha)) / streams),
    );
  });
});
