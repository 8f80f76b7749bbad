/**
 * Shadow phases in the recipe (docs/recipes.md "Shadow phase"): the contract check's refusals,
 * each naming the field and the fix; what the manifest keeps (the wave's caps, a shadow-safe
 * lane's declared environment in its candidate deploy); the gate a shadow phase has.
 */
import { describe, expect, it } from "vitest";
import { checkAndCompile } from "../../engine/src/domain/compile.ts";
import type { Problem } from "../../engine/src/domain/errors.ts";
import { gateAt } from "../../engine/src/domain/gate/waves.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { goodRecipe, lane } from "./recipe-fixture.ts";

const SAFE = {
  cache_namespace: "shadow-summarizer",
  state_namespace: "shadow-summarizer",
  tools: "sandboxed",
  egress: "restricted",
} as const;

const METRICS = [
  {
    name: "error-rate",
    kind: "ratio" as const,
    better: "lower" as const,
    margin: { absolute: 0.01 },
  },
];

/** Four lanes; wave 1 is a shadow phase on lane-a (shadow-safe), then 10%, 50%, 100%. */
function shadowRecipe(): RecipeInput {
  return {
    ...goodRecipe(),
    lanes: [{ ...lane(0), shadow_safe: { ...SAFE } }, lane(1), lane(2), lane(3)],
    rollout: {
      waves: [
        { lanes: ["lane-a"], traffic: 0, shadow: { share: 20, rate_per_s: 50 } },
        { lanes: ["lane-b"], traffic: 10 },
        { lanes: ["lane-c"], traffic: 50 },
        { lanes: ["lane-d"], traffic: 100 },
      ],
    },
    analysis: { metrics: METRICS },
  };
}

function problems(r: unknown): Problem[] {
  const out = checkAndCompile(r);
  return out.ok ? [] : out.problems;
}

function problemAt(r: unknown, path: string): Problem {
  const at = problems(r).filter((p) => p.path === path);
  expect(at, JSON.stringify(problems(r))).toHaveLength(1);
  return at[0] as Problem;
}

describe("shadow: the contract check", () => {
  it("accepts a shadow phase before any exposure on a shadow-safe lane", () => {
    expect(problems(shadowRecipe())).toEqual([]);
  });

  it("refuses a shadow phase when the recipe says `shadow: never`", () => {
    const p = problemAt({ ...shadowRecipe(), shadow: "never" }, "rollout.waves.0.shadow");
    expect(p.message).toContain("`shadow: never`");
    expect(p.fix).toContain("Remove `shadow` from wave 1");
    // `shadow: allowed` (the default, written out) changes nothing.
    expect(problems({ ...shadowRecipe(), shadow: "allowed" })).toEqual([]);
  });

  it("refuses a lane without shadow_safe in a shadow phase, naming the lane to declare it on", () => {
    const r = shadowRecipe();
    r.lanes[0] = lane(0);
    const p = problemAt(r, "rollout.waves.0.lanes.0");
    expect(p.message).toContain("lane `lane-a` takes mirrored requests");
    expect(p.fix).toContain("lanes.0");
    expect(p.fix).toContain("shadow_safe");
  });

  it("refuses a shadow phase with real traffic, or after a wave that exposed users", () => {
    const withTraffic = shadowRecipe();
    withTraffic.rollout.waves[0]!.traffic = 5;
    expect(problemAt(withTraffic, "rollout.waves.0.traffic").fix).toContain("`traffic: 0`");

    const late = shadowRecipe();
    late.rollout.waves = [
      { lanes: ["lane-b"], traffic: 10 },
      { lanes: ["lane-a"], traffic: 10, shadow: { share: 20, rate_per_s: 50 } },
      { lanes: ["lane-c", "lane-d"], traffic: 100 },
    ];
    expect(problemAt(late, "rollout.waves.1.traffic").message).toContain("shadow phase");
    late.rollout.waves[1]!.traffic = 0;
    expect(problemAt(late, "rollout.waves.1.shadow").message).toContain(
      "after wave 1 already exposed users",
    );
  });

  it("refuses a shadow_safe declaration that leaves a side effect open, naming the field", () => {
    const r = shadowRecipe();
    r.lanes[0] = { ...lane(0), shadow_safe: { ...SAFE, egress: "open" as "restricted" } };
    expect(problems(r).map((p) => p.path)).toContain("lanes.0.shadow_safe.egress");
    const share = shadowRecipe();
    share.rollout.waves[0]!.shadow = { share: 0, rate_per_s: 50 };
    expect(problems(share).map((p) => p.path)).toContain("rollout.waves.0.shadow.share");
  });
});

describe("shadow: the manifest", () => {
  it("keeps the wave's caps, gates it on the recipe's analysis, and gives the shadow-safe lane's candidate deploy its declared environment", () => {
    const out = checkAndCompile(shadowRecipe());
    if (!out.ok) throw new Error(JSON.stringify(out.problems));
    const m = out.manifest;
    expect(m.waves[0]).toMatchObject({ traffic: 0, shadow: { share: 20, rate_per_s: 50 } });
    expect(gateAt(m, 0)).toMatchObject({ phase: "gate" });
    const attach = m.steps.find((s) => s.name === "attach_queue_lane" && s.lane === "lane-a");
    expect(attach?.forward).toMatchObject({
      kind: "runner",
      args: {
        env: {
          BATON_SHADOW_SAFE: "1",
          BATON_CACHE_NAMESPACE: "shadow-summarizer",
          BATON_STATE_NAMESPACE: "shadow-summarizer",
          BATON_TOOLS: "sandboxed",
          BATON_EGRESS: "restricted",
        },
      },
    });
    // The restore (previous image) is not given the shadow environment; nor are other lanes.
    expect(attach?.backward && "args" in attach.backward && attach.backward.args.env).toBeFalsy();
    const other = m.steps.find((s) => s.name === "attach_queue_lane" && s.lane === "lane-b");
    expect(other?.forward && "args" in other.forward && other.forward.args.env).toBeFalsy();
  });

  it("a recipe without shadow compiles to the same manifest as before (no shadow fields)", () => {
    const out = checkAndCompile(goodRecipe());
    if (!out.ok) throw new Error("good recipe refused");
    expect(JSON.stringify(out.manifest)).not.toContain("shadow");
  });
});

describe("recipes/shadow.yaml", () => {
  it("compiles: a shadow phase on the shadow-safe lane-a, gated, then real waves", async () => {
    const { readFileSync } = await import("node:fs");
    const { parse } = await import("yaml");
    const r = checkAndCompile(parse(readFileSync("recipes/shadow.yaml", "utf8")));
    if (!r.ok) throw new Error(JSON.stringify(r.problems));
    expect(r.manifest.waves.map((w) => [w.traffic, w.shadow ?? null, !!w.analysis])).toEqual([
      [0, { share: 20, rate_per_s: 200 }, true],
      [50, null, true],
      [100, null, false],
    ]);
    expect(r.manifest.lanes.map((l) => !!l.shadow_env)).toEqual([true, false, false]);
  });
});
