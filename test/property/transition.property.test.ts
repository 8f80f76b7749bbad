/**
 * Property tests over generated interleavings (fast-check): duplicate, late, reordered and
 * older-attempt callbacks, duplicate and lost dispatch deliveries, aborts, resumes, retries,
 * deadlines firing early, control-plane timeouts with requests landing late, and engine
 * crashes between commit and effect. The simulator (test/support/sim) is pure; invariants
 * are checked after every run. Runs: 1,000 per property when CI=true, else
 * BATON_PROPERTY_RUNS (default 150).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { newRelease } from "../../engine/src/domain/transition.ts";
import type { Release } from "../../engine/src/domain/types.ts";
import { compileRecipeText } from "../../engine/src/recipes/compile-text.ts";
import { f15Specs, type StepSpec, waveSpecs } from "../support/manifest-fixture.ts";
import { release, T0 } from "../support/sim/drive.ts";
import { finalViolations } from "../support/sim/invariants.ts";
import { type Command, World } from "../support/sim/world.ts";

const RUNS = process.env.CI === "true" ? 1000 : Number(process.env.BATON_PROPERTY_RUNS ?? 150);
/** Bound on simulator steps after the generated commands (liveness). */
const DRAIN_STEPS = 3000;

const command: fc.Arbitrary<Command> = fc.record({
  k: fc.nat({ max: 19 }),
  a: fc.nat({ max: 1000 }),
  b: fc.nat({ max: 1000 }),
});

const example = compileRecipeText(
  readFileSync(join(import.meta.dirname, "../../recipes/example.yaml"), "utf8"),
  "example.yaml",
);

/** Step tables: hand-built (policy varied by the generator) and the compiled example recipe. */
const tables: Record<string, (o: Partial<StepSpec>) => Release> = {
  wave: (o) => release(waveSpecs(10, o)),
  f15: (o) => release(f15Specs().map((s) => ({ ...s, ...o }))),
  example: () => newRelease("r17", 17, example.manifest, example.manifest_digest, T0),
};

const scenario = fc.record({
  table: fc.constantFrom("wave", "f15", "example"),
  retries: fc.constantFrom(0, 0, 1),
  on_failure: fc.constantFrom<"compensate" | "pause">("compensate", "compensate", "pause"),
  commands: fc.array(command, { minLength: 10, maxLength: 160, size: "max" }),
});

type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

function simulate(s: Scenario) {
  const w = new World(tables[s.table]!({ retries: s.retries, on_failure: s.on_failure }), T0);
  w.commit({ type: "start" });
  for (const c of s.commands) w.apply(c);
  const steps = w.drain(DRAIN_STEPS);
  return { w, steps };
}

describe("transition properties (simulated world)", () => {
  it("safety: at most once per key, one run per attempt, no forward after abort, compensation complete; liveness: ends within the bound", () => {
    const endStates = new Map<string, number>();
    fc.assert(
      fc.property(scenario, (s) => {
        const { w, steps } = simulate(s);
        endStates.set(w.release.state, (endStates.get(w.release.state) ?? 0) + 1);
        const problems = finalViolations(w);
        if (steps < 0)
          problems.push(
            `no terminal state within ${DRAIN_STEPS} steps: ${w.release.state} at step ${w.release.cursor}`,
          );
        if (problems.length > 0) throw new Error(problems.join("\n"));
      }),
      {
        numRuns: RUNS,
        seed: process.env.BATON_PROPERTY_SEED ? Number(process.env.BATON_PROPERTY_SEED) : undefined,
      },
    );
    // The generator must reach every ending, or the properties above prove little.
    for (const st of ["succeeded", "rolled_back", "aborted"])
      expect(
        endStates.get(st) ?? 0,
        `${st} never reached: ${JSON.stringify([...endStates])}`,
      ).toBeGreaterThan(0);
  });

  it("terminal states never change: every event replayed to a finished release changes nothing", () => {
    fc.assert(
      fc.property(scenario, fc.array(command, { maxLength: 40 }), (s, more) => {
        const { w } = simulate(s);
        const final = w.release;
        for (const c of more) w.apply(c);
        if (w.violations.length > 0) throw new Error(w.violations.join("\n"));
        expect(w.release.state).toBe(final.state);
        expect(w.release.resource_version).toBe(final.resource_version);
      }),
      { numRuns: Math.max(10, Math.floor(RUNS / 4)) },
    );
  });
});
