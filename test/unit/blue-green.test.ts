/**
 * After a blue-green release (docs/recipes.md "Strategies"), the pure side: the old
 * environment is warm until the rollback window closes, then retired; the switch-back plan is
 * a health check of each blue lane through the runner's smoke step, then one traffic write to
 * the blue lanes and its read-back, undone by a write back to the weights observed when it
 * started; it keeps the recipe's policies.
 */
import { describe, expect, it } from "vitest";
import {
  blueWeights,
  oldEnvironment,
  switchBackCheckWords,
  switchBackPlan,
  switchBackRefusal,
} from "../../engine/src/domain/blue-green.ts";
import { compileRecipe } from "../../engine/src/domain/compile.ts";
import { laneImages } from "../../engine/src/domain/fleet.ts";
import { noRollbackTarget } from "../../engine/src/domain/lifecycle-states.ts";
import { Recipe, type RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { Manifest, ObservedBaseline, Release } from "../../engine/src/domain/types.ts";
import { desiredAfterSuccess } from "../../engine/src/domain/verification.ts";
import { goodRecipe, lane } from "./recipe-fixture.ts";

const HOUR = 3_600_000;

/** Lanes a, b blue (30/70), c, d green (0), the green lanes in one wave; a 2h window. */
function blueGreen(extra: Record<string, unknown> = {}): Manifest {
  const r = {
    ...goodRecipe(),
    strategy: "blue_green",
    lanes: [30, 70, 0, 0].map((w, i) => ({ ...lane(i), weight: w })),
    rollout: { waves: [{ lanes: ["lane-c", "lane-d"] }] },
    policy: { rollback_window: "2h" },
    ...extra,
  } as RecipeInput;
  return compileRecipe(Recipe.parse(r)).manifest;
}

/** A release of `m` in `state`, succeeded at `at`. */
function release(m: Manifest, state: Release["state"], at: number): Release {
  return { id: "r4", state, manifest: m, succeeded_at: at, updated_at: at } as unknown as Release;
}

/** The lanes as the control plane shows them after the switch. */
function switched(extra: Partial<ObservedBaseline["lanes"][number]> = {}): ObservedBaseline {
  const w: Record<string, number> = { "lane-a": 0, "lane-b": 0, "lane-c": 50, "lane-d": 50 };
  return {
    read_at: 0,
    recipe_manifest_digest: "x",
    lanes: Object.entries(w).map(([id, weight]) => ({
      id,
      weight,
      excluded: false,
      capabilities: [],
      advertised: false,
      ...(id === "lane-a" ? extra : {}),
    })),
  };
}

describe("blue-green: the old environment", () => {
  it("is warm until the rollback window closes, then retired", () => {
    const m = blueGreen();
    const at = 1_000_000;
    const env = (now: number) => oldEnvironment(release(m, "succeeded", at), now);
    expect(env(at + 2 * HOUR - 1)).toEqual({
      lanes: ["lane-a", "lane-b"],
      image: m.previous_image,
      state: "warm",
      until: at + 2 * HOUR,
    });
    expect(env(at + 2 * HOUR)?.state).toBe("retired");
    // Only a succeeded blue-green release has one.
    expect(oldEnvironment(release(m, "rolled_back", at), at)).toBeNull();
    const canary = compileRecipe(Recipe.parse(goodRecipe())).manifest;
    expect(oldEnvironment(release(canary, "succeeded", at), at)).toBeNull();
  });
});

describe("blue-green: the switch back", () => {
  it("checks each old-environment lane's health through the runner's smoke step, then is one set_traffic to the blue lanes' baseline weights and its read-back", () => {
    const m = blueGreen();
    const plan = switchBackPlan(m, switched());
    expect(plan?.steps.map((s) => [s.index, s.name, s.kind, s.lane])).toEqual([
      [0, "assert_smoke_passed", "runner", "lane-a"],
      [1, "assert_smoke_passed", "runner", "lane-b"],
      [2, "set_traffic", "control_plane", null],
      [3, "assert_traffic_observed", "control_plane", null],
    ]);
    // The health check is the recipe's own smoke step, on the old image, with nothing to undo.
    const [check, , write, read] = plan?.steps ?? [];
    expect(check?.forward).toMatchObject({
      kind: "runner",
      tool: "run-smoke",
      args: { lane: { id: "lane-a" }, image: m.previous_image },
    });
    expect(check?.backward).toBeNull();
    const blue = { "lane-a": 30, "lane-b": 70, "lane-c": 0, "lane-d": 0 };
    expect(write?.forward).toMatchObject({ request: { op: "set_traffic", weights: blue } });
    expect(read?.forward).toMatchObject({ request: { op: "assert_traffic", weights: blue } });
    // Its undo restores what it observed at its start (green serving), not the recipe.
    expect(write?.backward).toMatchObject({
      request: { weights: { "lane-a": 0, "lane-b": 0, "lane-c": 50, "lane-d": 50 } },
    });
    // The blue image is its image; its own old environment is the green lanes.
    expect(plan?.image).toBe(m.previous_image);
    expect(plan?.previous_image).toBe(m.image);
    expect(plan?.waves).toEqual([{ lanes: ["lane-a", "lane-b"], traffic: 100 }]);
    expect(switchBackPlan(compileRecipe(Recipe.parse(goodRecipe())).manifest, null)).toBeNull();
  });

  it("keeps every policy of the recipe: the rollback window and the drill schedule and age", () => {
    const m = blueGreen({
      policy: {
        rollback_window: "2h",
        drill_every_days: 7,
        drill_max_age_days: 30,
        drill_stale: "refuse",
      },
    });
    const plan = switchBackPlan(m, switched()) as Manifest;
    expect(plan.rollback_window_ms).toBe(2 * HOUR);
    expect(plan.drill_every_days).toBe(7);
    expect(plan.drill_policy).toEqual({ max_age_days: 30, on_stale: "refuse" });
  });

  it("a failed health check names the lane, says no traffic moved and what to do", () => {
    const m = blueGreen();
    const plan = switchBackPlan(m, switched()) as Manifest;
    const [check, , write] = plan.steps;
    const words = switchBackCheckWords(check as Manifest["steps"][number], "r4", "health 503");
    expect(words).toContain("lane lane-a of the old environment failed its health check");
    expect(words).toContain("so no traffic moved: health 503");
    expect(words).toContain(
      `redeploy ${m.previous_image} on lane-a and roll back again (baton rollback r4`,
    );
    expect(words).toContain("baton roll-forward r4");
    // Any other step keeps its own words.
    expect(switchBackCheckWords(write as Manifest["steps"][number], "r4", "x")).toBeNull();
    const smoke = m.steps.find((s) => s.name === "assert_smoke_passed");
    expect(smoke && switchBackCheckWords(smoke, "r4", "x")).toBeNull();
  });

  it("blue weights sum to 100 whatever the baseline", () => {
    const m = blueGreen({ lanes: [1, 1, 1, 97].map((w, i) => ({ ...lane(i), weight: w })) });
    expect(blueWeights(m)).toEqual({ "lane-a": 50, "lane-b": 50, "lane-c": 0, "lane-d": 0 });
  });

  it("is refused when a blue lane is excluded or runs another image", () => {
    const m = blueGreen();
    expect(switchBackRefusal(m, switched())).toBeNull();
    expect(switchBackRefusal(m, switched({ excluded: true }))).toBe(
      "lane lane-a of the old environment is excluded at the control plane",
    );
    const other = `ghcr.io/acme/summarizer:v5@sha256:${"5a".repeat(32)}`;
    expect(switchBackRefusal(m, switched({ image: other }))).toContain(`runs ${other}, not`);
  });

  it("leaves the old environment's lanes on its image and green on the candidate, with no deploy", () => {
    const m = blueGreen();
    const plan = switchBackPlan(m, switched()) as Manifest;
    const back = {
      id: "r5",
      state: "succeeded",
      manifest: plan,
      step_runs: [],
      lineage: { verb: "rollback", of: "r4", switch_back: true },
    } as unknown as Release;
    expect(laneImages(back).map((l) => [l.id, l.ref])).toEqual([
      ["lane-a", m.previous_image],
      ["lane-b", m.previous_image],
      ["lane-c", m.image],
      ["lane-d", m.image],
    ]);
  });
  it("its verification after success asks the old environment's lanes, now serving, at their machines for the blue image", () => {
    const m = blueGreen();
    const plan = switchBackPlan(m, switched()) as Manifest;
    const back = {
      id: "r5",
      state: "succeeded",
      manifest: plan,
      step_runs: [],
    } as unknown as Release;
    expect(desiredAfterSuccess(back).map((l) => [l.id, l.target, l.image, l.weight])).toEqual([
      ["lane-a", true, m.previous_image, 30],
      ["lane-b", true, m.previous_image, 70],
      ["lane-c", false, null, 0],
      ["lane-d", false, null, 0],
    ]);
  });
  it("a rollback after a switch back without a recipe of its own says what happened and names image", () => {
    const [v7, v8] = ["ghcr.io/acme/s:v7@sha256:07", "ghcr.io/acme/s:v8@sha256:08"];
    const words = noRollbackTarget("r3", "summarizer-v7", {
      id: "r2",
      of: "r1",
      image: v7,
      recipe: v8,
    });
    expect(words).toBe(
      `r3 cannot be rolled back: r2, the release before it, is a switch back of r1 that put ${v7} back on the lanes without a recipe of its own (no earlier release of summarizer-v7 kept a recipe deploying ${v7}, so it was admitted with r1's recipe, which deploys ${v8}); a rollback runs the previous release's recipe again, and r2's would deploy ${v8}, not ${v7}. To put ${v7} back, roll forward: write a recipe of summarizer-v7 whose \`image\` is ${v7}, sign it and start it (\`baton sign <recipe.yaml>\`, then \`baton start <recipe.yaml> --bundle <bundle.json>\`; where the trust policy asks for image provenance, also \`baton attest <recipe.yaml>\` and \`--attestation <provenance.json>\`)`,
    );
    // Without that release the first-release wording stays.
    expect(noRollbackTarget("r3", "summarizer-v7", null)).toContain(
      "there is no earlier admitted manifest of model summarizer-v7",
    );
  });
});
