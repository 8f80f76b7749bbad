/**
 * Ways out of every state (docs/state-machine.md "Ways out"): `availableActions` offers exactly
 * the operator events the transition accepts; resolve and abandon, with their refusals; and
 * the re-run window (docs/state-machine.md "The re-run window").
 */
import { describe, expect, it } from "vitest";
import { TERMINAL_RELEASE_STATES } from "../../engine/src/domain/states.ts";
import { availableActions } from "../../engine/src/domain/transition/exits.ts";
import { transition } from "../../engine/src/domain/transition.ts";
import type { Release, ReleaseEvent } from "../../engine/src/domain/types.ts";
import { IMAGE, PREVIOUS_IMAGE } from "../support/manifest-fixture.ts";
import {
  callbackOf,
  effectTypes,
  finishCurrent,
  ok,
  preflightOf,
  refused,
  release,
  sr,
  T0,
  verifyPasses,
} from "../support/sim/drive.ts";
import {
  boundAt0,
  compensating,
  needsOperator,
  pausedUnknown,
  runnerThenCp,
  started,
} from "../support/sim/scenes.ts";

const confirmed = { l1: PREVIOUS_IMAGE };
const abandonEv = (o: Partial<Extract<ReleaseEvent, { type: "abandon" }>> = {}): ReleaseEvent => ({
  type: "abandon",
  actor: "operator:alice",
  reason: "lane restored by hand with deploy.sh",
  lanes: confirmed,
  ...o,
});
const resolveEv = (id: string, reason = "ran include_lane's undo by hand"): ReleaseEvent => ({
  type: "resolve",
  actor: "operator:alice",
  step_run_id: id,
  reason,
});

const names = (r: Release) => availableActions(r).map((a) => `${a.action}:${a.target}`);

describe("availableActions: an exit from every non-terminal state", () => {
  const cases: [string, () => Release, string[]][] = [
    ["pending", () => release(runnerThenCp()), ["resume:r17", "abort:r17"]],
    ["running", started, ["pause:r17", "abort:r17"]],
    [
      "paused (unknown runner outcome)",
      pausedUnknown,
      ["resume:r17", "retry:sr_17_0_f", "abort:r17"],
    ],
    ["compensating", compensating, []],
    ["needs_operator", needsOperator, ["retry:sr_17_1_b", "resolve:sr_17_1_b", "abandon:r17"]],
  ];
  for (const [name, setup, want] of cases) {
    it(`${name}: ${want.join(", ") || "none: it moves on by itself within its deadlines"}`, () => {
      const r = setup();
      expect(names(r)).toEqual(want);
      // Every offered exit is accepted by the transition (no copy of the rules).
      for (const a of availableActions(r)) {
        const ev: ReleaseEvent =
          a.action === "retry" || a.action === "resolve"
            ? a.action === "retry"
              ? { type: "retry", actor: "t", step_run_id: a.target }
              : resolveEv(a.target)
            : a.action === "abandon"
              ? abandonEv()
              : a.action === "abort" || a.action === "pause"
                ? { type: a.action, actor: "t", reason: "r" }
                : { type: "resume", actor: "t" };
        expect(transition(r, ev, T0).ok).toBe(true);
      }
    });
  }

  it("compensating has no operator exit but a bounded automatic one: its step run carries effects and deadlines", () => {
    const r = compensating();
    expect(r.state).toBe("compensating");
    expect(sr(r, 1, "bwd").state).toBe("applying");
    // The control-plane outcome settles it: rolled_back or needs_operator, never stuck.
    const next = ok(r, { type: "applied", step_run_id: "sr_17_1_b", outcome: "ok", message: "ok" });
    expect(
      next.release.state === "compensating" || TERMINAL_RELEASE_STATES.has(next.release.state),
    ).toBe(true);
  });

  it("terminal states offer nothing, abandoned included", () => {
    const r = ok(needsOperator(), abandonEv()).release;
    expect(r.state).toBe("abandoned");
    expect(availableActions(r)).toEqual([]);
  });

  it("the abandon exit names every lane to confirm and the command that takes it", () => {
    const a = availableActions(needsOperator()).find((x) => x.action === "abandon");
    expect(a?.lanes).toEqual(["l1"]);
    expect(a?.command).toContain("--lane l1=<image|none>");
    expect(a?.needs_reason).toBe(true);
  });
});

describe("resolve <step-run> --reason", () => {
  it("counts the waited-on backward step run as done; compensation continues to rolled_back", () => {
    const res = ok(needsOperator(), resolveEv("sr_17_1_b"));
    const r = res.release;
    expect(sr(r, 1, "bwd").state).toBe("succeeded");
    expect(sr(r, 1, "bwd").resolved).toEqual({
      actor: "operator:alice",
      reason: "ran include_lane's undo by hand",
      at: T0,
    });
    // Step 0's backward (a runner) is dispatched next.
    expect(r.state).toBe("compensating");
    expect(effectTypes(res.effects)).toEqual(["dispatch:sr_17_0_b"]);
    const first = res.history[0]!;
    expect(first.kind).toBe("resolve");
    expect(first.message).toContain("resolved by operator:alice: ran include_lane's undo by hand");
    expect(verifyPasses(finishCurrent(r, "pass")).state).toBe("rolled_back");
  });

  it("refused for a step run that is not the one waited on (409)", () => {
    const r = needsOperator();
    const res = refused(r, resolveEv("sr_17_0_f"));
    expect(res.status).toBe(409);
    expect(res.reason).toContain("the release waits on sr_17_1_b");
    expect(res.history[0]?.outcome).toBe("refused");
  });

  it("refused without a reason (422), and when the release is not needs_operator (409)", () => {
    const missing = refused(needsOperator(), resolveEv("sr_17_1_b", "  "));
    expect([missing.status, missing.code]).toEqual([422, "reason_required"]);
    const compensatingRes = refused(compensating(), resolveEv("sr_17_1_b"));
    expect(compensatingRes.status).toBe(409);
    const paused = refused(pausedUnknown(), resolveEv("sr_17_0_f"));
    expect(paused.status).toBe(409);
  });
});

describe("abandon <release> --reason --lane …", () => {
  it("ends abandoned with the confirmed lanes, generation + 1, who and why in history", () => {
    const before = needsOperator();
    const res = ok(before, abandonEv());
    expect(res.release.state).toBe("abandoned");
    expect(res.release.generation).toBe(before.generation + 1);
    expect(res.release.abandoned).toEqual({
      actor: "operator:alice",
      reason: "lane restored by hand with deploy.sh",
      at: T0,
      lanes: { l1: PREVIOUS_IMAGE },
    });
    expect(res.effects).toEqual([]);
    expect(res.history[0]?.message).toContain(`l1 runs ${PREVIOUS_IMAGE}`);
    expect(TERMINAL_RELEASE_STATES.has("abandoned")).toBe(true);
  });

  it("accepts `none` for a lane that runs nothing", () => {
    expect(ok(needsOperator(), abandonEv({ lanes: { l1: "none" } })).release.state).toBe(
      "abandoned",
    );
  });

  it("refuses missing lanes, unknown lanes and unpinned images (422, naming them)", () => {
    const missing = refused(needsOperator(), abandonEv({ lanes: {} }));
    expect([missing.status, missing.code]).toEqual([422, "lanes_unconfirmed"]);
    expect(missing.reason).toContain("confirm what lanes l1 run now");
    const unknown = refused(
      needsOperator(),
      abandonEv({ lanes: { ...confirmed, "lane-z": IMAGE } }),
    );
    expect(unknown.reason).toContain("lanes lane-z are not lanes of release r17");
    const tag = refused(needsOperator(), abandonEv({ lanes: { l1: "model:latest" } }));
    expect(tag.reason).toContain("pinned by digest");
  });

  it("refuses a running, paused, compensating or finished release (409) and a missing reason (422)", () => {
    for (const setup of [started, pausedUnknown, compensating]) {
      const res = refused(setup(), abandonEv());
      expect(res.status).toBe(409);
      expect(res.reason).toMatch(/only a release that needs an operator can be abandoned/);
    }
    const done = ok(needsOperator(), abandonEv()).release;
    expect(refused(done, abandonEv()).reason).toContain("already ended");
    const noReason = refused(needsOperator(), abandonEv({ reason: "" }));
    expect([noReason.status, noReason.code]).toEqual([422, "reason_required"]);
  });

  it("a dispatch of the abandoned release is stale afterwards (generation moved on)", () => {
    const before = needsOperator();
    const r = ok(before, abandonEv()).release;
    const res = refused(r, preflightOf(before, "sr_17_0_f"));
    expect(res.status).toBe(409);
  });
});

describe("the re-run window", () => {
  const WINDOW = 30 * 60_000;
  const failed = (window = WINDOW) =>
    ok(boundAt0(runnerThenCp(window)), callbackOf("sr_17_0_f", "fail"));

  it("a failed runner step waits, paused, with a deadline; the runner is told to re-run before it", () => {
    const res = failed();
    const r = res.release;
    expect(r.state).toBe("paused");
    expect(r.rerun_deadline).toBe(T0 + WINDOW);
    expect(r.generation).toBe(1);
    const hhmm = new Date(T0 + WINDOW).toISOString().slice(11, 16);
    expect(r.reason).toContain(
      `re-run the failed job before ${hhmm} UTC, or the release compensates`,
    );
    expect(res.effects).toEqual([
      {
        type: "deadline",
        step_run_id: "sr_17_0_f",
        kind: "rerun",
        dispatch: 1,
        attempt: 1,
        at: T0 + WINDOW,
      },
    ]);
    expect(res.reply.advice).toBe(`re-run this job before ${hhmm} UTC, or release r17 compensates`);
    expect(res.reply.rerun_deadline).toBe(T0 + WINDOW);
    expect(names(r)).toEqual(["resume:r17", "retry:sr_17_0_f", "abort:r17"]);
  });

  it("a re-run (run attempt 2) inside the window is accepted and forward progress continues", () => {
    const r = failed().release;
    const pre = ok(r, preflightOf(r, "sr_17_0_f", { run_attempt: 2 }), T0 + 60_000);
    expect(pre.release.state).toBe("running");
    expect(pre.release.rerun_deadline).toBeNull();
    expect(pre.reply.attempt).toBe(2);
    const done = ok(pre.release, callbackOf("sr_17_0_f", "pass", { run_attempt: 2 }), T0 + 120_000);
    expect(done.release.cursor).toBe(1);
    expect(effectTypes(done.effects)).toEqual(["cp:apply:sr_17_1_f"]);
    // The window's deadline fires later and changes nothing.
    const late = transition(
      done.release,
      { type: "deadline", step_run_id: "sr_17_0_f", kind: "rerun", dispatch: 1, attempt: 1 },
      T0 + WINDOW,
    );
    expect(late.ok && !late.changed).toBe(true);
  });

  it("at the end of the window the release compensates; a re-run then is declined, saying so", () => {
    const r = failed().release;
    const res = ok(
      r,
      { type: "deadline", step_run_id: "sr_17_0_f", kind: "rerun", dispatch: 1, attempt: 1 },
      T0 + WINDOW,
    );
    expect(res.release.state).toBe("compensating");
    expect(res.release.generation).toBe(2);
    expect(res.release.reason).toContain("was not re-run before the window closed");
    expect(effectTypes(res.effects)).toEqual(["dispatch:sr_17_0_b"]);
    const late = refused(
      res.release,
      preflightOf(r, "sr_17_0_f", { run_attempt: 2 }),
      T0 + WINDOW + 1,
    );
    expect([late.status, late.code]).toEqual([409, "rerun_declined"]);
    expect(late.reason).toContain("re-run 2 of run 9001 is declined: release r17 is compensating");
    expect(late.reason).toContain("this job touched nothing");
  });

  it("abort inside the window compensates at once", () => {
    const r = failed().release;
    const res = ok(r, { type: "abort", actor: "ops", reason: "give up" });
    expect(res.release.state).toBe("compensating");
    expect(res.release.rerun_deadline).toBeNull();
  });

  it("window 0 compensates at once, and the runner is told a re-run will be declined", () => {
    const res = failed(0);
    expect(res.release.state).toBe("compensating");
    expect(res.reply.advice).toBe(
      "release r17 is compensating; a re-run of this job will be declined",
    );
  });

  it("a failed re-run opens a new window from its own failure", () => {
    const r = failed().release;
    const pre = ok(r, preflightOf(r, "sr_17_0_f", { run_attempt: 2 }), T0 + 60_000).release;
    const again = ok(pre, callbackOf("sr_17_0_f", "fail", { run_attempt: 2 }), T0 + 120_000);
    expect(again.release.state).toBe("paused");
    expect(again.release.rerun_deadline).toBe(T0 + 120_000 + WINDOW);
    expect(again.effects[0]).toMatchObject({ kind: "rerun", attempt: 2 });
    // The first window's deadline is stale now.
    const stale = transition(
      again.release,
      { type: "deadline", step_run_id: "sr_17_0_f", kind: "rerun", dispatch: 1, attempt: 1 },
      T0 + WINDOW,
    );
    expect(stale.ok && !stale.changed).toBe(true);
  });
});

describe("the words of resume and of a refused abort say what the engine does", () => {
  const resumeEffectOf = (r: Release) =>
    availableActions(r).find((a) => a.action === "resume")?.effect ?? "";
  const pause = (r: Release) =>
    ok(r, { type: "pause", actor: "operator:alice", reason: "checking dashboards" }).release;

  it("after a plain operator pause with the step in flight, resume sends nothing again", () => {
    const r = pause(boundAt0());
    expect(r.state).toBe("paused");
    const effect = resumeEffectOf(r);
    expect(effect).not.toMatch(/sends .* again/);
    expect(effect).toContain("nothing is sent again");
    expect(effect).toContain("sr_17_0_f in flight settles");
    expect(effect).toContain("operator:alice's pause");
    // True of the transition: resume re-sends nothing.
    const after = ok(r, { type: "resume", actor: "operator:bob" });
    expect(after.effects.filter((e) => e.type === "dispatch")).toEqual([]);
    expect(after.history.some((h) => h.message.includes("sent again"))).toBe(false);
  });

  it("after the paused step settled, resume begins the next step (nothing sent again)", () => {
    const held = pause(boundAt0());
    const settled = ok(held, callbackOf("sr_17_0_f", "pass")).release;
    expect(settled.state).toBe("paused");
    expect(settled.cursor).toBe(1);
    const effect = resumeEffectOf(settled);
    expect(effect).toContain("nothing is sent again");
    expect(effect).toContain("step 2 (include_lane");
    const after = ok(settled, { type: "resume", actor: "operator:bob" });
    expect(after.history.some((h) => h.message.includes("sent again"))).toBe(false);
    expect(after.release.step_runs.some((s) => s.step_index === 1)).toBe(true);
  });

  it("paused on a step run whose outcome is unknown, resume sends that step run again", () => {
    const r = pausedUnknown();
    const effect = resumeEffectOf(r);
    expect(effect).toMatch(/^sends sr_17_0_f again/);
    const after = ok(r, { type: "resume", actor: "operator:bob" });
    expect(after.history.some((h) => h.message.includes("sent again on resume"))).toBe(true);
  });

  it("a second abort of a compensating release offers no step run to retry: it has none waiting", () => {
    const r = compensating();
    expect(availableActions(r)).toEqual([]);
    const res = refused(r, { type: "abort", actor: "operator:alice", reason: "again" });
    expect(res.status).toBe(409);
    expect(res.reason).not.toMatch(/waiting step run|retry the/);
    expect(res.reason).toContain("accepts nothing until that ends");
    expect(res.reason).toContain("baton watch r17");
  });
});
