/**
 * A rollback's probe steps run concurrently (docs/lifecycle.md "Rollback prerequisites";
 * docs/state-machine.md "Runner steps", probe steps), pure transitions:
 * - start dispatches every probe at once, up to `PROBES_IN_FLIGHT_MAX`; a probe that passes
 *   lets the next one begin; the rollback's first step begins only when the last probe passed,
 *   in whatever order they passed;
 * - an operator's pause holds the probes not begun yet (those in flight settle), resume begins
 *   them;
 * - one failed probe ends the release `aborted` (nothing compensated, the high-water mark
 *   untouched): the probes no runner started are cancelled, running ones' callbacks are
 *   refused 409 `late`, their preflights 409 `stale`.
 */
import { describe, expect, it } from "vitest";
import {
  checksAsking,
  PROBES_IN_FLIGHT_MAX,
  type PrerequisiteCheck,
  withProbeSteps,
} from "../../engine/src/domain/prerequisites.ts";
import type { Release, ReleaseEvent } from "../../engine/src/domain/types.ts";
import { manifestOf, type StepSpec } from "../support/manifest-fixture.ts";
import { ok, preflightOf, refused, release } from "../support/sim/drive.ts";

/** A rollback of `n` lanes: n probe steps, then one marker write per lane. */
function rollback(n: number): Release {
  const specs: StepSpec[] = Array.from({ length: n }, (_, i) => ({
    name: "exclude_lane",
    kind: "control_plane",
    backward: true,
    lane: `l${i}`,
  }));
  const m = withProbeSteps(manifestOf(specs));
  const r = release(m);
  return {
    ...r,
    prerequisites: {
      ok: true,
      at: 0,
      image: m.image,
      asked_by: "runner",
      checks: m.lanes.flatMap((l) => checksAsking(l.id)),
    },
  };
}

function laneOf(r: Release, index: number): string {
  const a = r.manifest.steps[index]?.forward;
  if (a?.kind !== "runner") throw new Error(`[test] step ${index} is not a probe`);
  return (a.args.lane as { id: string }).id;
}

function checks(lane: string, fail?: "image_present"): PrerequisiteCheck[] {
  return (["lane_credentials", "image_present", "lane_capacity"] as const).map((check) => ({
    check,
    lane,
    outcome: check === fail ? "fail" : "pass",
    message: check === fail ? "image is not on this machine" : "ok",
    fix: check === fail ? "load the image again" : null,
  }));
}

const idOf = (r: Release, index: number) =>
  r.step_runs.find((s) => s.step_index === index && s.direction === "fwd")?.id as string;

/** Accepted, preflighted as run `9<index>`. */
function bind(r: Release, index: number): Release {
  const id = idOf(r, index);
  const a = ok(r, { type: "dispatch_accepted", step_run_id: id, dispatch: 1 }).release;
  return ok(a, preflightOf(a, id, { run_id: `9${index}` })).release;
}

function answer(r: Release, index: number, fail?: "image_present") {
  const ev: ReleaseEvent = {
    type: "callback",
    step_run_id: idOf(r, index),
    run_id: `9${index}`,
    run_attempt: 1,
    status: fail ? "failed" : "succeeded",
    overall: fail ? "fail" : "pass",
    probe_checks: checks(laneOf(r, index), fail),
  };
  return ev;
}

const dispatched = (effects: { type: string; step_run_id?: string }[]) =>
  effects.filter((e) => e.type === "dispatch").map((e) => e.step_run_id);

describe("rollback probe steps run concurrently", () => {
  it("start dispatches every probe at once; the first step begins only after the last probe passed, in any order", () => {
    const n = 4;
    const s = ok(rollback(n), { type: "start" });
    expect(dispatched(s.effects)).toEqual([0, 1, 2, 3].map((i) => `sr_17_${i}_f`));
    let r = s.release;
    for (const i of [0, 1, 2, 3]) r = bind(r, i);
    expect(r.high_water_mark).toBe(-1);
    // The probes pass out of table order; the cursor stays on the first one still asking.
    for (const [k, i] of [2, 0, 3].entries()) {
      const res = ok(r, answer(r, i));
      expect(res.effects.filter((e) => e.type !== "deadline")).toEqual([]);
      r = res.release;
      expect(r.state).toBe("running");
      expect(r.cursor).toBe(k === 0 ? 0 : 1);
    }
    const last = ok(r, answer(r, 1));
    r = last.release;
    expect(r.cursor).toBe(n);
    expect(last.effects.map((e) => [e.type, "step_run_id" in e ? e.step_run_id : null])).toEqual([
      ["control_plane", `sr_17_${n}_f`],
    ]);
    expect(last.history.map((h) => h.message).join("\n")).toContain(
      "rollback prerequisites passed on every lane",
    );
    expect(r.prerequisites?.checks.every((c) => c.outcome === "pass")).toBe(true);
  });

  it(`at most ${PROBES_IN_FLIGHT_MAX} probes are in flight; each one that passes lets the next begin`, () => {
    const n = PROBES_IN_FLIGHT_MAX + 3;
    const s = ok(rollback(n), { type: "start" });
    expect(dispatched(s.effects)).toHaveLength(PROBES_IN_FLIGHT_MAX);
    let r = bind(s.release, 5);
    const res = ok(r, answer(r, 5));
    expect(dispatched(res.effects)).toEqual([`sr_17_${PROBES_IN_FLIGHT_MAX}_f`]);
    r = res.release;
    expect(r.step_runs).toHaveLength(PROBES_IN_FLIGHT_MAX + 1);
    expect(r.cursor).toBe(0);
  });

  it("a pause holds the probes not begun; those in flight settle; resume begins the rest", () => {
    const n = PROBES_IN_FLIGHT_MAX + 1;
    let r = ok(rollback(n), { type: "start" }).release;
    r = ok(r, { type: "pause", actor: "alice", reason: "look first" }).release;
    r = bind(r, 0);
    const passed = ok(r, answer(r, 0));
    expect(dispatched(passed.effects)).toEqual([]);
    r = passed.release;
    expect(r.state).toBe("paused");
    const resumed = ok(r, { type: "resume", actor: "alice" });
    expect(dispatched(resumed.effects)).toEqual([`sr_17_${PROBES_IN_FLIGHT_MAX}_f`]);
    expect(resumed.release.state).toBe("running");
  });

  it("one failed probe aborts with nothing compensated; the other probes are cancelled or refused", () => {
    const n = 3;
    let r = ok(rollback(n), { type: "start" }).release;
    r = bind(bind(r, 0), 1); // probe 2 was dispatched, no runner started it
    const before = r;
    const failed = ok(r, answer(r, 1, "image_present"));
    r = failed.release;
    expect(r.state).toBe("aborted");
    expect(r.high_water_mark).toBe(-1);
    expect(failed.effects.filter((e) => e.type !== "deadline")).toEqual([]);
    expect(r.reason).toContain(
      `lane ${laneOf(r, 1)} image_present: image is not on this machine; fix: load the image again`,
    );
    expect(r.step_runs.map((x) => x.state)).toEqual(["running", "failed", "failed"]);
    expect(r.step_runs[2]?.last_error).toContain(`the probe of lane ${laneOf(r, 1)} failed first`);
    for (const i of [0, 2]) {
      for (const c of r.prerequisites?.checks.filter((x) => x.lane === laneOf(r, i)) ?? []) {
        expect(c.outcome).toBe("skipped");
        expect(c.message).toMatch(/^not awaited: the probe of lane l1 failed first/);
      }
    }
    // Probe 0's runner answers late; probe 2's runner starts after the abort.
    const late = refused(r, answer(r, 0));
    expect([late.status, late.code]).toEqual([409, "late"]);
    const stale = refused(r, preflightOf(before, idOf(r, 2), { run_id: "92" }));
    expect([stale.status, stale.code]).toEqual([409, "stale"]);
    // Their deadlines change nothing.
    const dl = ok(r, {
      type: "deadline",
      step_run_id: idOf(r, 0),
      kind: "callback",
      dispatch: 1,
      attempt: 1,
    });
    expect(dl.changed).toBe(false);
  });
});
