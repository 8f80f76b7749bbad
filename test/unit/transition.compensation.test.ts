/**
 * Compensation and operator events (docs/state-machine.md "Failure handling", "Compensation",
 * "Operator events"), table rows first, then walks through whole compensations.
 */
import { describe, expect, it } from "vitest";
import { transition } from "../../engine/src/domain/transition.ts";
import type { Release, ReleaseEvent } from "../../engine/src/domain/types.ts";
import { type StepSpec, waveSpecs } from "../support/manifest-fixture.ts";
import {
  advanceTo,
  callbackOf,
  effectTypes,
  finishCurrent,
  ok,
  preflightOf,
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

const abortEv: ReleaseEvent = { type: "abort", actor: "ops", reason: "bad metrics" };
const succeeded = () => advanceTo(release(runnerThenCp()), 3);

interface Row {
  name: string;
  setup: () => Release;
  event: (r: Release) => ReleaseEvent;
  state?: Release["state"];
  effects?: string[];
  generation?: number;
  refused?: { status: number; code: string };
}

const rows: Row[] = [
  {
    name: "abort pending: aborted, no effects (F14a)",
    setup: () => release(runnerThenCp()),
    event: () => abortEv,
    state: "aborted",
    effects: [],
    generation: 2,
  },
  {
    name: "abort with a dispatch no runner bound: cancelled, aborted, no effects",
    setup: started,
    event: () => abortEv,
    state: "aborted",
    effects: [],
  },
  {
    name: "abort with a runner at work: compensating, waits for it",
    setup: boundAt0,
    event: () => abortEv,
    state: "compensating",
    effects: [],
    generation: 2,
  },
  {
    name: "abort paused on an unknown runner outcome: compensates step 0",
    setup: pausedUnknown,
    event: () => abortEv,
    state: "compensating",
    effects: ["dispatch:sr_17_0_b"],
  },
  {
    name: "abort succeeded: 409 (F14b)",
    setup: succeeded,
    event: () => abortEv,
    refused: { status: 409, code: "conflict" },
  },
  {
    name: "abort aborted: 409",
    setup: () => ok(release(runnerThenCp()), abortEv).release,
    event: () => abortEv,
    refused: { status: 409, code: "conflict" },
  },
  {
    name: "abort compensating: 409",
    setup: compensating,
    event: () => abortEv,
    refused: { status: 409, code: "conflict" },
  },
  {
    name: "abort needs_operator: 409",
    setup: needsOperator,
    event: () => abortEv,
    refused: { status: 409, code: "conflict" },
  },
  {
    name: "resume paused: the step run is dispatched again, running",
    setup: pausedUnknown,
    event: () => ({ type: "resume", actor: "ops" }),
    state: "running",
    effects: ["dispatch:sr_17_0_f"],
  },
  {
    name: "resume running: 409",
    setup: boundAt0,
    event: () => ({ type: "resume", actor: "ops" }),
    refused: { status: 409, code: "conflict" },
  },
  {
    name: "resume needs_operator: 409",
    setup: needsOperator,
    event: () => ({ type: "resume", actor: "ops" }),
    refused: { status: 409, code: "conflict" },
  },
  {
    name: "retry the step run a paused release waits on: running",
    setup: pausedUnknown,
    event: () => ({ type: "retry", actor: "ops", step_run_id: "sr_17_0_f" }),
    state: "running",
    effects: ["dispatch:sr_17_0_f"],
  },
  {
    name: "retry the backward step run a needs_operator release waits on: compensating",
    setup: needsOperator,
    event: () => ({ type: "retry", actor: "ops", step_run_id: "sr_17_1_b" }),
    state: "compensating",
    effects: ["cp:apply:sr_17_1_b"],
  },
  {
    name: "retry a running step run: 409",
    setup: boundAt0,
    event: () => ({ type: "retry", actor: "ops", step_run_id: "sr_17_0_f" }),
    refused: { status: 409, code: "conflict" },
  },
  {
    name: "retry a forward step run while needs_operator: 409",
    setup: needsOperator,
    event: () => ({ type: "retry", actor: "ops", step_run_id: "sr_17_1_f" }),
    refused: { status: 409, code: "conflict" },
  },
  {
    name: "retry an unknown step run id: 404",
    setup: pausedUnknown,
    event: () => ({ type: "retry", actor: "ops", step_run_id: "sr_17_9_f" }),
    refused: { status: 404, code: "not_found" },
  },
  {
    name: "a failed backward step run with no retries left: needs_operator",
    setup: compensating,
    event: () => ({
      type: "applied",
      step_run_id: "sr_17_1_b",
      outcome: "failed",
      message: "HTTP 409",
    }),
    state: "needs_operator",
    effects: [],
  },
  {
    name: "outcomes after the end are recorded and change nothing",
    setup: succeeded,
    event: () => ({ type: "applied", step_run_id: "sr_17_1_f", outcome: "ok", message: "" }),
    state: "succeeded",
    effects: [],
  },
];

describe("transition: compensation and operator events (table)", () => {
  it.each(rows)("$name", (row) => {
    const before = row.setup();
    const res = transition(before, row.event(before), T0 + 1);
    if (row.refused) {
      if (res.ok) throw new Error(`expected a refusal, got changed=${res.changed}`);
      expect({ status: res.status, code: res.code }).toEqual(row.refused);
      return;
    }
    if (!res.ok) throw new Error(`refused: ${res.reason}`);
    if (row.state) expect(res.release.state).toBe(row.state);
    if (row.effects) expect(effectTypes(res.effects)).toEqual(row.effects);
    if (row.generation !== undefined) expect(res.release.generation).toBe(row.generation);
  });
});

describe("compensation walks", () => {
  it("waits for an in-flight forward step run, then undoes it", () => {
    let r = ok(boundAt0(), abortEv).release;
    const res = ok(r, callbackOf("sr_17_0_f", "pass"));
    expect(effectTypes(res.effects)).toEqual(["dispatch:sr_17_0_b"]);
    r = verifyPasses(finishCurrent(res.release, "pass"));
    expect(r.state).toBe("rolled_back");
    expect(r.step_runs.filter((s) => s.direction === "bwd").map((s) => s.id)).toEqual([
      "sr_17_0_b",
    ]);
  });

  it("a control-plane write in flight at abort: compensation waits for its outcome", () => {
    let r = advanceTo(release(runnerThenCp()), 1);
    const a = ok(r, abortEv);
    expect(a.release.state).toBe("compensating");
    expect(a.effects).toEqual([]);
    const b = ok(a.release, {
      type: "applied",
      step_run_id: "sr_17_1_f",
      outcome: "unknown",
      message: "timeout",
    });
    // No read of the forward write: the backward write is absolute and newer.
    expect(effectTypes(b.effects)).toEqual(["cp:apply:sr_17_1_b"]);
    r = verifyPasses(finishCurrent(finishCurrent(b.release, "pass"), "pass"));
    expect(r.state).toBe("rolled_back");
  });

  it("backward step runs carry the new generation and …:bwd:… keys", () => {
    const r = compensating();
    const b = sr(r, 1, "bwd");
    expect(r.generation).toBe(2);
    expect(b.operation_key).toBe("r17:1:bwd:lane=l1:excluded=true");
    const e = ok(finishCurrent(started(), "pass"), {
      type: "applied",
      step_run_id: "sr_17_1_f",
      outcome: "failed",
      message: "x",
    }).effects[0]!;
    expect(e).toMatchObject({
      type: "control_plane",
      generation: 2,
      operation_key: "r17:1:bwd:lane=l1:excluded=true",
    });
  });

  it("a backward runner step run preflights with the backward tool; retries count against step.retries", () => {
    const specs: StepSpec[] = [
      { name: "attach_queue_lane", kind: "runner", backward: true, retries: 1 },
      { name: "include_lane", kind: "control_plane", backward: true },
    ];
    let r = ok(finishCurrent(started(specs), "pass"), {
      type: "applied",
      step_run_id: "sr_17_1_f",
      outcome: "failed",
      message: "x",
    }).release;
    r = finishCurrent(r, "pass"); // step 1 backward
    expect(sr(r, 0, "bwd").state).toBe("dispatching");
    const p = transition(r, preflightOf(r, "sr_17_0_b", { tool: "attach-queue-lane" }), T0);
    expect(p.ok).toBe(false);
    r = ok(r, preflightOf(r, "sr_17_0_b")).release;
    r = ok(r, callbackOf("sr_17_0_b", "fail")).release;
    expect(sr(r, 0, "bwd")).toMatchObject({ state: "dispatching", dispatch: 2, retries_used: 1 });
    r = finishCurrent(r, "fail");
    expect(r.state).toBe("needs_operator");
    r = ok(r, { type: "retry", actor: "ops", step_run_id: "sr_17_0_b" }).release;
    expect(sr(r, 0, "bwd")).toMatchObject({ dispatch: 3, retries_used: 1 });
    r = verifyPasses(finishCurrent(r, "pass"));
    expect(r.state).toBe("rolled_back");
  });

  it("the compensation's cause survives an operator's retry or resolve of a backward step run, through to rolled_back", () => {
    const cause = compensating().reason;
    expect(cause).toMatch(/HTTP 422/);
    const undoRest = (r: Release): Release => {
      for (let i = 0; i < 5 && r.state === "compensating" && r.cursor >= 0; i++) {
        r = finishCurrent(r, "pass");
      }
      return verifyPasses(r);
    };
    const stuck = needsOperator();
    expect(stuck.reason).toMatch(/HTTP 500; fix the lane by hand/);
    let retried = ok(stuck, { type: "retry", actor: "ops", step_run_id: "sr_17_1_b" }).release;
    expect(retried).toMatchObject({ state: "compensating", reason: cause });
    retried = undoRest(retried);
    expect(retried).toMatchObject({ state: "rolled_back", reason: cause });
    const resolved = ok(stuck, {
      type: "resolve",
      actor: "ops",
      step_run_id: "sr_17_1_b",
      reason: "excluded by hand",
    }).release;
    expect(resolved).toMatchObject({ state: "compensating", reason: cause });
    expect(undoRest(resolved)).toMatchObject({ state: "rolled_back", reason: cause });
  });

  it("a policy of pause holds the release instead of compensating", () => {
    const specs: StepSpec[] = [
      { name: "include_lane", kind: "control_plane", backward: true, on_failure: "pause" },
    ];
    const r = ok(started(specs), {
      type: "applied",
      step_run_id: "sr_17_0_f",
      outcome: "failed",
      message: "HTTP 422",
    }).release;
    expect(r.state).toBe("paused");
    expect(r.reason).toMatch(/policy is pause/);
  });

  it("compensation of the wave table undoes 5,4,3,1,0 (assertions 6 and 2 skipped)", () => {
    let r = advanceTo(release(waveSpecs(10)), 6);
    r = ok(r, {
      type: "applied",
      step_run_id: "sr_17_6_f",
      outcome: "failed",
      message: "weights differ",
    }).release;
    const order: number[] = [];
    for (let i = 0; i < 10 && r.state === "compensating" && r.cursor >= 0; i++) {
      order.push(r.cursor);
      r = finishCurrent(r, "pass");
    }
    r = verifyPasses(r);
    expect(r.state).toBe("rolled_back");
    expect(order).toEqual([5, 4, 3, 1, 0]);
  });

  it("a crash mid-compensation resumes at the first backward step not yet done; re-performed effects are replays", () => {
    let r = advanceTo(release(waveSpecs(10)), 6);
    r = ok(r, {
      type: "applied",
      step_run_id: "sr_17_6_f",
      outcome: "failed",
      message: "weights differ",
    }).release;
    r = finishCurrent(r, "pass"); // step 5 undone
    // Crash: the store hands back the release as JSON; the outbox still holds step 5's row,
    // whose effect is performed again and reported again.
    const stored = JSON.parse(JSON.stringify(r)) as Release;
    const again = ok(stored, {
      type: "applied",
      step_run_id: "sr_17_5_b",
      outcome: "ok",
      message: "replayed",
    });
    expect([again.changed, again.effects]).toEqual([false, []]);
    expect(stored.cursor).toBe(4);
    expect(sr(stored, 4, "bwd").state).toBe("applying");
    let cur = stored;
    while (cur.state === "compensating") cur = finishCurrent(cur, "pass");
    expect(cur.state).toBe("rolled_back");
    expect(
      cur.step_runs
        .filter((s) => s.direction === "fwd")
        .every((s) => s.state === "succeeded" || s.step_index === 6),
    ).toBe(true);
  });
});
