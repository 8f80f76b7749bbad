/**
 * A switch back (the rollback of a blue-green release, domain/blue-green.ts) as `baton status`,
 * `baton status -w`'s lanes and the dashboard show it: the lanes it moved every request back to
 * are the restored old environment, the lanes it moved them off are switched away (never the
 * candidate and the baseline), the traffic is on the restored old environment, and the plan
 * carries the name of the recipe it was admitted with (what serves after it), the one its
 * history's `created` entry names.
 */
import { describe, expect, it } from "vitest";
import { releaseSummary } from "../../engine/src/cli/output.ts";
import { switchBackPlan } from "../../engine/src/domain/blue-green.ts";
import { compileRecipe } from "../../engine/src/domain/compile.ts";
import { Recipe, type RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { Manifest, Release, StepRun } from "../../engine/src/domain/types.ts";
import type { ReleaseRecord } from "../../engine/src/service/api.ts";
import { shortImage } from "../../engine/src/views/format.ts";
import { lanesView } from "../../engine/src/views/lanes.ts";
import { releasePageHtml, succeededRecord, visibleText } from "../support/dashboard-fixtures.ts";
import { goodRecipe, lane } from "./recipe-fixture.ts";

const NOW = Date.UTC(2026, 11, 7, 12, 0, 0);

/** Blue lanes a, b (30/70) and green lanes c, d: recipe `bg-v7`, a 2h window. */
function blueGreen(): Manifest {
  const r = {
    ...goodRecipe(),
    name: "bg-v7",
    strategy: "blue_green",
    lanes: [30, 70, 0, 0].map((w, i) => ({ ...lane(i), weight: w })),
    rollout: { waves: [{ lanes: ["lane-c", "lane-d"] }] },
    policy: { rollback_window: "2h" },
  } as RecipeInput;
  return compileRecipe(Recipe.parse(r)).manifest;
}

/** r5: the succeeded switch back of r4, admitted with recipe `canary-v6`, every step done. */
function switchBack(): { m: Manifest; record: ReleaseRecord } {
  const m = blueGreen();
  const plan = switchBackPlan(m, null, "canary-v6") as Manifest;
  const base = succeededRecord();
  const template = base.release.step_runs[0] as StepRun;
  const release: Release = {
    ...base.release,
    id: "r5",
    manifest: plan,
    lineage: { verb: "rollback", of: "r4", switch_back: true },
    high_water_mark: plan.steps.length - 1,
    cursor: plan.steps.length,
    succeeded_at: NOW - 60_000,
    step_runs: plan.steps.map((s) => ({
      ...template,
      id: `sr_5_${s.index}_f`,
      step_index: s.index,
      kind: s.kind,
      operation_key: `r5:${s.index}:fwd`,
      attempts: [],
      bound_run_id: null,
    })),
  };
  return { m, record: { release, history: [], attempt_results: [] } };
}

describe("a switch back is shown as what serves after it", () => {
  it("baton status: the recipe it was admitted with, the restored old environment and the lanes switched away", () => {
    const { m, record } = switchBack();
    const lines = releaseSummary(
      { ...record.release, history: [], attempt_results: [] } as never,
      NOW,
    );
    expect(lines[0]).toBe("r5  succeeded  canary-v6 / summarizer-v7");
    const text = lines.join("\n");
    expect(text).toContain(
      `traffic now: 100% on the restored old environment ${shortImage(m.previous_image)}`,
    );
    const row = (id: string) => lines.find((l) => l.trim().startsWith(`${id} `)) ?? "";
    for (const id of ["lane-a", "lane-b"])
      expect(row(id)).toContain(`${shortImage(m.previous_image)} (restored)`);
    for (const id of ["lane-c", "lane-d"])
      expect(row(id)).toContain(`${shortImage(m.image)} (switched away)`);
    expect(text).not.toContain("(candidate)");
    expect(text).not.toContain("bg-v7");
  });

  it("the lanes view (GET /v1/releases/:id/lanes, baton status -w): restored and switched away", () => {
    const { record } = switchBack();
    expect(lanesView(record.release, null).lanes.map((l) => [l.id, l.set.role])).toEqual([
      ["lane-a", "restored"],
      ["lane-b", "restored"],
      ["lane-c", "switched away"],
      ["lane-d", "switched away"],
    ]);
  });

  it("a release that is no switch back keeps candidate and baseline", () => {
    const roles = new Set(lanesView(succeededRecord().release, null).lanes.map((l) => l.set.role));
    expect([...roles].every((r) => r === "candidate" || r === "baseline")).toBe(true);
  });

  it("the dashboard's release page: the same words", async () => {
    const { m, record } = switchBack();
    const html = await releasePageHtml([record], "r5", NOW);
    const live = /<section aria-labelledby="live-now"[\s\S]*?<\/section>/.exec(html)?.[0] ?? "";
    const t = visibleText(live);
    expect(t).toContain(
      `Traffic 100% on the restored old environment ${shortImage(m.previous_image)}`,
    );
    expect(t).toMatch(/lane-a 1 \S+ restored/);
    expect(t).toMatch(/lane-c — \S+ switched away/);
    expect(t).not.toContain("candidate");
    expect(html).toContain("canary-v6");
    expect(html).not.toContain("bg-v7");
  });
});
