/**
 * Recovery classes in the recipe (docs/recipes.md "Recovery class"): a recipe that declares
 * none compiles to the same bytes as before (reversible assumed); a declared class is in the
 * manifest, with roll_forward_only's `unsafe_after` resolved to a step index; every bad value
 * is a problem naming the field and the fix.
 */
import { describe, expect, it } from "vitest";
import { checkAndCompile } from "../../engine/src/domain/compile.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { goodRecipe } from "./recipe-fixture.ts";

const problemsOf = (r: unknown) => {
  const res = checkAndCompile(r);
  if (res.ok) throw new Error("expected problems");
  return res.problems;
};
const compiled = (r: RecipeInput) => {
  const res = checkAndCompile(r);
  if (!res.ok) throw new Error(JSON.stringify(res.problems));
  return res;
};

describe("recovery class in the recipe", () => {
  it("absent: the manifest carries no recovery field (bytes unchanged); reversible declared: it does", () => {
    const plain = compiled(goodRecipe());
    expect(plain.manifest.recovery).toBeUndefined();
    expect(plain.canonical).not.toContain("recovery");
    const rev = compiled({ ...goodRecipe(), recovery_class: "reversible" });
    expect(rev.manifest.recovery).toEqual({ class: "reversible" });
    expect(rev.manifest.steps).toEqual(plain.manifest.steps);
  });

  it("roll_forward_only resolves unsafe_after to the step's index (lane step and wave step)", () => {
    const r = goodRecipe();
    const lane = r.lanes?.[1]?.id as string;
    const m = compiled({
      ...r,
      recovery_class: "roll_forward_only",
      unsafe_after: { step: "attach_queue_lane", lane },
    }).manifest;
    const at = m.recovery?.unsafe_after as number;
    expect(m.steps[at]).toMatchObject({ name: "attach_queue_lane", lane });
    const w = compiled({
      ...r,
      recovery_class: "roll_forward_only",
      unsafe_after: { step: "set_traffic", wave: 1 },
    }).manifest;
    const wi = w.recovery?.unsafe_after as number;
    expect(w.steps[wi]).toMatchObject({ name: "set_traffic", lane: null, wave: 0 });
    expect(w.steps).toEqual(compiled(r).manifest.steps);
  });

  it("recoverable keeps its named restore action", () => {
    const m = compiled({
      ...goodRecipe(),
      recovery_class: "recoverable",
      restore: "restore the feature store snapshot with ./ops/restore-fs.sh",
    }).manifest;
    expect(m.recovery).toEqual({
      class: "recoverable",
      restore: "restore the feature store snapshot with ./ops/restore-fs.sh",
    });
  });

  it.each([
    [
      { recovery_class: "undoable" },
      "recovery_class",
      /one of reversible, recoverable, roll_forward_only/,
    ],
    [
      { recovery_class: "roll_forward_only" },
      "unsafe_after",
      /unsafe_after: \{step: attach_queue_lane/,
    ],
    [
      { recovery_class: "roll_forward_only", unsafe_after: { step: "migrate_db", lane: "x" } },
      "unsafe_after.step",
      /attach_queue_lane/,
    ],
    [
      { recovery_class: "roll_forward_only", unsafe_after: { step: "attach_queue_lane" } },
      "unsafe_after.lane",
      /lane: <lane id>/,
    ],
    [
      {
        recovery_class: "roll_forward_only",
        unsafe_after: { step: "attach_queue_lane", lane: "lane-zz" },
      },
      "unsafe_after.lane",
      /Use one of/,
    ],
    [
      { recovery_class: "roll_forward_only", unsafe_after: { step: "set_traffic", wave: 9 } },
      "unsafe_after.wave",
      /Use a wave from 1 to/,
    ],
    [
      { recovery_class: "roll_forward_only", unsafe_after: { step: "set_traffic" } },
      "unsafe_after.wave",
      /wave: <1\.\./,
    ],
    [
      { unsafe_after: { step: "set_traffic", wave: 1 } },
      "unsafe_after",
      /recovery_class: roll_forward_only/,
    ],
    [{ recovery_class: "recoverable" }, "restore", /Add `restore:/],
    [{ restore: "run x" }, "restore", /recovery_class: recoverable/],
  ])("refuses %j at %s, naming the fix", (extra, path, fix) => {
    const ps = problemsOf({ ...goodRecipe(), ...extra });
    const p = ps.find((x) => x.path === path);
    expect(p, JSON.stringify(ps)).toBeDefined();
    expect(`${p?.message} ${p?.fix}`).toMatch(fix);
  });
});
