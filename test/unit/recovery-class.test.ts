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
      {
        recovery_class: "roll_forward_only",
        unsafe_after: { step: "assert_check_passed", wave: 1 },
      },
      "unsafe_after.step",
      /read-only check.*Set `unsafe_after\.step` to the step that changes something rollback cannot undo: a lane step \(exclude_lane, .*\) with `unsafe_after\.lane`, or a wave step \(drain_wave, set_traffic, assert_traffic_observed\)/,
    ],
    [
      { recovery_class: "roll_forward_only", unsafe_after: { step: "attach_queue_lane" } },
      "unsafe_after.lane",
      /Add `unsafe_after\.lane`: one of lane-a, lane-b, lane-c, e\.g\. `unsafe_after: \{step: attach_queue_lane, lane: lane-a\}`/,
    ],
    [
      {
        recovery_class: "roll_forward_only",
        unsafe_after: { step: "attach_queue_lane", lane: "lane-zz" },
      },
      "unsafe_after.lane",
      /Set `unsafe_after\.lane` to one of lane-a, lane-b, lane-c\./,
    ],
    [
      { recovery_class: "roll_forward_only", unsafe_after: { step: "set_traffic", wave: 9 } },
      "unsafe_after.wave",
      /Set `unsafe_after\.wave` to a wave of the rollout: 1 to 3 \(1 = the first wave\)/,
    ],
    [
      { recovery_class: "roll_forward_only", unsafe_after: { step: "set_traffic" } },
      "unsafe_after.wave",
      /Add `unsafe_after\.wave`: 1 to 3 .*`unsafe_after: \{step: set_traffic, wave: 1\}`/,
    ],
    [
      { unsafe_after: { step: "set_traffic", wave: 1 } },
      "unsafe_after",
      /recovery_class: roll_forward_only/,
    ],
    [{ recovery_class: "recoverable" }, "restore", /Add `restore_state: \{tool.*, or `restore:/],
    [{ restore: "run x" }, "restore", /recovery_class: recoverable/],
  ])("refuses %j at %s, naming the fix", (extra, path, fix) => {
    const ps = problemsOf({ ...goodRecipe(), ...extra });
    const p = ps.find((x) => x.path === path);
    expect(p, JSON.stringify(ps)).toBeDefined();
    expect(`${p?.message} ${p?.fix}`).toMatch(fix);
  });

  // Bad shapes and values: the problem is at the exact field, and the fix names that field and
  // what to write there (the step names, this recipe's lanes and waves).
  const LANE_STEPS =
    "exclude_lane, attach_queue_lane, assert_smoke_passed, advertise_capabilities, include_lane";
  const WAVE_STEPS = "drain_wave, set_traffic, assert_traffic_observed";
  it.each([
    [
      "attach_queue_lane",
      "unsafe_after",
      /`unsafe_after: \{step: attach_queue_lane, lane: lane-a\}` \(`lane` one of lane-a, lane-b, lane-c\)/,
    ],
    [
      "set_traffic",
      "unsafe_after",
      /`unsafe_after: \{step: set_traffic, wave: 1\}` \(`wave` 1 to 3\)/,
    ],
    [
      3,
      "unsafe_after",
      `(a lane step, one of ${LANE_STEPS}; \`lane\` one of lane-a, lane-b, lane-c) or \`unsafe_after: {step: set_traffic, wave: 1}\` (a wave step, one of ${WAVE_STEPS}; \`wave\` 1 to 3, 1 = the first wave)`,
    ],
    [null, "unsafe_after", /Write `unsafe_after` as a mapping/],
    [
      [{ step: "attach_queue_lane", lane: "lane-a" }],
      "unsafe_after",
      /Write `unsafe_after` as a mapping/,
    ],
    [
      {},
      "unsafe_after.step",
      `Set \`unsafe_after.step\` to a step name: a lane step (${LANE_STEPS}) with \`unsafe_after.lane\` (one of lane-a, lane-b, lane-c), or a wave step (${WAVE_STEPS}) with \`unsafe_after.wave\` (1 to 3).`,
    ],
    [{ step: 4, lane: "lane-a" }, "unsafe_after.step", /Set `unsafe_after\.step` to a step name/],
    [
      { step: "attach_queue_lane:lane-a" },
      "unsafe_after.step",
      `a lane step (${LANE_STEPS}) with \`unsafe_after.lane\``,
    ],
    [
      { step: "attach_queue_lane", lane: 1 },
      "unsafe_after.lane",
      /Set `unsafe_after\.lane` to one of lane-a, lane-b, lane-c/,
    ],
    [
      { step: "set_traffic", wave: 0 },
      "unsafe_after.wave",
      /Set `unsafe_after\.wave` to a whole wave number, 1 to 3/,
    ],
    [
      { step: "set_traffic", wave: 1.5 },
      "unsafe_after.wave",
      /Set `unsafe_after\.wave` to a whole wave number, 1 to 3/,
    ],
    [
      { step: "set_traffic", wave: "1" },
      "unsafe_after.wave",
      /e\.g\. `unsafe_after: \{step: set_traffic, wave: 1\}`/,
    ],
    [
      { step: "attach_queue_lane", lane: "lane-a", wave: 1 },
      "unsafe_after.wave",
      /Remove `unsafe_after\.wave` and name the lane in `unsafe_after\.lane` \(one of lane-a, lane-b, lane-c\)/,
    ],
    [
      { step: "set_traffic", wave: 1, lane: "lane-a" },
      "unsafe_after.lane",
      /Remove `unsafe_after\.lane` and name the wave in `unsafe_after\.wave` \(1 to 3\)/,
    ],
    [
      { step: "attach_queue_lane", lanes: ["lane-a"] },
      "unsafe_after.lanes",
      /Allowed fields here: step, lane, wave/,
    ],
  ])(
    "unsafe_after %j: refused at %s, the fix names the field and the choices",
    (given, path, fix) => {
      const r = goodRecipe();
      expect(r.lanes?.map((l) => l.id)).toEqual(["lane-a", "lane-b", "lane-c"]);
      expect(r.rollout?.waves).toHaveLength(3);
      const ps = problemsOf({ ...r, recovery_class: "roll_forward_only", unsafe_after: given });
      const p = ps.find((x) => x.path === path);
      expect(p, JSON.stringify(ps)).toBeDefined();
      if (typeof fix === "string") expect(p?.fix).toContain(fix);
      else expect(p?.fix).toMatch(fix);
    },
  );

  it("a step the compiled table lacks (a one-lane 100% wave has no drain_wave): the fix lists what it has", () => {
    const r = goodRecipe();
    const one = {
      ...r,
      lanes: [{ ...r.lanes![0]!, weight: undefined }],
      rollout: { waves: [{ lanes: [r.lanes![0]!.id], traffic: 100 }] },
      recovery_class: "roll_forward_only" as const,
      unsafe_after: { step: "drain_wave", wave: 1 },
    };
    const ps = problemsOf(one);
    const p = ps.find((x) => x.path === "unsafe_after.wave");
    expect(p, JSON.stringify(ps)).toBeDefined();
    expect(p?.message).toBe("the compiled step table has no step drain_wave in wave 1");
    expect(p?.fix).toMatch(
      /`unsafe_after\.step` and `unsafe_after\.wave`: set_traffic \(wave 1\); assert_traffic_observed \(wave 1\)/,
    );
  });
});
