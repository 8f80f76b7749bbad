/**
 * The deterministic router (largest remainder): counts sum to N, each lane gets floor or ceil of
 * its exact share, excluded lanes get 0, and the answer is the same every time.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LaneState } from "../../engine/src/control-plane/model.ts";
import { route } from "../../engine/src/control-plane/router.ts";

const lane = (id: string, weight: number, excluded = false): LaneState => ({
  id,
  model: "m",
  weight,
  excluded,
  capabilities: [],
  advertised: false,
  updated_at: 0,
});

describe("control-plane router", () => {
  it("assigns exact shares: 10% of 10,000 is 1,000", () => {
    const r = route("m", [lane("old", 90), lane("new", 10)], 10_000);
    expect(r).toEqual({
      model: "m",
      requests: 10_000,
      counts: { old: 9000, new: 1000 },
      unrouted: 0,
    });
  });

  it("breaks remainder ties by weight, then id, deterministically", () => {
    expect(route("m", [lane("a", 34), lane("b", 33), lane("c", 33)], 1).counts).toEqual({
      a: 1,
      b: 0,
      c: 0,
    });
    expect(route("m", [lane("c", 50), lane("b", 50)], 1).counts).toEqual({ b: 1, c: 0 });
    expect(route("m", [lane("a", 1), lane("b", 1), lane("c", 1)], 2).counts).toEqual({
      a: 1,
      b: 1,
      c: 0,
    });
  });

  it("reports everything unrouted when every lane is excluded or at 0", () => {
    expect(route("m", [lane("a", 100, true), lane("b", 0)], 5)).toMatchObject({
      counts: { a: 0, b: 0 },
      unrouted: 5,
    });
  });

  it("holds its invariants for any weights, exclusions and N", () => {
    const lanes = fc
      .uniqueArray(
        fc.record({
          id: fc.stringMatching(/^[a-z]{1,4}$/),
          weight: fc.integer({ min: 0, max: 100 }),
          excluded: fc.boolean(),
        }),
        {
          minLength: 1,
          maxLength: 8,
          selector: (l) => l.id,
        },
      )
      .map((ls) => ls.map((l) => lane(l.id, l.weight, l.excluded)));
    fc.assert(
      fc.property(lanes, fc.integer({ min: 0, max: 1_000_000 }), (ls, n) => {
        const r = route("m", ls, n);
        const total = Object.values(r.counts).reduce((a, b) => a + b, 0);
        const live = ls.filter((l) => !l.excluded && l.weight > 0);
        const sum = live.reduce((a, l) => a + l.weight, 0);
        expect(total + r.unrouted).toBe(n);
        expect(r.unrouted).toBe(sum === 0 ? n : 0);
        for (const l of ls) {
          const got = r.counts[l.id];
          if (l.excluded || l.weight === 0) expect(got).toBe(0);
          else {
            const exact = (n * l.weight) / sum;
            expect(got).toBeGreaterThanOrEqual(Math.floor(exact));
            expect(got).toBeLessThanOrEqual(Math.ceil(exact));
          }
        }
        expect(route("m", [...ls].reverse(), n).counts).toEqual(r.counts);
      }),
      { numRuns: 500 },
    );
  });
});
