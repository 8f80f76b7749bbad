/**
 * Confirmation pages: they list, lane by lane, what the action will undo or run
 * (the same compensation rule the transition applies), and an action the engine would refuse
 * gets no form: the page says so (409) and lists the actions it accepts now.
 */
import { describe, expect, it } from "vitest";
import { planOf } from "../../engine/src/domain/transition/plan.ts";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import { fakeApi, pausedRecord, runningRecord } from "../support/dashboard-fixtures.ts";

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
    expect(t).toMatch(/lane-1 step 2 \(wave 1\) restore queue lane · lane-1 → step 1 \(wave 1\)/);
    expect(html).toContain('name="csrf"');
    // Step numbers shown to people are 1-based (the step table's rows): never "step 0".
    expect(t).toContain("from the high-water mark down to step 1.");
    expect(t).not.toMatch(/\bstep 0\b/);
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
    // A rolled-back release accepts only the lifecycle verb roll forward (a new release).
    expect(t).toMatch(/It accepts: Roll forward \(CLI\)… baton roll-forward r3/);
    const paused = await get("/releases/r5/abandon");
    expect(paused.status).toBe(409);
    expect(text(paused.html)).toMatch(/It accepts: .*Retry step 2 \(wave 1\)/);
  });
});
