/**
 * Custom steps (docs/recipes.md "Custom steps"): the contract check's refusals, each naming
 * the field and the fix, and the rows the compiler places in the step table (by name, runner
 * tools both ways, in the manifest and its digest, an irreversible one a recovery boundary).
 */
import { describe, expect, it } from "vitest";
import { checkAndCompile, compileRecipe } from "../../engine/src/domain/compile.ts";
import { checkStepTable } from "../../engine/src/domain/contract-check.ts";
import type { Problem } from "../../engine/src/domain/errors.ts";
import { Recipe, type RecipeInput } from "../../engine/src/domain/recipe.ts";
import { manifestDigest } from "../../engine/src/recipes/digest.ts";
import { stepAction } from "../../engine/src/views/summary.ts";
import { goodRecipe } from "./recipe-fixture.ts";

type CustomInput = NonNullable<RecipeInput["custom_steps"]>[number];

/** The fixture recipe (lane-a, lane-b, lane-c in three waves) with `steps` declared. */
function withSteps(...steps: CustomInput[]): RecipeInput {
  return { ...goodRecipe(), custom_steps: steps };
}

const warm: CustomInput = {
  name: "warm_cache",
  forward: "run-smoke",
  backward: "inspect-lane",
  placement: { after: "attach_queue_lane" },
  inputs: { cache: "kv", size_mb: 512 },
  needs_drained: true,
};

function problems(r: RecipeInput): Problem[] {
  const out = checkAndCompile(r);
  return out.ok ? [] : out.problems;
}

/** The one problem at `path`; fails the test when there is none or more than one. */
function problemAt(r: RecipeInput, path: string): Problem {
  const at = problems(r).filter((p) => p.path === path);
  expect(at, JSON.stringify(problems(r))).toHaveLength(1);
  return at[0]!;
}

describe("custom steps: the contract check refuses", () => {
  it("a forward or backward tool that is not allowlisted, naming the field and the allowlist", () => {
    const fwd = problemAt(withSteps({ ...warm, forward: "warm-cache" }), "custom_steps.0.forward");
    expect(fwd.message).toContain("`warm-cache`");
    expect(fwd.message).toContain("not in the allowlist");
    expect(fwd.fix).toContain("scripts/release/allowlist.json");
    expect(fwd.fix).toContain("run-smoke");
    const bwd = problemAt(
      withSteps({ ...warm, backward: "drop-cache" }),
      "custom_steps.0.backward",
    );
    expect(bwd.message).toContain("`drop-cache`");
  });

  it("a step with no backward tool that is not declared irreversible", () => {
    const { backward: _none, ...noUndo } = warm;
    const p = problemAt(withSteps(noUndo), "custom_steps.0.backward");
    expect(p.message).toBe(
      "custom step `warm_cache` has no backward tool, so compensation could not undo it",
    );
    expect(p.fix).toContain("irreversible: true");
    // Declared irreversible, it compiles (and is a recovery boundary, below).
    expect(problems(withSteps({ ...noUndo, irreversible: true }))).toEqual([]);
  });

  it("needs_drained placed where its lanes serve traffic (before exclude_lane, after include_lane, by a wave step)", () => {
    for (const placement of [
      { before: "exclude_lane" },
      { after: "include_lane" },
      { after: "set_traffic" },
      { before: "drain_wave" },
    ] as const) {
      const side = "before" in placement ? "before" : "after";
      const p = problemAt(withSteps({ ...warm, placement }), `custom_steps.0.placement.${side}`);
      expect(p.message).toContain("needs_drained");
      expect(p.message).toContain("serving traffic");
      expect(p.fix).toContain("between exclude_lane and include_lane");
    }
    // Between exclude_lane and include_lane it is accepted; without needs_drained anywhere.
    for (const placement of [
      { after: "exclude_lane" },
      { before: "include_lane" },
      { after: "assert_smoke_passed" },
    ] as const)
      expect(problems(withSteps({ ...warm, placement }))).toEqual([]);
    const { needs_drained: _n, ...serving } = warm;
    expect(problems(withSteps({ ...serving, placement: { after: "set_traffic" } }))).toEqual([]);
  });

  it("a name of a built-in step, a duplicate name, a placement with both or neither side, unknown waves and lanes", () => {
    expect(
      problemAt(withSteps({ ...warm, name: "set_traffic" }), "custom_steps.0.name").fix,
    ).toContain("warm_cache");
    expect(problemAt(withSteps(warm, warm), "custom_steps.1.name").message).toContain("duplicate");
    expect(
      problemAt(
        withSteps({ ...warm, placement: { before: "include_lane", after: "exclude_lane" } }),
        "custom_steps.0.placement",
      ).fix,
    ).toContain("exactly one");
    expect(
      problemAt(withSteps({ ...warm, placement: {} }), "custom_steps.0.placement").message,
    ).toContain("neither");
    expect(
      problemAt(
        withSteps({ ...warm, placement: { after: "exclude_lane", waves: [4] } }),
        "custom_steps.0.placement.waves.0",
      ).message,
    ).toContain("the rollout has 3 wave(s)");
    expect(
      problemAt(
        withSteps({ ...warm, placement: { after: "exclude_lane", lanes: ["lane-z"] } }),
        "custom_steps.0.placement.lanes.0",
      ).message,
    ).toContain("not a lane of this recipe");
    expect(
      problemAt(
        withSteps({ ...warm, placement: { after: "exclude_lane", waves: [1], lanes: ["lane-b"] } }),
        "custom_steps.0.placement.lanes.0",
      ).fix,
    ).toContain("Add 2 to `placement.waves`");
  });

  it("inputs too large for a dispatch payload, naming the field", () => {
    const inputs = Object.fromEntries(
      Array.from({ length: 20 }, (_, k) => [`part_${k}`, "x".repeat(1000)]),
    );
    const p = problemAt(withSteps({ ...warm, inputs }), "custom_steps.0.inputs");
    expect(p.message).toContain("64 KiB");
    expect(p.fix).toContain("16384 bytes");
  });

  it("an irreversible step with a backward tool, or with a reversible recovery class", () => {
    expect(
      problemAt(withSteps({ ...warm, irreversible: true }), "custom_steps.0.irreversible").fix,
    ).toContain("Remove");
    const { backward: _none, ...noUndo } = warm;
    const p = problemAt(
      { ...withSteps({ ...noUndo, irreversible: true }), recovery_class: "reversible" },
      "custom_steps.0.irreversible",
    );
    expect(p.fix).toContain("roll_forward_only");
  });

  it("a hand-made table whose irreversible custom step has a backward step, or a custom step without backward not declared irreversible", () => {
    const { manifest } = compileRecipe(Recipe.parse(withSteps(warm)));
    const i = manifest.steps.findIndex((s) => s.name === "warm_cache");
    const steps = structuredClone(manifest.steps);
    steps[i] = { ...steps[i]!, custom: { irreversible: true } };
    expect(checkStepTable(steps).map((p) => p.path)).toEqual([`steps.${i}.backward`]);
    steps[i] = { ...steps[i]!, custom: {}, backward: null };
    expect(checkStepTable(steps).map((p) => p.path)).toEqual([`steps.${i}.backward`]);
  });
});

describe("custom steps: the compiled table", () => {
  it("places a lane step in each lane's block right after its anchor, a runner step both ways with the inputs", () => {
    const { manifest } = compileRecipe(Recipe.parse(withSteps(warm)));
    const labels = manifest.steps.map((s) => `${s.name}:${s.lane ?? "-"}`);
    for (const lane of ["lane-a", "lane-b", "lane-c"]) {
      const at = labels.indexOf(`attach_queue_lane:${lane}`);
      expect(labels[at + 1]).toBe(`warm_cache:${lane}`);
    }
    const step = manifest.steps.find((s) => s.name === "warm_cache" && s.lane === "lane-b")!;
    expect(step.kind).toBe("runner");
    expect(step.custom).toEqual({ needs_drained: true });
    expect(step.forward).toMatchObject({
      kind: "runner",
      name: "warm_cache",
      tool: "run-smoke",
      target: "lane=lane-b:step=warm_cache",
    });
    expect(step.backward).toMatchObject({
      kind: "runner",
      name: "undo_warm_cache",
      tool: "inspect-lane",
    });
    expect(step.forward.kind === "runner" && step.forward.args.inputs).toEqual({
      cache: "kv",
      size_mb: 512,
    });
    expect(step.backward?.kind === "runner" && step.backward.args.step).toMatchObject({
      name: "warm_cache",
      direction: "backward",
    });
  });

  it("places a wave step once per lane of the listed waves, right before its anchor, as a wave row", () => {
    const { manifest } = compileRecipe(
      Recipe.parse(
        withSteps({
          name: "register_discovery",
          forward: "run-smoke",
          backward: "inspect-lane",
          placement: { before: "set_traffic", waves: [2] },
          timeout_ms: 60_000,
          retries: 2,
        }),
      ),
    );
    const rows = manifest.steps.filter((s) => s.name === "register_discovery");
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    expect(row).toMatchObject({ lane: null, wave: 1, retries: 2, callback_deadline_ms: 60_000 });
    expect(manifest.steps[row.index + 1]?.name).toBe("set_traffic");
    expect(row.forward.kind === "runner" && (row.forward.args.lane as { id: string }).id).toBe(
      "lane-b",
    );
    // The dashboard and the CLI name it with the lane it runs for, both ways.
    expect(stepAction(row)).toBe("register discovery · lane-b");
    expect(stepAction(row, "bwd")).toBe("undo register discovery · lane-b");
  });

  it("is part of the manifest's digest; recipes without custom steps keep theirs", () => {
    const plain = compileRecipe(Recipe.parse(goodRecipe()));
    const plainAgain = compileRecipe(Recipe.parse({ ...goodRecipe(), custom_steps: [] }));
    expect(manifestDigest(plainAgain.canonical)).toBe(manifestDigest(plain.canonical));
    expect(plain.canonical).not.toContain('"custom"');
    const one = compileRecipe(Recipe.parse(withSteps(warm)));
    const other = compileRecipe(
      Recipe.parse(withSteps({ ...warm, inputs: { cache: "kv", size_mb: 1024 } })),
    );
    expect(manifestDigest(one.canonical)).not.toBe(manifestDigest(plain.canonical));
    expect(manifestDigest(other.canonical)).not.toBe(manifestDigest(one.canonical));
  });

  it("makes an irreversible step a recovery boundary: roll_forward_only after its first row", () => {
    const { backward: _none, ...noUndo } = warm;
    const { manifest } = compileRecipe(
      Recipe.parse(
        withSteps({
          ...noUndo,
          irreversible: true,
          placement: { after: "attach_queue_lane", lanes: ["lane-b"] },
        }),
      ),
    );
    const row = manifest.steps.find((s) => s.name === "warm_cache")!;
    expect(row.backward).toBeNull();
    expect(row.custom).toEqual({ irreversible: true, needs_drained: true });
    expect(manifest.recovery).toEqual({ class: "roll_forward_only", unsafe_after: row.index });
    // An earlier declared unsafe_after stays the boundary.
    const earlier = compileRecipe(
      Recipe.parse({
        ...withSteps({
          ...noUndo,
          irreversible: true,
          placement: { after: "attach_queue_lane", lanes: ["lane-b"] },
        }),
        recovery_class: "roll_forward_only",
        unsafe_after: { step: "attach_queue_lane", lane: "lane-a" },
      }),
    ).manifest;
    const a = earlier.steps.find((s) => s.name === "attach_queue_lane" && s.lane === "lane-a")!;
    expect(earlier.recovery).toEqual({ class: "roll_forward_only", unsafe_after: a.index });
  });
});
