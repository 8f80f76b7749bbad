/**
 * Strategies, compile side (docs/recipes.md "Strategies"): `canary` is today's manifest byte for
 * byte; `rolling` and `blue_green` compile to the same step kinds, with the percents derived
 * from the strategy, and the contract check refuses what makes no sense for each.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkAndCompile, compileRecipe } from "../../engine/src/domain/compile.ts";
import { Recipe, type RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { Manifest, ManifestStep } from "../../engine/src/domain/types.ts";
import { compileRecipeText } from "../../engine/src/recipes/compile-text.ts";
import { manifestDigest } from "../../engine/src/recipes/digest.ts";
import { goodRecipe, lane } from "./recipe-fixture.ts";

const ROOT = join(import.meta.dirname, "../..");
const read = (f: string) => readFileSync(join(ROOT, f), "utf8");

/** The weights a control-plane traffic write sets, or null for other steps. */
function weightsOf(a: ManifestStep["forward"] | null): Record<string, number> | null {
  if (a?.kind !== "control_plane") return null;
  return a.request.op === "set_traffic" ? a.request.weights : null;
}

/** Four lanes with the given baseline weights, in the given batches (lane letters). */
function rolling(weights: number[], batches: string[][], extra: Record<string, unknown> = {}) {
  return {
    ...goodRecipe(),
    strategy: "rolling",
    lanes: weights.map((w, i) => ({ ...lane(i), weight: w })),
    rollout: { waves: batches.map((b) => ({ lanes: b.map((c) => `lane-${c}`) })) },
    ...extra,
  } as RecipeInput;
}

/** Lanes a, b blue (50/50), c, d green (0), the green lanes in one wave. */
function blueGreen(extra: Record<string, unknown> = {}): RecipeInput {
  return {
    ...goodRecipe(),
    strategy: "blue_green",
    lanes: [50, 50, 0, 0].map((w, i) => ({ ...lane(i), weight: w })),
    rollout: { waves: [{ lanes: ["lane-c", "lane-d"], max_unavailable: 2 }] },
    ...extra,
  } as RecipeInput;
}

const problemsOf = (input: unknown) => {
  const r = checkAndCompile(input);
  return r.ok ? [] : r.problems;
};

describe("strategies: compile", () => {
  it("canary (the default): the example recipes' manifests and digests are unchanged, and spelling out canary changes nothing", () => {
    // Digests of the recipes as compiled before strategies existed.
    const pinned: Record<string, string> = {
      "recipes/example.yaml": "7463f58dd39d7293fd98451ea4c51a9049a83d2df23e3759422f8967d9482498",
      "recipes/gated.yaml": "1129234683ad6ed40267216c3746a26d1d19235b2860d68796825a326252e21e",
    };
    for (const [file, digest] of Object.entries(pinned)) {
      const text = read(file);
      const c = compileRecipeText(text, file);
      expect(manifestDigest(c.canonical)).toBe(digest);
      expect(c.canonical).not.toContain("strategy");
      const spelled = compileRecipeText(text.replace(/^model:/m, "strategy: canary\nmodel:"), file);
      expect(spelled.canonical).toBe(c.canonical);
    }
  });

  it("rolling: each batch's percent is its deployed lanes' share of capacity; every lane carries its baseline weight after each batch", () => {
    const m = compileRecipe(
      Recipe.parse(rolling([40, 30, 20, 10], [["a"], ["b", "c"], ["d"]])),
    ).manifest;
    expect(m.strategy).toBe("rolling");
    expect(m.waves.map((w) => w.traffic)).toEqual([40, 90, 100]);
    const baseline = { "lane-a": 40, "lane-b": 30, "lane-c": 20, "lane-d": 10 };
    for (const s of m.steps.filter((s) => s.name === "set_traffic"))
      expect(weightsOf(s.forward)).toEqual(baseline);
    // At every forward traffic write (drain and set), the lanes on the new image carry at most
    // their share of the capacity in service (baseline weights of the lanes not excluded): no
    // split beyond capacity. The last batch's drain leaves only new-image lanes serving.
    const deployed = new Set<string>();
    const out = new Set<string>();
    const cap = (ids: Iterable<string>) =>
      [...ids].reduce((a, id) => a + baseline[id as keyof typeof baseline], 0);
    let writes = 0;
    for (const s of m.steps) {
      // A batch leaves service at its drain (weight 0), then its lanes are excluded.
      if (s.name === "drain_wave") for (const id of m.waves[s.wave]?.lanes ?? []) out.add(id);
      if (s.name === "include_lane" && s.lane) out.delete(s.lane);
      if (s.name === "attach_queue_lane" && s.lane) deployed.add(s.lane);
      const w = weightsOf(s.forward);
      if (!w) continue;
      writes++;
      const serving = Object.keys(baseline).filter((id) => !out.has(id));
      const candidate = Object.entries(w)
        .filter(([id]) => deployed.has(id))
        .reduce((a, [, v]) => a + v, 0);
      const candidateCap = cap(serving.filter((id) => deployed.has(id)));
      expect(candidate * cap(serving)).toBeLessThanOrEqual(candidateCap * 100);
      for (const id of out) expect(w[id]).toBe(0);
    }
    expect(writes).toBe(6);
  });

  it("rolling reuses the canary table: same step names, lanes and operation keys for the same waves at those percents", () => {
    const r = rolling(
      [25, 25, 25, 25],
      [
        ["a", "b"],
        ["c", "d"],
      ],
    );
    const asCanary = {
      ...r,
      strategy: "canary",
      rollout: {
        waves: [
          { lanes: ["lane-a", "lane-b"], traffic: 50 },
          { lanes: ["lane-c", "lane-d"], traffic: 100 },
        ],
      },
    };
    const a = compileRecipe(Recipe.parse(r)).manifest;
    const b = compileRecipe(Recipe.parse(asCanary)).manifest;
    expect(a.steps).toEqual(b.steps);
    expect(b.strategy).toBeUndefined();
  });

  it("rolling with an analysis: every batch below 100% is gated", () => {
    const analysis = {
      metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.01 } }],
    };
    const r = rolling([25, 25, 25, 25], [["a"], ["b", "c"], ["d"]], { analysis });
    const m = compileRecipe(Recipe.parse(r)).manifest;
    expect(m.waves.map((w) => w.traffic)).toEqual([25, 75, 100]);
    expect(m.waves.map((w) => w.analysis !== undefined)).toEqual([true, true, false]);
  });

  it("rolling: max_unavailable per batch and min_serving are the parallel-wave limits", () => {
    const r = rolling(
      [25, 25, 25, 25],
      [
        ["a", "b"],
        ["c", "d"],
      ],
      { min_serving: 3 },
    );
    for (const w of r.rollout?.waves ?? []) Object.assign(w, { max_unavailable: 2 });
    const m = compileRecipe(Recipe.parse(r)).manifest;
    // 4 lanes, 3 stay in service: one lane at a time, so no max_unavailable is written.
    expect(m.waves.map((w) => w.max_unavailable)).toEqual([undefined, undefined]);
    const m2 = compileRecipe(Recipe.parse({ ...r, min_serving: 2 })).manifest;
    expect(m2.waves.map((w) => w.max_unavailable)).toEqual([2, 2]);
  });

  it("blue_green: green is deployed dark, one write switches every request, blue is never touched", () => {
    const m: Manifest = compileRecipe(Recipe.parse(blueGreen())).manifest;
    expect(m.strategy).toBe("blue_green");
    expect(m.waves.map((w) => w.traffic)).toEqual([100]);
    // The blue lanes appear in no step: never excluded, never redeployed (warm on v6).
    expect(m.steps.filter((s) => s.lane === "lane-a" || s.lane === "lane-b")).toEqual([]);
    const writes = m.steps.filter((s) => weightsOf(s.forward) !== null);
    const sets = writes.filter((s) => s.name === "set_traffic");
    expect(sets).toHaveLength(1);
    const sw = sets[0] as ManifestStep;
    // Before the switch, green carries nothing; the switch moves everything in one write, and
    // its backward write is the one switch back.
    for (const s of writes.filter((s) => s.index < sw.index))
      expect(weightsOf(s.forward)).toMatchObject({ "lane-c": 0, "lane-d": 0 });
    expect(weightsOf(sw.forward)).toEqual({ "lane-a": 0, "lane-b": 0, "lane-c": 50, "lane-d": 50 });
    expect(weightsOf(sw.backward)).toEqual({
      "lane-a": 50,
      "lane-b": 50,
      "lane-c": 0,
      "lane-d": 0,
    });
    // Every green lane passed its smoke check before the switch.
    for (const id of ["lane-c", "lane-d"]) {
      const smoke = m.steps.find((s) => s.name === "assert_smoke_passed" && s.lane === id);
      expect(smoke?.index).toBeLessThan(sw.index);
    }
  });

  it("blue_green with a canary phase: green beside blue at the declared percent, gated, then the switch", () => {
    const analysis = {
      metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.01 } }],
    };
    const r = blueGreen({
      lanes: [50, 50, 0, 0, 0].map((w, i) => ({ ...lane(i), weight: w })),
      rollout: {
        waves: [
          { lanes: ["lane-c"], traffic: 10 },
          { lanes: ["lane-d"] }, // keeps 10%: lane-d deployed dark beside the canary
          { lanes: ["lane-e"] },
        ],
      },
      analysis,
    });
    const m = compileRecipe(Recipe.parse(r)).manifest;
    expect(m.waves.map((w) => w.traffic)).toEqual([10, 10, 100]);
    expect(m.waves.map((w) => w.analysis !== undefined)).toEqual([true, true, false]);
    const sets = m.steps.filter((s) => s.name === "set_traffic").map((s) => weightsOf(s.forward));
    expect(sets).toEqual([
      { "lane-a": 45, "lane-b": 45, "lane-c": 10, "lane-d": 0, "lane-e": 0 },
      { "lane-a": 45, "lane-b": 45, "lane-c": 5, "lane-d": 5, "lane-e": 0 },
      { "lane-a": 0, "lane-b": 0, "lane-c": 34, "lane-d": 33, "lane-e": 33 },
    ]);
    expect(m.steps.some((s) => s.lane === "lane-a" || s.lane === "lane-b")).toBe(false);
  });

  it("blue_green: traffic 0 on a wave before any canary phase is the dark wave leaving it out gives", () => {
    const lanes = [50, 50, 0, 0].map((w, i) => ({ ...lane(i), weight: w }));
    const compile = (first: Record<string, unknown>) =>
      compileRecipe(
        Recipe.parse(
          blueGreen({
            lanes,
            rollout: { waves: [{ lanes: ["lane-c"], ...first }, { lanes: ["lane-d"] }] },
          }),
        ),
      ).manifest;
    const zero = compile({ traffic: 0 });
    const dark = compile({});
    expect(zero.waves.map((w) => w.traffic)).toEqual([0, 100]);
    expect(zero.steps.map((s) => [s.name, s.lane])).toEqual(
      dark.steps.map((s) => [s.name, s.lane]),
    );
  });

  it("the example strategy recipes compile and name their strategy", () => {
    expect(compileRecipeText(read("recipes/rolling.yaml"), "rolling.yaml").manifest.strategy).toBe(
      "rolling",
    );
    expect(
      compileRecipeText(read("recipes/blue-green.yaml"), "blue-green.yaml").manifest.strategy,
    ).toBe("blue_green");
  });
});

describe("strategies: the contract check refuses", () => {
  it("a traffic percent under rolling or blue_green, naming the field and the fix", () => {
    const r = rolling(
      [25, 25, 25, 25],
      [
        ["a", "b"],
        ["c", "d"],
      ],
    );
    Object.assign(r.rollout?.waves?.[0] ?? {}, { traffic: 10 });
    const ps = problemsOf(r);
    expect(ps).toHaveLength(1);
    expect(ps[0]?.path).toBe("rollout.waves.0.traffic");
    expect(ps[0]?.message).toMatch(/rolling takes no traffic percent.*beyond capacity/);
    expect(ps[0]?.fix).toMatch(/Remove `traffic` from wave 1.*strategy: canary/);
    const bg = blueGreen();
    Object.assign(bg.rollout?.waves?.[0] ?? {}, { traffic: 100 });
    const bps = problemsOf(bg);
    expect(bps.map((p) => p.path)).toEqual(["rollout.waves.0.traffic"]);
    expect(bps[0]?.message).toMatch(/blue_green's last wave is the switch/);
    expect(bps[0]?.fix).toMatch(/Remove `traffic` from wave 1/);
  });

  it("a blue-green canary phase at 100% or going down", () => {
    const r = blueGreen({
      lanes: [50, 50, 0, 0, 0].map((w, i) => ({ ...lane(i), weight: w })),
      rollout: {
        waves: [
          { lanes: ["lane-c"], traffic: 20 },
          { lanes: ["lane-d"], traffic: 10 },
          { lanes: ["lane-e"] },
        ],
      },
    });
    const down = problemsOf(r);
    expect(down.map((p) => p.path)).toEqual(["rollout.waves.1.traffic"]);
    expect(down[0]?.fix).toMatch(/use 20 or more here/);
    Object.assign(r.rollout?.waves?.[1] ?? {}, { traffic: 100 });
    const full = problemsOf(r);
    expect(full.map((p) => p.path)).toEqual(["rollout.waves.1.traffic"]);
    expect(full[0]?.fix).toMatch(/from 1 to 99/);
  });

  it("a canary wave without traffic", () => {
    const r = goodRecipe();
    const second = r.rollout?.waves?.[1] as { traffic?: number };
    delete second.traffic;
    const ps = problemsOf(r);
    expect(ps.map((p) => p.path)).toEqual(["rollout.waves.1.traffic"]);
    expect(ps[0]?.fix).toMatch(/Add `traffic: .*strategy: rolling/);
  });

  it("blue_green without a blue lane, or with an analysis gate it would never hold", () => {
    const all = blueGreen({
      rollout: { waves: [{ lanes: ["lane-a", "lane-b"] }, { lanes: ["lane-c", "lane-d"] }] },
    });
    const ps = problemsOf(all);
    expect(ps.map((p) => p.path)).toEqual(["rollout.waves"]);
    expect(ps[0]?.fix).toMatch(/Leave the lanes that serve now \(blue\) out of every wave/);
    const gated = blueGreen({
      analysis: { metrics: [{ name: "error_rate", query: "x", margin: 0.01 }] },
    });
    expect(problemsOf(gated).map((p) => p.path)).toContain("analysis");
  });

  it("an unknown strategy, naming the ones there are", () => {
    const ps = problemsOf({ ...goodRecipe(), strategy: "big_bang" });
    expect(ps.map((p) => p.path)).toEqual(["strategy"]);
    expect(`${ps[0]?.message} ${ps[0]?.fix}`).toMatch(/canary, rolling, blue_green/);
  });
});
