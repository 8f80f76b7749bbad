/**
 * `stickyLane` (engine/src/control-plane/router.ts), pure: a unit's arm depends on its key, the
 * salt and the candidate's cumulative share only, and never leaves the candidate while that
 * share widens. (Over HTTP through the proxy: test/property/sticky.property.test.ts.)
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LaneState } from "../../engine/src/control-plane/model.ts";
import { type Arm, stickyLane } from "../../engine/src/control-plane/router.ts";

const lane = (id: string, weight: number, excluded = false): LaneState =>
  ({
    id,
    model: "m",
    weight,
    excluded,
    capabilities: [],
    advertised: false,
    updated_at: 0,
  }) as LaneState;
const armOf = (id: string): Arm => (id.startsWith("c") ? "candidate" : "control");

describe("stickyLane", () => {
  it("keeps a unit on the candidate while the candidate's share widens, over any lanes' split", () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 16 }),
        fc.string({ maxLength: 8 }),
        fc.array(
          fc.tuple(
            fc.integer({ min: 0, max: 100 }),
            fc.integer({ min: 0, max: 100 }),
            fc.integer({ min: 0, max: 100 }),
          ),
          { minLength: 2, maxLength: 8 },
        ),
        (key, salt, rows) => {
          // Candidate percent p split over c1/c2, the rest over b1/b2.
          const steps = rows.map(([p, a, b]) => ({ p, a, b })).sort((x, y) => x.p - y.p);
          let was: string | null = null;
          for (const { p, a, b } of steps) {
            const c1 = Math.round((p * a) / 100);
            const b1 = Math.round(((100 - p) * b) / 100);
            const pick = stickyLane(
              [lane("c1", c1), lane("c2", p - c1), lane("b1", b1), lane("b2", 100 - p - b1)],
              armOf,
              salt,
              key,
            );
            expect(pick).not.toBeNull();
            expect(pick!.candidateShare).toBeCloseTo(p / 100, 12);
            if (was === "candidate") expect(pick!.arm).toBe("candidate");
            if (p === 0) expect(pick!.arm).toBe("control");
            if (p === 100) expect(pick!.arm).toBe("candidate");
            expect(armOf(pick!.lane)).toBe(pick!.arm);
            was = pick!.arm;
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it("puts about the candidate's share of units on it, and nothing when no lane takes traffic", () => {
    const lanes = [lane("c1", 10), lane("b1", 90)];
    let on = 0;
    for (let i = 0; i < 10_000; i++)
      if (stickyLane(lanes, armOf, "m", `u${i}`)!.arm === "candidate") on++;
    expect(on).toBeGreaterThan(900);
    expect(on).toBeLessThan(1100);
    expect(stickyLane([lane("c1", 10, true), lane("b1", 0)], armOf, "m", "u")).toBeNull();
    // Another salt is another slice of units.
    const a = Array.from({ length: 200 }, (_, i) => stickyLane(lanes, armOf, "r1", `u${i}`)!.arm);
    const b = Array.from({ length: 200 }, (_, i) => stickyLane(lanes, armOf, "r2", `u${i}`)!.arm);
    expect(a).not.toEqual(b);
  });
});
