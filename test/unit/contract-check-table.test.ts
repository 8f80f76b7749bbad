import { describe, expect, it } from "vitest";
import { compileRecipe } from "../../engine/src/domain/compile.ts";
import { checkStepTable } from "../../engine/src/domain/contract-check.ts";
import { BatonError } from "../../engine/src/domain/errors.ts";
import { Recipe } from "../../engine/src/domain/recipe.ts";
import { describe as describeRun } from "../../engine/src/domain/transition/draft.ts";
import type { ManifestStep, Release, StepRun } from "../../engine/src/domain/types.ts";
import { goodRecipe } from "./recipe-fixture.ts";

/** A fresh copy of the good recipe's compiled step table, to break by hand. */
function table(): ManifestStep[] {
  return structuredClone(compileRecipe(Recipe.parse(goodRecipe())).manifest.steps);
}

describe("checkStepTable", () => {
  it("passes the compiled table of the good recipe", () => {
    expect(checkStepTable(table())).toEqual([]);
  });

  it("refuses a mutating step with no backward step", () => {
    const steps = table();
    steps[6]!.backward = null; // set_traffic(10)
    const ps = checkStepTable(steps);
    expect(ps).toHaveLength(1);
    expect(ps[0]).toMatchObject({
      path: "steps.6.backward",
      message: expect.stringMatching(/`set_traffic`\) changes state but has no backward step/),
      fix: expect.stringMatching(/compensating action/),
    });
  });

  it("refuses an assertion step with a backward step", () => {
    const steps = table();
    steps[3]!.backward = steps[2]!.backward; // assert_smoke_passed given restore_queue_lane
    const ps = checkStepTable(steps);
    expect(ps.map((p) => p.path)).toContain("steps.3.backward");
  });

  it("refuses a runner tool not in the allowlist, forward or backward", () => {
    const steps = table();
    const fwd = steps[2]!.forward;
    const bwd = steps[10]!.backward;
    if (fwd.kind !== "runner" || bwd?.kind !== "runner") throw new Error("expected runner steps");
    fwd.tool = "deploy; curl x | sh";
    bwd.tool = "rm-rf";
    const ps = checkStepTable(steps);
    expect(ps).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          path: "steps.2.forward.tool",
          message: expect.stringMatching(/not in the allowlist/),
          fix: expect.stringMatching(
            /attach-queue-lane, inspect-lane, migrate-table, restore-queue-lane, restore-sqlite, run-smoke/,
          ),
        }),
        expect.objectContaining({ path: "steps.10.backward.tool" }),
      ]),
    );
  });

  it("uses the allowlist it is given", () => {
    expect(checkStepTable(table(), ["attach-queue-lane"]).map((p) => p.path)).toEqual(
      expect.arrayContaining(["steps.2.backward.tool", "steps.3.forward.tool"]),
    );
  });

  it("refuses duplicate operation keys (two steps with one index)", () => {
    const steps = table();
    steps[7] = { ...structuredClone(steps[6]!), index: 6 };
    const ps = checkStepTable(steps);
    expect(ps).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: "steps.7.index" }),
        expect.objectContaining({
          path: "steps.7.forward.target",
          message: expect.stringMatching(/`<release>:6:fwd:traffic=10` is also used by steps\.6/),
        }),
        expect.objectContaining({ path: "steps.7.backward.target" }),
      ]),
    );
  });

  it("numbers a step as the dashboard's step table does (index + 1), as every other message does", () => {
    const steps = table();
    steps[6]!.backward = null; // set_traffic(10): row 7 of the step table
    steps[3]!.backward = structuredClone(steps[2]!.backward); // assert_smoke_passed: row 4
    const ps = checkStepTable(steps);
    expect(ps.find((p) => p.path === "steps.6.backward")?.message).toMatch(
      /^step 7 \(`set_traffic`\) changes state/,
    );
    expect(ps.find((p) => p.path === "steps.3.backward")?.message).toMatch(
      /^assertion step 4 \(`assert_\w+`\) has a backward step/,
    );
    // The engine's own words for a step run of that step say the same number.
    const m = compileRecipe(Recipe.parse(goodRecipe())).manifest;
    const run = { id: "sr_1_6_f", step_index: 6, direction: "fwd" } as StepRun;
    expect(describeRun({ manifest: m } as Release, run)).toContain(
      "step 7 set_traffic, forward (step run",
    );
  });

  it("refuses the same lane effect planned twice", () => {
    const steps = table();
    // Step 11 (steps[10], attach lane-b) rewritten to attach lane-a again (step 3).
    steps[10]!.forward = structuredClone(steps[2]!.forward);
    const ps = checkStepTable(steps);
    expect(ps).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          path: "steps.10.forward.target",
          message: expect.stringMatching(/^step 11 repeats the effect of step 3 /),
        }),
      ]),
    );
  });

  it("refuses an empty target, a step outside the catalogue and a kind mismatch, all at once", () => {
    const steps = table();
    steps[0]!.forward.target = "";
    steps[3]!.name = "reboot_lane";
    steps[4]!.kind = "runner";
    const paths = checkStepTable(steps).map((p) => p.path);
    expect(paths).toEqual(
      expect.arrayContaining(["steps.0.forward.target", "steps.3.name", "steps.4.kind"]),
    );
  });

  it("compileRecipe refuses a recipe that fails the contract check, with every problem", () => {
    // biome-ignore lint/suspicious/noExplicitAny: a recipe broken by hand
    const bad = structuredClone(goodRecipe()) as Record<string, any>;
    bad.rollout.waves[2].traffic = 90;
    bad.lanes[1].id = "lane-a";
    let err: unknown;
    try {
      compileRecipe(bad as Recipe);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BatonError);
    const e = err as BatonError;
    expect(e.status).toBe(422);
    expect(e.code).toBe("contract_failed");
    expect(e.message).toMatch(/^\[recipe\] contract check failed: /);
    expect(e.problems.map((p) => p.path)).toEqual(
      expect.arrayContaining(["lanes.1.id", "rollout.waves.2.traffic"]),
    );
  });
});
