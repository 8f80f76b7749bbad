/**
 * Properties of the contract check and compiler over generated recipes: any valid plan
 * compiles to a table that passes its own check, with absolute weights summing to 100 at every
 * traffic step and each backward traffic step restoring exactly the state before it; any
 * input at all gets problems, never an exception.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkAndCompile } from "../../engine/src/domain/compile.ts";
import { checkRecipe, checkStepTable } from "../../engine/src/domain/contract-check.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { goodRecipe, lane, laneId } from "./recipe-fixture.ts";

/** A valid recipe: n lanes split into consecutive waves, traffic non-decreasing to 100. */
const validRecipe = fc
  .integer({ min: 1, max: 24 })
  .chain((n) =>
    fc.record({
      n: fc.constant(n),
      cuts: fc.uniqueArray(fc.integer({ min: 1, max: Math.max(1, n - 1) }), { maxLength: n - 1 }),
      percents: fc.array(fc.integer({ min: 0, max: 99 }), { minLength: n, maxLength: n }),
      weights: fc.option(
        fc.array(fc.integer({ min: 0, max: 10 }), { minLength: n, maxLength: n }),
        {
          nil: undefined,
        },
      ),
    }),
  )
  .map(({ n, cuts, percents, weights }): RecipeInput => {
    const bounds = [0, ...cuts.filter((c) => c < n).sort((a, b) => a - b), n];
    const ids = Array.from({ length: n }, (_, i) => laneId(i));
    const waves = [];
    const ps = percents.slice(0, bounds.length - 2).sort((a, b) => a - b);
    for (let w = 0; w < bounds.length - 1; w++) {
      waves.push({
        lanes: ids.slice(bounds[w], bounds[w + 1]),
        traffic: w === bounds.length - 2 ? 100 : (ps[w] ?? 0),
      });
    }
    let lanes = ids.map((_, i) => lane(i));
    if (weights) {
      // Scale to sum exactly 100: give the remainder to lane 0.
      const sum = weights.reduce((a, b) => a + b, 0) || 1;
      const scaled = weights.map((w) => Math.floor((w * 100) / sum));
      scaled[0] = (scaled[0] ?? 0) + 100 - scaled.reduce((a, b) => a + b, 0);
      lanes = lanes.map((l, i) => ({ ...l, weight: scaled[i] ?? 0 }));
    }
    return { ...goodRecipe(), lanes, rollout: { waves } };
  });

describe("compile properties", () => {
  it("every valid recipe compiles to a table that passes checkStepTable", () => {
    fc.assert(
      fc.property(validRecipe, (recipe) => {
        const res = checkAndCompile(recipe);
        if (!res.ok) throw new Error(JSON.stringify(res.problems));
        const { steps, lanes, waves } = res.manifest;
        expect(checkStepTable(steps)).toEqual([]);
        // One drain_wave per wave, except a first wave that takes every lane out at once.
        const outage = waves[0]!.lanes.length === lanes.length ? 1 : 0;
        expect(steps).toHaveLength(lanes.length * 5 + waves.length * 3 - outage);
        const baseline = Object.fromEntries(lanes.map((l) => [l.id, l.baseline_weight]));
        expect(Object.values(baseline).reduce((a, b) => a + b, 0)).toBe(100);
        let before = baseline;
        const deployed = new Set<string>();
        for (const s of steps) {
          if (s.name === "attach_queue_lane" && s.lane) deployed.add(s.lane);
          if (s.name !== "set_traffic" && s.name !== "drain_wave") continue;
          if (s.forward.kind !== "control_plane" || s.forward.request.op !== "set_traffic")
            throw new Error();
          if (s.backward?.kind !== "control_plane" || s.backward.request.op !== "set_traffic")
            throw new Error();
          const after = s.forward.request.weights;
          expect(Object.values(after).reduce((a, b) => a + b, 0)).toBe(100);
          // The candidate image's share is exactly the step's percent, never above the
          // declared percent of the wave in force; lanes being redeployed carry 0.
          const onNew = [...deployed].reduce((a, id) => a + (after[id] ?? 0), 0);
          expect(onNew).toBe(s.forward.request.percent);
          expect(s.forward.request.percent).toBeLessThanOrEqual(waves[s.wave]!.traffic);
          if (s.name === "drain_wave")
            for (const id of waves[s.wave]!.lanes) expect(after[id]).toBe(0);
          expect(s.backward.request.weights).toEqual(before);
          before = after;
        }
        expect(deployed.size).toBe(lanes.length);
      }),
      { numRuns: 300 },
    );
  });

  it("any input gets a result, never an exception", () => {
    fc.assert(
      fc.property(fc.anything(), (input) => {
        const res = checkAndCompile(input);
        if (!res.ok) {
          for (const p of res.problems) {
            expect(typeof p.path).toBe("string");
            expect(p.fix.length).toBeGreaterThan(0);
          }
        }
      }),
      { numRuns: 500 },
    );
  });

  it("a good recipe with one field replaced by anything gets a result, never an exception", () => {
    const paths: (string | number)[][] = [
      ["name"],
      ["image"],
      ["lanes"],
      ["lanes", 0],
      ["lanes", 0, "id"],
      ["lanes", 1, "host_key"],
      ["lanes", 2, "weight"],
      ["rollout"],
      ["rollout", "waves"],
      ["rollout", "waves", 0],
      ["rollout", "waves", 1, "lanes"],
      ["rollout", "waves", 1, "lanes", 0],
      ["rollout", "waves", 2, "traffic"],
      ["policy"],
      ["policy", "steps"],
      ["deadlines"],
    ];
    fc.assert(
      fc.property(fc.constantFrom(...paths), fc.anything(), (path, value) => {
        const r = structuredClone(goodRecipe()) as Record<string | number, unknown>;
        let cur = r as Record<string | number, unknown>;
        for (const k of path.slice(0, -1)) {
          const next = cur[k];
          if (next === null || typeof next !== "object") {
            cur[k] = {};
          }
          cur = cur[k] as Record<string | number, unknown>;
        }
        cur[path.at(-1)!] = value;
        const res = checkRecipe(r);
        expect(typeof res.ok).toBe("boolean");
        if (res.ok) checkAndCompile(r);
      }),
      { numRuns: 500 },
    );
  });
});
