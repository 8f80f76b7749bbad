/**
 * Preflight, callback and deadline rows for runner step runs (docs/state-machine.md "Runner
 * steps", docs/state-machine.md): every refusal listed there has a row here.
 */
import { describe, expect, it } from "vitest";
import { transition } from "../../engine/src/domain/transition.ts";
import type { Release, ReleaseEvent } from "../../engine/src/domain/types.ts";
import { manifestOf, OTHER_DIGEST, type StepSpec } from "../support/manifest-fixture.ts";
import {
  callbackOf,
  finishCurrent,
  ok,
  preflightOf,
  release,
  sr,
  T0,
  verifyPasses,
} from "../support/sim/drive.ts";

const specs: StepSpec[] = [
  { name: "attach_queue_lane", kind: "runner", backward: true },
  { name: "include_lane", kind: "control_plane", backward: true },
];
const pauseSpecs: StepSpec[] = [
  { name: "attach_queue_lane", kind: "runner", backward: true, on_failure: "pause" },
];
const S0 = "sr_17_0_f";

const started = (s = specs): Release => ok(release(s), { type: "start" }).release;
const dispatched = (s = specs) =>
  ok(started(s), { type: "dispatch_accepted", step_run_id: S0, dispatch: 1 }).release;
const bound = (s = specs) => {
  const r = dispatched(s);
  return ok(r, preflightOf(r, S0)).release;
};
/** Attempt 1 failed, policy pause: the release is paused on step run 0. */
const pausedAfterFail = () => ok(bound(pauseSpecs), callbackOf(S0, "fail")).release;
/** Attempt 1 (run 9001/1) re-run from the Actions UI as run attempt 2. */
const rerun = () => {
  const r = pausedAfterFail();
  return ok(r, preflightOf(r, S0, { run_attempt: 2 })).release;
};
/** Start deadline passed with no preflight: unknown, release paused. */
const lost = () =>
  ok(dispatched(), { type: "deadline", step_run_id: S0, kind: "start", dispatch: 1, attempt: 0 })
    .release;
/** Compensation after step 1 (control plane) was refused: step 1 backward first, then 0. */
const compensating = () => {
  let r = finishCurrent(started(), "pass");
  r = ok(r, {
    type: "applied",
    step_run_id: "sr_17_1_f",
    outcome: "failed",
    message: "HTTP 409",
  }).release;
  return r;
};

interface Row {
  name: string;
  setup: () => Release;
  event: (r: Release) => ReleaseEvent;
  refused?: { status: number; code: string; reason?: RegExp };
  changed?: boolean;
  srState?: string;
  state?: Release["state"];
  reply?: Record<string, unknown>;
}

const rows: Row[] = [
  // preflight, checks in the documented order
  {
    name: "preflight 1: unknown step run -> 404",
    setup: dispatched,
    event: (r) => preflightOf(r, "sr_17_5_f"),
    refused: { status: 404, code: "not_found" },
  },
  {
    name: "preflight 1: another release -> 409 stale",
    setup: dispatched,
    event: (r) => preflightOf(r, S0, { release_id: "r18" }),
    refused: { status: 409, code: "stale", reason: /release r18 is not r17/ },
  },
  {
    name: "preflight 1: another generation -> 409 stale",
    setup: dispatched,
    event: (r) => preflightOf(r, S0, { generation: 0 }),
    refused: { status: 409, code: "stale", reason: /generation 0 is not the current generation 1/ },
  },
  {
    name: "preflight 1: another manifest digest -> 409 stale",
    setup: dispatched,
    event: (r) => preflightOf(r, S0, { manifest_digest: OTHER_DIGEST }),
    refused: { status: 409, code: "stale" },
  },
  {
    name: "preflight 1: another tool -> 409",
    setup: dispatched,
    event: (r) => preflightOf(r, S0, { tool: "run-smoke" }),
    refused: { status: 409, code: "wrong_tool" },
  },
  {
    name: "preflight 1: commit differs from the pinned tool revision -> 409",
    setup: () => {
      const r = ok(release(manifestOf(specs, { tool_revision: "a".repeat(40) })), {
        type: "start",
      }).release;
      return r;
    },
    event: (r) => preflightOf(r, S0, { sha: "b".repeat(40) }),
    refused: { status: 409, code: "revision_mismatch" },
  },
  {
    name: "preflight 1: commit equals the pinned tool revision -> proceeds",
    setup: () =>
      ok(release(manifestOf(specs, { tool_revision: "a".repeat(40) })), { type: "start" }).release,
    event: (r) => preflightOf(r, S0, { sha: "a".repeat(40) }),
    srState: "running",
  },
  {
    name: "preflight 2: the step run already succeeded -> 409",
    setup: () => finishCurrent(started(), "pass"),
    event: (r) => preflightOf(r, S0, { run_id: "9001" }),
    refused: { status: 409, code: "not_wanted", reason: /already succeeded/ },
  },
  {
    name: "preflight 0: a re-run of a forward step run while compensating -> 409 rerun_declined",
    setup: () => {
      const r = bound();
      return ok(r, { type: "abort", actor: "ops", reason: "test" }).release;
    },
    event: (r) => preflightOf(r, S0, { run_attempt: 2 }),
    refused: {
      status: 409,
      code: "rerun_declined",
      reason: /is declined: release r17 is compensating/,
    },
  },
  {
    name: "preflight 2: a backward step run while not compensating -> 409",
    setup: () => {
      let r = finishCurrent(compensating(), "pass");
      r = ok(r, { type: "dispatch_accepted", step_run_id: "sr_17_0_b", dispatch: 1 }).release;
      return ok(r, {
        type: "deadline",
        step_run_id: "sr_17_0_b",
        kind: "start",
        dispatch: 1,
        attempt: 0,
      }).release;
    },
    event: (r) => preflightOf(r, "sr_17_0_b"),
    refused: { status: 409, code: "not_wanted", reason: /needs_operator/ },
  },
  {
    name: "preflight 3: an older dispatch -> 409",
    setup: () => ok(lost(), { type: "retry", actor: "ops", step_run_id: S0 }).release,
    event: (r) => preflightOf(r, S0, { dispatch: 1 }),
    refused: { status: 409, code: "stale_dispatch" },
  },
  {
    name: "preflight 4: first run to ask binds attempt 1",
    setup: dispatched,
    event: (r) => preflightOf(r, S0),
    srState: "running",
    reply: { proceed: true, attempt: 1 },
  },
  {
    name: "preflight 4: dispatch lost (start deadline passed) -> 409, retry instead",
    setup: lost,
    event: (r) => preflightOf(r, S0),
    refused: { status: 409, code: "not_wanted", reason: /dispatch lost/ },
  },
  {
    name: "preflight 5: another run id -> 409 duplicate delivery",
    setup: bound,
    event: (r) => preflightOf(r, S0, { run_id: "9002" }),
    refused: { status: 409, code: "duplicate_delivery", reason: /duplicate delivery/ },
  },
  {
    name: "preflight 6: same run and run attempt -> the same answer, nothing changes",
    setup: bound,
    event: (r) => preflightOf(r, S0),
    changed: false,
    reply: { proceed: true, attempt: 1 },
  },
  {
    name: "preflight 6: same run and run attempt after it failed -> 409",
    setup: pausedAfterFail,
    event: (r) => preflightOf(r, S0),
    refused: { status: 409, code: "fenced" },
  },
  {
    name: "preflight 7: a re-run (higher run attempt) opens attempt 2; paused -> running",
    setup: pausedAfterFail,
    event: (r) => preflightOf(r, S0, { run_attempt: 2 }),
    srState: "running",
    state: "running",
    reply: { attempt: 2 },
  },
  {
    name: "preflight 8: a lower run attempt -> 409 fenced",
    setup: rerun,
    event: (r) => preflightOf(r, S0, { run_attempt: 1 }),
    refused: { status: 409, code: "fenced" },
  },
  // callback
  {
    name: "callback: no such attempt -> 409",
    setup: bound,
    event: () => callbackOf(S0, "pass", { run_attempt: 3 }),
    refused: { status: 409, code: "no_such_attempt" },
  },
  {
    name: "callback: before any preflight -> 409",
    setup: dispatched,
    event: () => callbackOf(S0, "pass"),
    refused: { status: 409, code: "no_such_attempt" },
  },
  {
    name: "callback: an older attempt -> 409 fenced (F03)",
    setup: rerun,
    event: () => callbackOf(S0, "pass", { run_attempt: 1 }),
    refused: {
      status: 409,
      code: "fenced",
      reason:
        /^\[engine\] step run sr_17_0_f is fenced: attempt 1 < current attempt 2; the newer attempt's result stands$/,
    },
  },
  {
    name: "callback: the same attempt twice -> changed false (F13)",
    setup: () => finishCurrent(started(), "pass"),
    event: () => callbackOf(S0, "pass", { run_id: "9001" }),
    changed: false,
  },
  {
    name: "callback: late, release already rolled back -> 409",
    setup: () => {
      let r = ok(bound(), {
        type: "deadline",
        step_run_id: S0,
        kind: "callback",
        dispatch: 1,
        attempt: 1,
      }).release;
      r = ok(r, { type: "abort", actor: "ops", reason: "test" }).release;
      return verifyPasses(finishCurrent(r, "pass"));
    },
    event: () => callbackOf(S0, "pass"),
    refused: { status: 409, code: "late" },
  },
  {
    name: "callback pass: succeeded, next step",
    setup: bound,
    event: () => callbackOf(S0, "pass"),
    srState: "succeeded",
    state: "running",
  },
  {
    name: "callback fail: failed, compensation",
    setup: bound,
    event: () => callbackOf(S0, "fail"),
    srState: "failed",
    state: "compensating",
  },
  {
    name: "callback of the latest attempt settles an unknown step run",
    setup: () =>
      ok(bound(), { type: "deadline", step_run_id: S0, kind: "callback", dispatch: 1, attempt: 1 })
        .release,
    event: () => callbackOf(S0, "pass"),
    srState: "succeeded",
    state: "running",
  },
  {
    name: "callback of an in-flight forward step run during compensation is recorded",
    setup: () => ok(bound(), { type: "abort", actor: "ops", reason: "test" }).release,
    event: () => callbackOf(S0, "pass"),
    srState: "succeeded",
    state: "compensating",
  },
  // deadlines
  {
    name: "start deadline, no preflight: unknown, paused (F02a)",
    setup: dispatched,
    event: () => ({ type: "deadline", step_run_id: S0, kind: "start", dispatch: 1, attempt: 0 }),
    srState: "unknown",
    state: "paused",
  },
  {
    name: "start deadline of an older dispatch: ignored",
    setup: dispatched,
    event: () => ({ type: "deadline", step_run_id: S0, kind: "start", dispatch: 0, attempt: 0 }),
    changed: false,
  },
  {
    name: "start deadline after the preflight: ignored",
    setup: bound,
    event: () => ({ type: "deadline", step_run_id: S0, kind: "start", dispatch: 1, attempt: 0 }),
    changed: false,
  },
  {
    name: "callback deadline: attempt and step run unknown, paused",
    setup: bound,
    event: () => ({ type: "deadline", step_run_id: S0, kind: "callback", dispatch: 1, attempt: 1 }),
    srState: "unknown",
    state: "paused",
  },
  {
    name: "callback deadline of an older attempt: ignored",
    setup: rerun,
    event: () => ({ type: "deadline", step_run_id: S0, kind: "callback", dispatch: 1, attempt: 1 }),
    changed: false,
  },
  {
    name: "callback deadline after the callback: ignored",
    setup: () => finishCurrent(started(), "pass"),
    event: () => ({ type: "deadline", step_run_id: S0, kind: "callback", dispatch: 1, attempt: 1 }),
    changed: false,
  },
  {
    name: "retry deadline: ignored (backoff travels in not_before)",
    setup: bound,
    event: () => ({ type: "deadline", step_run_id: S0, kind: "retry", dispatch: 1, attempt: 1 }),
    changed: false,
  },
];

describe("transition: runner step runs (table)", () => {
  it.each(rows)("$name", (row) => {
    const before = row.setup();
    const res = transition(before, row.event(before), T0 + 1);
    if (row.refused) {
      if (res.ok) throw new Error(`expected a refusal, got changed=${res.changed}`);
      expect({ status: res.status, code: res.code }).toEqual({
        status: row.refused.status,
        code: row.refused.code,
      });
      if (row.refused.reason) expect(res.reason).toMatch(row.refused.reason);
      expect(res.history).toEqual([
        expect.objectContaining({ outcome: "refused", message: res.reason }),
      ]);
      return;
    }
    if (!res.ok) throw new Error(`refused: ${res.reason}`);
    if (row.changed !== undefined) expect(res.changed).toBe(row.changed);
    if (!res.changed) {
      expect(res.release).toBe(before);
      expect(res.effects).toEqual([]);
      expect(res.history.length).toBeGreaterThan(0);
    }
    if (row.srState) expect(sr(res.release, 0).state).toBe(row.srState);
    if (row.state) expect(res.release.state).toBe(row.state);
    if (row.reply) expect(res.reply).toMatchObject(row.reply);
  });
});

describe("transition: a result's status against its overall", () => {
  it.each([
    "timeout",
    "cancelled",
    "not_run",
    "failed",
    "declined",
    "invalid",
    "preflight_failed",
    "error",
  ])("status %s with overall pass is a failure, and the history says why", (status) => {
    const r = ok(bound(pauseSpecs), callbackOf(S0, "pass", { status })).release;
    expect(sr(r, 0).state).toBe("failed");
    expect(sr(r, 0).last_error).toBe(
      `the runner reported status ${status} with overall pass; a result whose status says the tool did not succeed is a failure`,
    );
    expect(r.state).toBe("paused");
  });
  it("succeeded, or a custom tool's own word, with overall pass is a pass", () => {
    for (const status of ["succeeded", "ok"]) {
      const r = ok(bound(), callbackOf(S0, "pass", { status })).release;
      expect(sr(r, 0).state).toBe("succeeded");
    }
  });
});

describe("transition: attempts", () => {
  it("a re-run fences every older attempt and numbers the new one", () => {
    const r = rerun();
    expect(sr(r, 0).attempts.map((a) => [a.n, a.run_attempt, a.state])).toEqual([
      [1, 1, "fenced"],
      [2, 2, "running"],
    ]);
  });
  it("a duplicate delivery never gets an attempt: at most one run executes the step run", () => {
    const r = bound();
    transition(r, preflightOf(r, S0, { run_id: "9002" }), T0);
    expect(sr(r, 0).attempts).toHaveLength(1);
    expect(sr(r, 0).bound_run_id).toBe("9001");
  });
});
