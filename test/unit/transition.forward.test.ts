/**
 * Table-driven tests of the forward path (docs/state-machine.md "Starting and moving
 * forward", "Runner steps", "Control-plane steps"), in the style of xstate's cd.test.ts:
 * each row is (setup, event, expected state and effects) or (setup, event, refusal).
 */
import { describe, expect, it } from "vitest";
import { newRelease, transition } from "../../engine/src/domain/transition.ts";
import type { Release, ReleaseEvent } from "../../engine/src/domain/types.ts";
import { stepRunId } from "../../engine/src/protocol/ids.ts";
import {
  CALLBACK_DEADLINE_MS,
  START_DEADLINE_MS,
  type StepSpec,
  waveSpecs,
} from "../support/manifest-fixture.ts";
import {
  advanceTo,
  callbackOf,
  effectTypes,
  ok,
  preflightOf,
  release,
  sr,
  srId,
  T0,
} from "../support/sim/drive.ts";

const runnerFirst: StepSpec[] = [
  { name: "attach_queue_lane", kind: "runner", backward: true },
  { name: "include_lane", kind: "control_plane", backward: true },
];
const cpOnly: StepSpec[] = [
  { name: "include_lane", kind: "control_plane", backward: true },
  { name: "assert_traffic_observed", kind: "control_plane", backward: false },
];

const started = (specs: StepSpec[]) => ok(release(specs), { type: "start" }).release;
const dispatched = () => {
  const r = started(runnerFirst);
  return ok(r, { type: "dispatch_accepted", step_run_id: srId(r, 0), dispatch: 1 }).release;
};
const bound = () => {
  const r = dispatched();
  return ok(r, preflightOf(r, srId(r, 0))).release;
};
const cpUnknown = () => {
  const r = started(cpOnly);
  return ok(r, {
    type: "applied",
    step_run_id: srId(r, 0),
    outcome: "unknown",
    message: "HTTP 503",
  }).release;
};

interface Row {
  name: string;
  setup: () => Release;
  event: (r: Release) => ReleaseEvent;
  state?: Release["state"];
  /** [step index, direction, step-run state] */
  stepRun?: [number, "fwd" | "bwd", string];
  effects?: string[];
  hwm?: number;
  cursor?: number;
  changed?: boolean;
  refused?: { status: number; code: string };
}

const rows: Row[] = [
  {
    name: "start: pending -> running, step 0 (control plane) applying",
    setup: () => release(cpOnly),
    event: () => ({ type: "start" }),
    state: "running",
    stepRun: [0, "fwd", "applying"],
    effects: ["cp:apply:sr_17_0_f"],
    hwm: 0,
    cursor: 0,
  },
  {
    name: "start: runner step 0 dispatching, hwm stays -1",
    setup: () => release(runnerFirst),
    event: () => ({ type: "start" }),
    state: "running",
    stepRun: [0, "fwd", "dispatching"],
    effects: ["dispatch:sr_17_0_f"],
    hwm: -1,
  },
  {
    name: "start twice is refused",
    setup: () => started(cpOnly),
    event: () => ({ type: "start" }),
    refused: { status: 409, code: "conflict" },
  },
  {
    name: "dispatch_accepted: dispatched, hwm moves, start deadline",
    setup: () => started(runnerFirst),
    event: (r) => ({ type: "dispatch_accepted", step_run_id: srId(r, 0), dispatch: 1 }),
    stepRun: [0, "fwd", "dispatched"],
    effects: ["deadline:sr_17_0_f"],
    hwm: 0,
  },
  {
    name: "dispatch_accepted for an older dispatch changes nothing",
    setup: () => started(runnerFirst),
    event: (r) => ({ type: "dispatch_accepted", step_run_id: srId(r, 0), dispatch: 7 }),
    changed: false,
    effects: [],
  },
  {
    name: "dispatch_accepted twice: the second changes nothing",
    setup: dispatched,
    event: (r) => ({ type: "dispatch_accepted", step_run_id: srId(r, 0), dispatch: 1 }),
    changed: false,
    effects: [],
  },
  {
    name: "dispatch_failed retryable: same dispatch sent again with backoff",
    setup: () => started(runnerFirst),
    event: (r) => ({
      type: "dispatch_failed",
      step_run_id: srId(r, 0),
      dispatch: 1,
      retryable: true,
      message: "HTTP 502",
    }),
    stepRun: [0, "fwd", "dispatching"],
    effects: ["dispatch:sr_17_0_f"],
    hwm: -1,
  },
  {
    name: "preflight binds attempt 1 and sets the callback deadline",
    setup: dispatched,
    event: (r) => preflightOf(r, srId(r, 0)),
    stepRun: [0, "fwd", "running"],
    effects: ["deadline:sr_17_0_f"],
    hwm: 0,
  },
  {
    name: "preflight may beat the 204: binds from dispatching",
    setup: () => started(runnerFirst),
    event: (r) => preflightOf(r, srId(r, 0)),
    stepRun: [0, "fwd", "running"],
    hwm: 0,
  },
  {
    name: "callback pass: succeeded, next step begins",
    setup: bound,
    event: (r) => callbackOf(srId(r, 0), "pass"),
    state: "running",
    stepRun: [0, "fwd", "succeeded"],
    effects: ["cp:apply:sr_17_1_f"],
    cursor: 1,
    hwm: 1,
  },
  {
    name: "applied ok: succeeded, next step begins",
    setup: () => started(cpOnly),
    event: (r) => ({ type: "applied", step_run_id: srId(r, 0), outcome: "ok", message: "ok" }),
    stepRun: [0, "fwd", "succeeded"],
    effects: ["cp:apply:sr_17_1_f"],
    cursor: 1,
  },
  {
    name: "applied ok on the last step: release succeeded, no effects",
    setup: () => advanceTo(release(cpOnly), 1),
    event: (r) => ({ type: "applied", step_run_id: srId(r, 1), outcome: "ok", message: "ok" }),
    state: "succeeded",
    effects: [],
    cursor: 2,
  },
  {
    name: "applied unknown: unknown, read the control plane",
    setup: () => started(cpOnly),
    event: (r) => ({
      type: "applied",
      step_run_id: srId(r, 0),
      outcome: "unknown",
      message: "timeout",
    }),
    stepRun: [0, "fwd", "unknown"],
    effects: ["cp:read:sr_17_0_f"],
  },
  {
    // The timed-out request may still land later; the identical keyed write makes it a replay.
    name: "observed matches after a timed-out apply: the identical keyed apply again",
    setup: cpUnknown,
    event: (r) => ({ type: "observed", step_run_id: srId(r, 0), matches: true, message: "" }),
    stepRun: [0, "fwd", "applying"],
    effects: ["cp:apply:sr_17_0_f"],
  },
  {
    name: "observed matches after a 2xx that could not be read back: succeeded",
    setup: () => {
      const r = started(cpOnly);
      return ok(r, {
        type: "applied",
        step_run_id: srId(r, 0),
        outcome: "ok",
        message: "applied",
        read_back: { matches: null, message: "HTTP 500" },
      }).release;
    },
    event: (r) => ({ type: "observed", step_run_id: srId(r, 0), matches: true, message: "" }),
    stepRun: [0, "fwd", "succeeded"],
    effects: ["cp:apply:sr_17_1_f"],
  },
  {
    name: "observed mismatch: the identical keyed apply again",
    setup: cpUnknown,
    event: (r) => ({
      type: "observed",
      step_run_id: srId(r, 0),
      matches: false,
      message: "weights differ",
    }),
    stepRun: [0, "fwd", "applying"],
    effects: ["cp:apply:sr_17_0_f"],
  },
  {
    name: "observed unreadable: read again",
    setup: cpUnknown,
    event: (r) => ({
      type: "observed",
      step_run_id: srId(r, 0),
      matches: null,
      message: "HTTP 500",
    }),
    stepRun: [0, "fwd", "unknown"],
    effects: ["cp:read:sr_17_0_f"],
  },
  {
    name: "applied twice: the second changes nothing",
    setup: () => advanceTo(release(cpOnly), 1),
    event: (r) => ({ type: "applied", step_run_id: srId(r, 0), outcome: "ok", message: "ok" }),
    changed: false,
    effects: [],
  },
  {
    name: "unknown step run: 404",
    setup: () => started(cpOnly),
    event: () => ({ type: "applied", step_run_id: "sr_17_9_f", outcome: "ok", message: "" }),
    refused: { status: 404, code: "not_found" },
  },
  {
    name: "applied for a runner step run: 422",
    setup: () => started(runnerFirst),
    event: (r) => ({ type: "applied", step_run_id: srId(r, 0), outcome: "ok", message: "" }),
    refused: { status: 422, code: "illegal_transition" },
  },
  {
    name: "preflight for a control-plane step run: 422",
    setup: () => started(cpOnly),
    event: (r) => preflightOf(r, srId(r, 0)),
    refused: { status: 422, code: "illegal_transition" },
  },
  {
    name: "dispatch outcome for a control-plane step run: 422",
    setup: () => started(cpOnly),
    event: (r) => ({ type: "dispatch_accepted", step_run_id: srId(r, 0), dispatch: 1 }),
    refused: { status: 422, code: "illegal_transition" },
  },
];

describe("transition: forward path (table)", () => {
  it.each(rows)("$name", (row) => {
    const before = row.setup();
    const res = transition(before, row.event(before), T0 + 5);
    if (row.refused) {
      expect(res.ok).toBe(false);
      if (res.ok) return;
      expect({ status: res.status, code: res.code }).toEqual(row.refused);
      expect(res.history).toHaveLength(1);
      expect(res.history[0]!.outcome).toBe("refused");
      expect(res.history[0]!.message).toMatch(/^\[engine\] /);
      return;
    }
    expect(res.ok).toBe(true);
    if (!res.ok) return;
    if (row.changed !== undefined) expect(res.changed).toBe(row.changed);
    if (res.changed) expect(res.release.resource_version).toBe(before.resource_version + 1);
    else expect(res.release).toBe(before);
    if (row.state) expect(res.release.state).toBe(row.state);
    if (row.stepRun)
      expect(sr(res.release, row.stepRun[0], row.stepRun[1]).state).toBe(row.stepRun[2]);
    if (row.effects) expect(effectTypes(res.effects)).toEqual(row.effects);
    if (row.hwm !== undefined) expect(res.release.high_water_mark).toBe(row.hwm);
    if (row.cursor !== undefined) expect(res.release.cursor).toBe(row.cursor);
    for (const h of res.history) expect(h.message).toMatch(/^\[engine\] /);
  });
});

describe("transition: forward details", () => {
  it("a whole wave goes from pending to succeeded with one effect per step", () => {
    let r = release(waveSpecs(10));
    r = advanceTo(r, 7);
    expect(r.state).toBe("succeeded");
    expect(r.high_water_mark).toBe(6);
    expect(r.step_runs.map((s) => `${s.id}:${s.state}`)).toEqual(
      [0, 1, 2, 3, 4, 5, 6].map((i) => `sr_17_${i}_f:succeeded`),
    );
  });

  it("operation keys are {release}:{step}:{fwd|bwd}:{target}", () => {
    const r = advanceTo(release(waveSpecs(10)), 6);
    expect(sr(r, 5).operation_key).toBe("r17:5:fwd:traffic=10");
    expect(sr(r, 1).operation_key).toBe("r17:1:fwd:lane=l1");
  });

  it("effects carry the release's generation and the step's tool, args and key", () => {
    const r = release(runnerFirst);
    const res = ok(r, { type: "start" });
    const e = res.effects[0]!;
    expect(e).toMatchObject({
      type: "dispatch",
      step_run_id: "sr_17_0_f",
      dispatch: 1,
      operation_key: "r17:0:fwd:lane=l1",
      tool: "attach-queue-lane",
      generation: 1,
      not_before: null,
    });
  });

  it("deadlines are at now + the step's deadline", () => {
    const r0 = started(runnerFirst);
    const r1 = ok(
      r0,
      { type: "dispatch_accepted", step_run_id: "sr_17_0_f", dispatch: 1 },
      T0 + 10,
    );
    expect(r1.effects).toEqual([
      {
        type: "deadline",
        step_run_id: "sr_17_0_f",
        kind: "start",
        dispatch: 1,
        attempt: 0,
        at: T0 + 10 + START_DEADLINE_MS,
      },
    ]);
    const r2 = ok(r1.release, preflightOf(r1.release, "sr_17_0_f"), T0 + 20);
    expect(r2.effects).toEqual([
      {
        type: "deadline",
        step_run_id: "sr_17_0_f",
        kind: "callback",
        dispatch: 1,
        attempt: 1,
        at: T0 + 20 + CALLBACK_DEADLINE_MS,
      },
    ]);
    expect(r2.reply).toEqual({
      proceed: true,
      step_run_id: "sr_17_0_f",
      attempt: 1,
      release_id: "r17",
      generation: 1,
    });
  });

  it("retryable dispatch failures back off 1 s, 2 s, 4 s, 8 s, then the step run is unknown and the release paused", () => {
    let r = started(runnerFirst);
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = ok(
        r,
        {
          type: "dispatch_failed",
          step_run_id: "sr_17_0_f",
          dispatch: 1,
          retryable: true,
          message: "HTTP 502",
        },
        T0,
      );
      const e = res.effects[0]!;
      expect(e.type).toBe("dispatch");
      if (e.type === "dispatch") waits.push((e.not_before ?? 0) - T0);
      r = res.release;
    }
    expect(waits).toEqual([1000, 2000, 4000, 8000]);
    const last = ok(r, {
      type: "dispatch_failed",
      step_run_id: "sr_17_0_f",
      dispatch: 1,
      retryable: true,
      message: "HTTP 502",
    });
    expect(last.effects).toEqual([]);
    expect(sr(last.release, 0).state).toBe("unknown");
    expect(last.release.state).toBe("paused");
    expect(last.release.high_water_mark).toBe(0);
  });

  it("step retries resend the same step run with the same operation key and a new dispatch", () => {
    const specs: StepSpec[] = [
      { name: "attach_queue_lane", kind: "runner", backward: true, retries: 1 },
    ];
    const r = ok(bound0(specs), callbackOf("sr_17_0_f", "fail")).release;
    const s = sr(r, 0);
    expect(r.state).toBe("running");
    expect(s).toMatchObject({
      state: "dispatching",
      dispatch: 2,
      retries_used: 1,
      bound_run_id: null,
      operation_key: "r17:0:fwd:lane=l1",
    });
    expect(s.attempts.map((a) => a.state)).toEqual(["fenced"]);
  });

  it("a release with no steps succeeds on start", () => {
    const res = ok(release([]), { type: "start" });
    expect(res.release.state).toBe("succeeded");
    expect(res.effects).toEqual([]);
  });
});

function bound0(specs: StepSpec[]): Release {
  const r = started(specs);
  return ok(r, preflightOf(r, "sr_17_0_f")).release;
}

describe("newRelease", () => {
  it("is pending with hwm -1, cursor 0, resource_version 1, generation 1 and no step runs", () => {
    const r = release(cpOnly, 42);
    expect(r).toMatchObject({
      id: "r42",
      state: "pending",
      high_water_mark: -1,
      cursor: 0,
      resource_version: 1,
      generation: 1,
      step_runs: [],
      reason: null,
      created_at: T0,
      updated_at: T0,
    });
  });
  it("refuses an id that does not match the release number", () => {
    expect(() => newRelease("r1", 2, release(cpOnly).manifest, "d".repeat(64), T0)).toThrow(
      /\[engine\] release id r1 must be r<number>/,
    );
    expect(() => newRelease("x2", 2, release(cpOnly).manifest, "d".repeat(64), T0)).toThrow(
      RangeError,
    );
  });
  it("step-run ids follow stepRunId: sr_<release>_<step>_<f|b>", () => {
    const r = ok(release(cpOnly, 42), { type: "start" }).release;
    expect(r.step_runs.map((s) => s.id)).toEqual([stepRunId(42, 0, false)]);
    expect(r.step_runs[0]!.id).toBe("sr_42_0_f");
  });
});
