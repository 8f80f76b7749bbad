import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  equalBaseline,
  largestRemainder,
  trafficWeights,
} from "../../engine/src/domain/weights.ts";

const lanes = (ws: number[]) => ws.map((w, i) => ({ id: `l${i}`, baseline_weight: w }));

describe("largestRemainder", () => {
  it.each([
    [100, [1, 1, 1], [34, 33, 33]],
    [90, [1, 1], [45, 45]],
    [50, [1, 1], [25, 25]],
    [10, [1, 1, 1], [4, 3, 3]],
    [100, [50, 30, 20], [50, 30, 20]],
    [7, [0, 0], [4, 3]],
    [0, [5, 5], [0, 0]],
    [100, [1, 2], [33, 67]],
  ])("splits %i over %j as %j", (total, shares, want) => {
    expect(largestRemainder(total, shares)).toEqual(want);
  });

  it("refuses negative or fractional input", () => {
    expect(() => largestRemainder(-1, [1])).toThrow(/non-negative integer/);
    expect(() => largestRemainder(10, [1.5])).toThrow(/non-negative integers/);
    expect(() => largestRemainder(10, [])).toThrow(/no parts/);
  });

  it("always sums to the total, each part within 1 of its exact quota (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100 }),
        fc.array(fc.integer({ min: 0, max: 100 }), { minLength: 1, maxLength: 64 }),
        (total, shares) => {
          const parts = largestRemainder(total, shares);
          expect(parts.reduce((a, b) => a + b, 0)).toBe(total);
          const sum = shares.reduce((a, b) => a + b, 0);
          const eff = sum === 0 ? shares.map(() => 1) : shares;
          const effSum = sum === 0 ? shares.length : sum;
          parts.forEach((p, i) => {
            const quota = (total * (eff[i] ?? 0)) / effSum;
            expect(p).toBeGreaterThanOrEqual(Math.floor(quota));
            expect(p).toBeLessThanOrEqual(Math.ceil(quota));
          });
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe("trafficWeights", () => {
  it("gives deployed lanes p and the rest 100 - p (3 lanes, wave 1 at 10%)", () => {
    expect(trafficWeights(lanes([34, 33, 33]), new Set(["l0"]), 10)).toEqual({
      l0: 10,
      l1: 45,
      l2: 45,
    });
  });

  it("splits in proportion to baseline weights inside each group", () => {
    expect(trafficWeights(lanes([50, 30, 20]), new Set(["l0"]), 10)).toEqual({
      l0: 10,
      l1: 54,
      l2: 36,
    });
  });

  it("refuses a percent < 100 when no stable lane remains", () => {
    expect(() => trafficWeights(lanes([50, 50]), new Set(["l0", "l1"]), 90)).toThrow(
      /needs a stable lane/,
    );
  });

  it("sums to 100 and gives the deployed lanes exactly p, whatever the split (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 100 }), { minLength: 2, maxLength: 64 }),
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 1, max: 63 }),
        (ws, p, k) => {
          const ls = lanes(ws);
          const cut = Math.min(k, ls.length - 1);
          const deployed = new Set(ls.slice(0, cut).map((l) => l.id));
          const w = trafficWeights(ls, deployed, p);
          const values = Object.values(w);
          expect(values.reduce((a, b) => a + b, 0)).toBe(100);
          expect(values.every((v) => Number.isInteger(v) && v >= 0)).toBe(true);
          const onDeployed = [...deployed].reduce((a, id) => a + (w[id] ?? 0), 0);
          expect(onDeployed).toBe(p);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("equalBaseline splits 100 over n lanes", () => {
    expect(equalBaseline(3)).toEqual([34, 33, 33]);
    expect(equalBaseline(64).reduce((a, b) => a + b, 0)).toBe(100);
  });
});
