/**
 * Recovery class `recoverable` in the transition (docs/lifecycle.md "Recovery classes"): once
 * compensation has undone what took effect, the release does not end `rolled_back`; it waits
 * `needs_operator` for the recipe's restore action, and only an operator's `confirm_restore`
 * (reason required) ends it. Every other verb's refusal names the restore and how to confirm it.
 */
import { describe, expect, it } from "vitest";
import { availableActions } from "../../engine/src/domain/transition/exits.ts";
import type { Manifest, Release } from "../../engine/src/domain/types.ts";
import { manifestOf } from "../support/manifest-fixture.ts";
import { deepFreeze, finishCurrent, ok, refused, release, T0 } from "../support/sim/drive.ts";
import { runnerThenCp } from "../support/sim/scenes.ts";

const RESTORE = "restore the feature store snapshot with ./ops/restore-fs.sh";

function recoverable(): Manifest {
  return { ...manifestOf(runnerThenCp()), recovery: { class: "recoverable", restore: RESTORE } };
}

/** Step 0 (runner) passed, step 1 (control plane) refused: compensating step 1 backward. */
function failedAt1(m: Manifest): Release {
  const r = finishCurrent(ok(release(m), { type: "start" }).release, "pass");
  return ok(r, {
    type: "applied",
    step_run_id: "sr_17_1_f",
    outcome: "failed",
    message: "HTTP 422",
  }).release;
}

/** Runs every backward step run to success. */
function undoAll(r: Release, now = T0 + 1000): Release {
  let cur = r;
  for (let i = 0; i < 10 && cur.state === "compensating"; i++)
    cur = finishCurrent(cur, "pass", now);
  return cur;
}

describe("recoverable: the restore action after the traffic rollback", () => {
  it("a reversible release ends rolled_back when its undo is done (unchanged)", () => {
    const r = undoAll(failedAt1(manifestOf(runnerThenCp())));
    expect(r.state).toBe("rolled_back");
    expect(r.restore).toBeUndefined();
  });

  it("a recoverable release waits needs_operator for its restore action, naming it and the verb", () => {
    const r = undoAll(failedAt1(recoverable()));
    expect(r.state).toBe("needs_operator");
    expect(r.step_runs.filter((s) => s.direction === "bwd").map((s) => s.state)).toEqual([
      "succeeded",
      "succeeded",
    ]);
    expect(r.restore).toEqual({ action: RESTORE, since: T0 + 1000, confirmed: null });
    expect(r.reason).toContain("traffic was rolled back");
    expect(r.reason).toContain(RESTORE);
    expect(r.reason).toContain("baton confirm-restore r17 --reason");
    const offered = availableActions(r);
    expect(offered.map((a) => a.action).sort()).toEqual(["abandon", "confirm_restore"]);
    const c = offered.find((a) => a.action === "confirm_restore");
    expect(c?.needs_reason).toBe(true);
    expect(c?.command).toBe(
      'baton confirm-restore r17 --reason "<what you ran and what it showed>"',
    );
    expect(c?.effect).toContain(RESTORE);
  });

  it("confirm_restore needs a reason, then ends the release rolled_back with who, when and what", () => {
    const r = undoAll(failedAt1(recoverable()));
    const empty = refused(r, { type: "confirm_restore", actor: "alice", reason: "  " });
    expect(empty.status).toBe(422);
    expect(empty.code).toBe("reason_required");
    expect(empty.reason).toMatch(/say what you ran and what it showed/);
    const done = ok(
      r,
      { type: "confirm_restore", actor: "alice", reason: "restored snapshot fs-2041" },
      T0 + 60_000,
    );
    expect(done.release.state).toBe("rolled_back");
    expect(done.release.restore?.confirmed).toEqual({
      actor: "alice",
      reason: "restored snapshot fs-2041",
      at: T0 + 60_000,
    });
    expect(done.release.reason).toMatch(/confirmed by alice: restored snapshot fs-2041/);
    expect(done.history.at(-1)?.data).toMatchObject({ actor: "alice", action: RESTORE });
    expect(done.effects).toEqual([]);
    // Once confirmed, it is closed: a second confirmation is refused naming who confirmed.
    const again = refused(done.release, {
      type: "confirm_restore",
      actor: "bob",
      reason: "again",
    });
    expect(again.status).toBe(409);
    expect(again.reason).toMatch(/confirmed already by alice/);
  });

  it("neither asking what it accepts nor confirming changes the release given (deep-frozen)", () => {
    const r = deepFreeze(undoAll(failedAt1(recoverable())));
    const before = JSON.stringify(r);
    // availableActions probes confirm_restore: the probe must not leave its placeholder behind.
    expect(availableActions(r).map((a) => a.action)).toContain("confirm_restore");
    const done = ok(r, { type: "confirm_restore", actor: "alice", reason: "ran it" }, T0 + 5);
    expect(JSON.stringify(r)).toBe(before);
    expect(r.restore?.confirmed).toBeNull();
    expect(done.release.restore?.confirmed?.actor).toBe("alice");
  });

  it("while it waits, the other verbs are refused naming the restore and confirm-restore", () => {
    const r = undoAll(failedAt1(recoverable()));
    for (const ev of [
      { type: "abort", actor: "a", reason: "x" },
      { type: "resume", actor: "a" },
      { type: "pause", actor: "a", reason: "x" },
    ] as const) {
      const res = refused(r, ev);
      expect(res.status, ev.type).toBe(409);
      expect(res.reason, ev.type).toContain("baton confirm-restore r17");
      expect(res.reason, ev.type).toContain(RESTORE);
    }
    const bwd = r.step_runs.find((s) => s.direction === "bwd");
    const res = refused(r, {
      type: "resolve",
      actor: "a",
      step_run_id: bwd?.id ?? "",
      reason: "x",
    });
    expect(res.reason).toContain("waits for its restore action");
  });

  it("abandon while it waits ends it abandoned with the restore unconfirmed", () => {
    const r = undoAll(failedAt1(recoverable()));
    const lanes = Object.fromEntries(r.manifest.lanes.map((l) => [l.id, "none"]));
    const res = ok(r, { type: "abandon", actor: "a", reason: "restore impossible", lanes });
    expect(res.release.state).toBe("abandoned");
    expect(res.release.restore?.confirmed).toBeNull();
  });

  it("confirm_restore is refused where nothing waits for a restore", () => {
    const reversible = undoAll(failedAt1(manifestOf(runnerThenCp())));
    expect(
      refused(reversible, { type: "confirm_restore", actor: "a", reason: "x" }).reason,
    ).toMatch(/recovery class is reversible/);
    const compensating = failedAt1(recoverable());
    expect(
      refused(compensating, { type: "confirm_restore", actor: "a", reason: "x" }).reason,
    ).toMatch(/once compensation has rolled traffic back/);
  });

  it("a recoverable release aborted before anything took effect ends aborted: nothing to restore", () => {
    const r = ok(release(recoverable()), { type: "abort", actor: "a", reason: "x" }).release;
    expect(r.state).toBe("aborted");
    expect(r.restore).toBeUndefined();
  });

  it("a recoverable release that succeeds never waits for a restore", () => {
    let r = ok(release(recoverable()), { type: "start" }).release;
    for (let i = 0; i < 5 && r.state === "running"; i++) r = finishCurrent(r, "pass");
    expect(r.state).toBe("succeeded");
    expect(r.restore).toBeUndefined();
  });
});
