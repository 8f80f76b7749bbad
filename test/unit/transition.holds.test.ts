/**
 * Holds as transitions (docs/lifecycle.md): an operator `pause` (in-flight work settles,
 * nothing new starts, `resume` continues), a dark deploy (`exposure: dark`: held before the
 * first traffic write above 0% until `release`), and `promotion: manual` (held after a wave
 * until `promote`). Each verb is offered (`availableActions`) exactly when the transition
 * accepts it, and refused elsewhere with a 409 naming what the release accepts.
 */
import { describe, expect, it } from "vitest";
import { noticeKindFor } from "../../engine/src/domain/notifications.ts";
import { availableActions } from "../../engine/src/domain/transition/exits.ts";
import { firstExposureStep } from "../../engine/src/domain/transition/holds.ts";
import { newRelease } from "../../engine/src/domain/transition.ts";
import type { Release } from "../../engine/src/domain/types.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { advanceTo, finishCurrent, ok, refused, sr, T0 } from "../support/sim/drive.ts";
import { goodRecipe } from "./recipe-fixture.ts";

function fresh(edit: (r: Record<string, unknown>) => void = () => {}): Release {
  const r = goodRecipe() as Record<string, unknown>;
  edit(r);
  const c = compileRecipeInput(r as never);
  return newRelease("r5", 5, c.manifest, c.manifest_digest, T0);
}
const offered = (r: Release) => availableActions(r).map((a) => a.action);
const pause = { type: "pause", actor: "alice", reason: "error budget burn" } as const;

/** The index of the first step named `name` in wave `wave`. */
function stepOf(r: Release, name: string, wave: number): number {
  const s = r.manifest.steps.find((x) => x.name === name && x.wave === wave);
  if (!s) throw new Error(`no ${name} in wave ${wave}`);
  return s.index;
}

describe("pause and resume", () => {
  it("a running release pauses: the in-flight step settles, nothing new starts, resume continues", () => {
    const r0 = advanceTo(fresh(), 2);
    expect(offered(r0)).toContain("pause");
    const flying = sr(r0, 2);
    const p = ok(r0, pause);
    expect(p.release.state).toBe("paused");
    expect(p.release.hold).toMatchObject({ kind: "pause", actor: "alice" });
    expect(p.release.reason).toMatch(/paused by alice: error budget burn/);
    expect(p.effects).toEqual([]);
    expect(p.history[0]?.message).toMatch(new RegExp(`${flying.id} in flight settle first`));
    expect(offered(p.release)).toEqual(["resume", "abort"]);
    // The in-flight step succeeds: the cursor moves on, nothing new begins.
    const settled = finishCurrent(p.release, "pass");
    expect(settled.state).toBe("paused");
    expect(settled.cursor).toBe(3);
    expect(settled.step_runs.some((s) => s.step_index === 3)).toBe(false);
    // Pause again: refused, naming resume.
    const again = refused(settled, pause);
    expect(again.status).toBe(409);
    expect(again.reason).toMatch(/already paused.*paused by alice.*resume \(baton resume r5\)/);
    const res = ok(settled, { type: "resume", actor: "bob" });
    expect(res.release.state).toBe("running");
    expect(res.release.hold).toBeNull();
    expect(res.release.step_runs.some((s) => s.step_index === 3)).toBe(true);
    expect(res.history[0]?.message).toMatch(/resumed by bob .*it was paused by alice/);
  });

  it("a reason is required; a failure while paused follows the step's own policy", () => {
    const r0 = advanceTo(fresh(), 2);
    const none = refused(r0, { ...pause, reason: " " });
    expect(none.status).toBe(422);
    expect(none.code).toBe("reason_required");
    const p = ok(r0, pause).release;
    const failed = finishCurrent(p, "fail");
    expect(failed.hold ?? null).toBeNull();
    // The recipe's default re-run window: paused for a re-run, not for the operator.
    expect(failed.state).toBe("paused");
    expect(typeof failed.rerun_deadline).toBe("number");
  });

  it("refused while pending, compensating, needs_operator and after the end, naming what is accepted", () => {
    const pending = fresh();
    expect(refused(pending, pause).reason).toMatch(/not started: resume .* starts it/);
    const r0 = advanceTo(fresh(), 2);
    const comp = ok(r0, { type: "abort", actor: "a", reason: "x" }).release;
    expect(comp.state).toBe("compensating");
    expect(offered(comp)).not.toContain("pause");
    expect(refused(comp, pause).reason).toMatch(/compensation is not paused/);
    let done = advanceTo(fresh(), 0);
    while (done.state === "running") done = finishCurrent(done, "pass");
    expect(done.state).toBe("succeeded");
    const end = refused(done, pause);
    expect(end.status).toBe(409);
    expect(end.reason).toMatch(/it accepts rollback/);
  });
});

describe("deploy (dark) and release", () => {
  const dark = () => ({ ...fresh(), exposure: "dark" as const });

  it("holds at 0% exposure before the first traffic write above 0%; release exposes it", () => {
    const r0 = dark();
    const first = firstExposureStep(r0.manifest);
    expect(r0.manifest.steps[first]?.name).toBe("set_traffic");
    expect(r0.manifest.steps[first]?.wave).toBe(0);
    let cur = ok(r0, { type: "start" }).release;
    while (cur.state === "running") cur = finishCurrent(cur, "pass");
    expect(cur.state).toBe("paused");
    expect(cur.cursor).toBe(first);
    expect(cur.hold).toMatchObject({ kind: "dark" });
    expect(cur.reason).toMatch(
      /0% exposure; release \(baton release r5 --reason "<why it is ready>"\)/,
    );
    // Every forward write so far kept the candidate at 0%.
    for (const s of cur.manifest.steps.slice(0, first)) {
      const req = s.forward.kind === "control_plane" ? s.forward.request : null;
      if (req?.op === "set_traffic") expect(req.weights[s.lane ?? "lane-a"] ?? 0).toBe(0);
    }
    expect(offered(cur)).toEqual(["release", "abort"]);
    expect(refused(cur, { type: "resume", actor: "x" }).reason).toMatch(
      /waits for release \(baton release r5 --reason "<why it is ready>"\)/,
    );
    expect(refused(cur, pause).reason).toMatch(/already paused/);
    const out = ok(cur, { type: "release", actor: "carol", reason: "smoke looks good" });
    expect(out.release.state).toBe("running");
    expect(out.release.exposure).toBe("released");
    expect(out.release.step_runs.some((s) => s.step_index === first)).toBe(true);
    expect(refused(out.release, { type: "release", actor: "c", reason: "" }).reason).toMatch(
      /released already/,
    );
  });

  it("release is refused for a release not deployed dark, and while it still deploys", () => {
    const plain = advanceTo(fresh(), 2);
    expect(refused(plain, { type: "release", actor: "c", reason: "" }).reason).toMatch(
      /not deployed dark/,
    );
    const early = advanceTo(dark(), 2);
    const res = refused(early, { type: "release", actor: "c", reason: "" });
    expect(res.status).toBe(409);
    expect(res.reason).toMatch(/still deploying at 0% exposure; release is accepted once/);
    expect(offered(early)).not.toContain("release");
  });
});

describe("promotion: manual", () => {
  const manual = () =>
    fresh((r) => {
      r.promotion = "manual";
    });

  it("compiles only into the waves that have a next one; manifests without it are unchanged", () => {
    expect(manual().manifest.waves.map((w) => w.promotion)).toEqual([
      "manual",
      "manual",
      undefined,
    ]);
    expect(fresh().manifest.waves.every((w) => !("promotion" in w))).toBe(true);
    const perWave = fresh((r) => {
      const waves = (r.rollout as { waves: Record<string, unknown>[] }).waves;
      waves[1] = { ...waves[1], promotion: "manual" };
    });
    expect(perWave.manifest.waves.map((w) => w.promotion)).toEqual([
      undefined,
      "manual",
      undefined,
    ]);
  });

  it("waits after each wave for promote; resume is refused naming promote", () => {
    const r0 = manual();
    let cur = ok(r0, { type: "start" }).release;
    while (cur.state === "running") cur = finishCurrent(cur, "pass");
    expect(cur.state).toBe("paused");
    expect(cur.hold).toMatchObject({ kind: "promotion", wave: 1, actor: "recipe" });
    expect(cur.cursor).toBe(stepOf(cur, "drain_wave", 1));
    expect(noticeKindFor({ ...cur, state: "running" }, cur, null)).toBe("waiting_for_promotion");
    expect(offered(cur)).toEqual(["promote", "abort"]);
    expect(refused(cur, { type: "resume", actor: "x" }).reason).toMatch(/waits for promote/);
    const p = ok(cur, { type: "promote", actor: "dan", reason: "wave 1 looks fine" });
    expect(p.release.state).toBe("running");
    expect(p.release.promoted).toEqual([1]);
    cur = p.release;
    while (cur.state === "running") cur = finishCurrent(cur, "pass");
    expect(cur.hold).toMatchObject({ kind: "promotion", wave: 2 });
    cur = ok(cur, { type: "promote", actor: "dan", reason: "" }).release;
    while (cur.state === "running") cur = finishCurrent(cur, "pass");
    expect(cur.state).toBe("succeeded");
  });

  it("promote is refused while running, naming what it accepts", () => {
    const r0 = advanceTo(manual(), 2);
    const res = refused(r0, { type: "promote", actor: "x", reason: "" });
    expect(res.status).toBe(409);
    expect(res.reason).toMatch(/manual promotion/);
    const p = ok(r0, pause).release;
    expect(refused(p, { type: "promote", actor: "x", reason: "" }).reason).toMatch(
      /waits for resume/,
    );
  });
});
