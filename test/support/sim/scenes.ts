/**
 * The release `r17` of three steps (a runner step on lane l1, `include_lane`, the traffic
 * assert) brought to the states the transition tests start from. Each builder applies
 * accepted events only (`ok` asserts it), so a scene that no longer arises fails loudly.
 */
import type { Release } from "../../../engine/src/domain/types.ts";
import type { StepSpec } from "../manifest-fixture.ts";
import { finishCurrent, ok, preflightOf, release } from "./drive.ts";

/** The three steps; `rerunWindowMs` sets the runner step's re-run window (ms). */
export const runnerThenCp = (rerunWindowMs?: number): StepSpec[] => [
  {
    name: "attach_queue_lane",
    kind: "runner",
    backward: true,
    ...(rerunWindowMs === undefined ? {} : { rerun_window_ms: rerunWindowMs }),
  },
  { name: "include_lane", kind: "control_plane", backward: true },
  { name: "assert_traffic_observed", kind: "control_plane", backward: false },
];

/** Started: step 0 (runner) about to be dispatched. */
export const started = (specs: StepSpec[] = runnerThenCp()): Release =>
  ok(release(specs), { type: "start" }).release;

/** Step 0 dispatched (dispatch 1), no run bound yet. */
export const dispatchedAt0 = (specs?: StepSpec[]): Release =>
  ok(started(specs), { type: "dispatch_accepted", step_run_id: "sr_17_0_f", dispatch: 1 }).release;

/** Step 0 bound to run 9001 attempt 1 at preflight, running. */
export const boundAt0 = (specs?: StepSpec[]): Release => {
  const r = dispatchedAt0(specs);
  return ok(r, preflightOf(r, "sr_17_0_f")).release;
};

/** Step 0's callback deadline passed: paused, the outcome unknown. */
export const pausedUnknown = (specs?: StepSpec[]): Release =>
  ok(boundAt0(specs), {
    type: "deadline",
    step_run_id: "sr_17_0_f",
    kind: "callback",
    dispatch: 1,
    attempt: 1,
  }).release;

/** Step 0 passed, step 1 (control plane) refused with a 422: compensating, step 1 backward. */
export const compensating = (): Release =>
  ok(finishCurrent(started(), "pass"), {
    type: "applied",
    step_run_id: "sr_17_1_f",
    outcome: "failed",
    message: "HTTP 422",
  }).release;

/** Step 1's backward refused with no retries left: needs_operator on sr_17_1_b. */
export const needsOperator = (): Release =>
  ok(compensating(), {
    type: "applied",
    step_run_id: "sr_17_1_b",
    outcome: "failed",
    message: "HTTP 500",
  }).release;
