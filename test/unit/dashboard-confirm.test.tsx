/**
 * Confirmation pages: they list what the action will undo or run, in the order the engine
 * runs it (the same compensation rule the transition applies; lanes interleaved, never
 * regrouped), and an action the engine would refuse gets no form: the page says so (409) and
 * lists the actions it accepts now.
 */
import { describe, expect, it } from "vitest";
import { planOf } from "../../engine/src/domain/transition/plan.ts";
import { newRelease } from "../../engine/src/domain/transition.ts";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { planWords } from "../../engine/src/views/offers.ts";
import { fakeApi, pausedRecord, runningRecord } from "../support/dashboard-fixtures.ts";
import { advanceTo, T0 } from "../support/sim/drive.ts";
import { goodRecipe } from "./recipe-fixture.ts";

const OP = "op-secret-token";
const app = () =>
  dashboardApp({
    api: fakeApi(),
    tokens: { operator: OP },
    publicUrl: "http://127.0.0.1",
  });
const get = async (path: string) => {
  const res = await app().request(path, { headers: { authorization: `Bearer ${OP}` } });
  return { status: res.status, html: await res.text() };
};
const text = (html: string) =>
  html
    .replace(/<[^>]+>/g, " ")
    .replace(/\s+/g, " ")
    .replaceAll("&#39;", "'");

describe("what an action will do", () => {
  it("abort of a running release: the undo steps from the high-water mark down, by lane", async () => {
    const r = runningRecord().release;
    expect(planOf(r, { action: "abort", target: r.id }).runs.map((p) => p.index)).toEqual([1, 0]);
    const { status, html } = await get("/releases/r4/abort");
    expect(status).toBe(200);
    const t = text(html);
    expect(t).toContain("Will be undone, in this order");
    expect(t).toMatch(
      /1 lane-1 step 2 \(wave 1\) restore queue lane · lane-1 2 lane-1 step 1 \(wave 1\) include lane/,
    );
    expect(html).toContain('name="csrf"');
    // Step numbers shown to people are 1-based (the step table's rows): never "step 0".
    expect(t).toContain("from the high-water mark down to step 1.");
    expect(t).not.toMatch(/\bstep 0\b/);
  });

  it("the undo steps of an abort are listed in the order they run, lanes interleaved", () => {
    // Three waves (10%, 50%, 100%) run up to wave 3: the undo runs from the high-water mark
    // down, and the traffic steps of each wave come between the lanes' own steps.
    const c = compileRecipeInput(goodRecipe());
    const r0 = newRelease("r5", 5, c.manifest, c.manifest_digest, T0);
    const lastOfWave2 = Math.max(
      ...c.manifest.steps.filter((s) => s.wave === 1).map((s) => s.index),
    );
    const r = advanceTo(r0, lastOfWave2 + 1);
    const plan = planWords(r, "abort", r.id);
    const numbers = plan.steps.map((s) => Number(/^step (\d+)/.exec(s.step)?.[1]));
    expect(numbers).toEqual(
      planOf(r, { action: "abort", target: r.id }).runs.map((p) => p.index + 1),
    );
    expect(numbers).toEqual([...numbers].sort((a, b) => b - a));
    // The lanes as they come, not one row per lane: a lane comes back after another one.
    const lanes = plan.steps.map((s) => s.lane);
    const runs = lanes.filter((l, i) => l !== lanes[i - 1]);
    expect(runs.length).toBeGreaterThan(new Set(lanes).size);
  });

  it("retry of a paused release's step run: that step again, then forward to the end", async () => {
    const r = pausedRecord().release;
    const plan = planOf(r, { action: "retry", target: "sr_5_1_f" });
    expect(plan.runs[0]).toMatchObject({ index: 1, direction: "fwd", lane: "lane-1" });
    expect(plan.runs.at(-1)!.index).toBe(r.manifest.steps.length - 1);
    const t = text((await get("/step-runs/sr_5_1_f/retry")).html);
    expect(t).toContain("Will run, in this order");
    expect(t).toContain("step 2 (wave 1) attach queue lane · lane-1");
    expect(t).toContain(`step ${r.manifest.steps.length} (wave 1)`);
    // Abort of the same release undoes only what may have taken effect: step 2 never started.
    expect(planOf(r, { action: "abort", target: r.id }).runs.map((p) => p.index)).toEqual([0]);
  });

  it("an action the engine would refuse gets no form, a 409 and the actions it accepts", async () => {
    const done = await get("/releases/r3/abort");
    expect(done.status).toBe(409);
    expect(done.html).not.toContain('name="csrf"');
    const t = text(done.html);
    expect(t).toContain("The engine does not accept abort for r3 now");
    // A rolled-back release accepts a verification of its lanes (which changes no state) and
    // the lifecycle verb roll forward (a new release); nothing else.
    expect(t).toMatch(
      /It accepts: Verify the lanes… baton verify r3 Roll forward \(CLI\)… baton roll-forward r3 \S+ --bundle \S+ Back/,
    );
    const paused = await get("/releases/r5/abandon");
    expect(paused.status).toBe(409);
    expect(text(paused.html)).toMatch(/It accepts: .*Retry step 2 \(wave 1\)/);
  });
});
