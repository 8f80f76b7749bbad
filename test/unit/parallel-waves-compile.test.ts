/**
 * Parallel waves, compile side: `max_unavailable`, `failure_domain` and
 * `min_serving` are opt-in; without them the table and the manifest are byte for byte what
 * they were; bad values are contract problems that name the field and the fix.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkAndCompile, compileRecipe } from "../../engine/src/domain/compile.ts";
import { Recipe, type RecipeInput } from "../../engine/src/domain/recipe.ts";
import { compileRecipeText } from "../../engine/src/recipes/compile-text.ts";
import { lane, wideRecipe } from "./recipe-fixture.ts";

const exampleText = readFileSync(join(import.meta.dirname, "../../recipes/example.yaml"), "utf8");

function fleetRecipe(
  n: number,
  wave: Record<string, unknown>,
  extra: Record<string, unknown> = {},
) {
  const r = wideRecipe(n) as RecipeInput & Record<string, unknown>;
  const waves = r.rollout?.waves ?? [];
  const second = waves[1];
  if (second) Object.assign(second, wave);
  return { ...r, ...extra };
}

describe("parallel waves: compile and contract check", () => {
  it("the example recipe compiles to the same 24 steps and digest-relevant bytes as before", () => {
    const before = compileRecipeText(exampleText, "example.yaml");
    expect(before.manifest.steps).toHaveLength(24);
    expect(before.canonical).not.toContain("max_unavailable");
    expect(before.canonical).not.toContain("min_serving");
    expect(before.canonical).not.toContain("failure_domain");
    // max_unavailable: 1 is the serial walk: the same canonical bytes.
    const one = compileRecipeText(
      exampleText.replace("traffic: 50", "traffic: 50\n      max_unavailable: 1"),
      "example.yaml",
    );
    expect(one.canonical).toBe(before.canonical);
  });

  it("a parallel wave keeps the serial table and records its resolved limit", () => {
    const serial = compileRecipe(Recipe.parse(fleetRecipe(21, {})));
    const parallel = compileRecipe(Recipe.parse(fleetRecipe(21, { max_unavailable: "25%" })));
    expect(parallel.manifest.steps).toEqual(serial.manifest.steps);
    expect(parallel.manifest.waves[0]?.max_unavailable).toBeUndefined();
    expect(parallel.manifest.waves[1]?.max_unavailable).toBe(5); // 25% of 20, rounded down
    const count = compileRecipe(Recipe.parse(fleetRecipe(21, { max_unavailable: 8 })));
    expect(count.manifest.waves[1]?.max_unavailable).toBe(8);
    // More than the wave has: capped at the wave's lanes.
    const big = compileRecipe(Recipe.parse(fleetRecipe(4, { max_unavailable: 50 })));
    expect(big.manifest.waves[1]?.max_unavailable).toBe(3);
  });

  it("min_serving caps the lanes out at once; failure domains are carried per lane", () => {
    const r = fleetRecipe(10, { max_unavailable: 8 }, { min_serving: "60%" }) as RecipeInput;
    r.lanes = (r.lanes ?? []).map((l, i) => ({ ...l, failure_domain: `rack-${i % 2}` }));
    const m = compileRecipe(Recipe.parse(r)).manifest;
    expect(m.min_serving).toBe(6);
    expect(m.waves[1]?.max_unavailable).toBe(4); // 10 lanes - 6 kept in service
    expect(m.lanes.map((l) => l.failure_domain)).toEqual(
      Array.from({ length: 10 }, (_, i) => `rack-${i % 2}`),
    );
    // A floor that leaves room for one lane only: the wave is serial again.
    const tight = compileRecipe(
      Recipe.parse(fleetRecipe(10, { max_unavailable: 8 }, { min_serving: 9 })),
    ).manifest;
    expect(tight.waves[1]?.max_unavailable).toBeUndefined();
  });

  it.each([
    [{ max_unavailable: 0 }, "rollout.waves.1.max_unavailable", "at least 1"],
    [{ max_unavailable: "120%" }, "rollout.waves.1.max_unavailable", "percent"],
    [{ max_unavailable: "five" }, "rollout.waves.1.max_unavailable", "percent"],
    [{ max_unavailable: 2.5 }, "rollout.waves.1.max_unavailable", "whole number"],
    // "0%" would take no lane out: refused like 0 (it used to compile as a serial wave).
    [{ max_unavailable: "0%" }, "rollout.waves.1.max_unavailable", "from 1% to 100%"],
  ])("bad wave limit %j is a problem at its field", (wave, path, words) => {
    const res = checkAndCompile(fleetRecipe(5, wave));
    expect(res.ok).toBe(false);
    if (res.ok) return;
    const p = res.problems.find((x) => x.path === path);
    expect(p, JSON.stringify(res.problems)).toBeDefined();
    expect(p?.message).toContain(words);
    // The fix says what to write, not the message again.
    expect(p?.fix).toContain("a whole number from 1 (e.g. 4) or a percent");
    expect(p?.fix).not.toContain(p?.message ?? "");
  });

  it("bad min_serving and failure_domain name their field and the fix", () => {
    const all = checkAndCompile(fleetRecipe(5, { max_unavailable: 2 }, { min_serving: "100%" }));
    expect(all.ok).toBe(false);
    if (!all.ok) {
      const p = all.problems.find((x) => x.path === "min_serving");
      expect(p?.message).toContain("no lane of wave");
      expect(p?.fix).toContain("Lower min_serving to at most 4 lanes");
    }
    const bad = checkAndCompile(fleetRecipe(5, {}, { min_serving: "sixty" }));
    expect(bad.ok).toBe(false);
    if (!bad.ok) {
      const p = bad.problems.find((x) => x.path === "min_serving");
      expect(p?.fix).toContain('a percent of the recipe\'s lanes from 0% to 100% (e.g. "60%"');
    }
    expect(checkAndCompile(fleetRecipe(5, {}, { min_serving: "0%" })).ok).toBe(true);
    const r = fleetRecipe(3, {}) as RecipeInput;
    r.lanes = [{ ...lane(0), failure_domain: "rack 1!" }, lane(1), lane(2)];
    const dom = checkAndCompile(r);
    expect(dom.ok).toBe(false);
    if (!dom.ok) {
      const p = dom.problems.find((x) => x.path === "lanes.0.failure_domain");
      expect(p?.message).toContain("failure_domain must be");
      expect(p?.fix).toContain("e.g. `rack-3`");
    }
  });

  it("a lane that could never leave service (its domain's other lanes excluded until a later wave) is refused", () => {
    const lanes = Array.from({ length: 5 }, (_, i) => ({
      ...lane(i),
      ...(i === 1 || i === 3 ? { failure_domain: "rack-1" } : {}),
    }));
    const r = (waves: { lanes: string[]; traffic: number; max_unavailable?: number }[]) =>
      Recipe.parse({ ...wideRecipe(5), lanes, rollout: { waves } });
    const ids = lanes.map((l) => l.id);
    const baseline = ids.map((id, i) => ({
      id,
      weight: i === 3 ? 0 : 25,
      excluded: i === 3,
      capabilities: [],
      advertised: false,
    }));
    const blocked = [
      { lanes: [ids[0] as string], traffic: 10 },
      { lanes: [ids[1] as string, ids[2] as string], traffic: 50, max_unavailable: 2 },
      { lanes: [ids[3] as string, ids[4] as string], traffic: 100 },
    ];
    let problems: { path: string; message: string; fix?: string }[] = [];
    try {
      compileRecipe(r(blocked), baseline);
    } catch (e) {
      problems = (e as { problems: typeof problems }).problems;
    }
    const p = problems.find((x) => x.path === "lanes.1.failure_domain");
    expect(p?.message).toContain(`lane ${ids[1]} of wave 2 can never leave service`);
    expect(p?.fix).toContain(`Include ${ids[3]} on the control plane first`);
    // The same lanes when the excluded lane is redeployed in the same wave, or is in service.
    const together = [
      { lanes: [ids[0] as string], traffic: 10 },
      {
        lanes: [ids[1] as string, ids[2] as string, ids[3] as string],
        traffic: 50,
        max_unavailable: 2,
      },
      { lanes: [ids[4] as string], traffic: 100 },
    ];
    expect(() => compileRecipe(r(together), baseline)).not.toThrow();
    const inService = baseline.map((l) => ({ ...l, excluded: false, weight: 20 }));
    expect(() => compileRecipe(r(blocked), inService)).not.toThrow();
  });
});
