import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  equalBaseline,
  exposureOf,
  groupWeights,
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

describe("groupWeights (per-version groups)", () => {
  const ls = lanes([34, 33, 33]);
  it("gives the candidate group p, the baseline group 100 - p, lanes out of service 0", () => {
    const group = (id: string) => (id === "l0" ? "candidate" : id === "l1" ? "out" : "baseline");
    expect(groupWeights(ls, group, 10)).toEqual({ l0: 10, l1: 0, l2: 90 });
  });

  it("splits inside a group by baseline weight, equally when they are all 0", () => {
    expect(
      groupWeights(lanes([0, 0, 100]), (id) => (id === "l2" ? "baseline" : "candidate"), 9),
    ).toEqual({ l0: 5, l1: 4, l2: 91 });
  });

  it("refuses a group that must carry traffic but has no lane, naming the image", () => {
    expect(() => groupWeights(ls, () => "candidate", 90)).toThrow(/previous image; none serves/);
    expect(() => groupWeights(ls, () => "baseline", 10)).toThrow(/new image; none serves/);
  });

  it("the candidate group carries exactly p whatever the split, out lanes 0 (property)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            w: fc.integer({ min: 0, max: 100 }),
            g: fc.constantFrom<"candidate" | "baseline" | "out">("candidate", "baseline", "out"),
          }),
          { minLength: 1, maxLength: 12 },
        ),
        fc.integer({ min: 0, max: 100 }),
        (spec, p) => {
          const ls2 = lanes(spec.map((x) => x.w));
          const group = (id: string) => spec[Number(id.slice(1))]!.g;
          const hasC = spec.some((x) => x.g === "candidate");
          const hasB = spec.some((x) => x.g === "baseline");
          if ((p > 0 && !hasC) || (p < 100 && !hasB)) {
            expect(() => groupWeights(ls2, group, p)).toThrow(RangeError);
            return;
          }
          const w = groupWeights(ls2, group, p);
          expect(Object.values(w).reduce((a, b) => a + b, 0)).toBe(100);
          const cands = new Set(ls2.filter((l) => group(l.id) === "candidate").map((l) => l.id));
          expect(exposureOf(w, cands)).toBe(p);
          for (const l of ls2) if (group(l.id) === "out") expect(w[l.id]).toBe(0);
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe("exposureOf", () => {
  it("is the candidates' share over lanes that can take traffic", () => {
    expect(exposureOf({ a: 10, b: 45, c: 45 }, new Set(["a"]))).toBe(10);
    // An excluded lane's share is spread over the others, candidates included.
    expect(exposureOf({ a: 34, b: 33, c: 33 }, new Set(["a"]), new Set(["c"]))).toBeCloseTo(
      (34 * 100) / 67,
    );
    expect(exposureOf({ a: 0, b: 0 }, new Set(["a"]))).toBe(0);
  });
});
