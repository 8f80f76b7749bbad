/**
 * Creating a step run and sending its action (first try, engine retry or operator retry).
 * Every send of a step run carries the same operation key and body; only `dispatch` (runner)
 * or `tries` (control plane) moves, so receivers can replay instead of re-applying.
 */
import type { Direction } from "../states.ts";
import type { StepRun } from "../types.ts";
import {
  actionOf,
  type Draft,
  describe,
  operationKey,
  stepAt,
  stepRunAt,
  stepRunIdOf,
} from "./draft.ts";
import { isProbeRun } from "./probe.ts";

/** Creates step run `(index, dir)` if absent, then sends its action as a new try. */
export function beginStepRun(d: Draft, index: number, dir: Direction): StepRun {
  const r = d.release;
  const step = stepAt(r, index);
  if (!step) throw new Error(`[engine] release ${r.id} has no step ${index + 1}`);
  const action = dir === "fwd" ? step.forward : step.backward;
  if (!action) throw new Error(`[engine] step ${index + 1} has no backward action`);
  let sr = stepRunAt(r, index, dir);
  if (!sr) {
    sr = {
      id: stepRunIdOf(r, index, dir),
      step_index: index,
      direction: dir,
      kind: action.kind,
      state: "planned",
      operation_key: operationKey(r, step, dir),
      dispatch: 0,
      bound_run_id: null,
      attempts: [],
      tries: 0,
      retries_used: 0,
      created_at: d.now,
      started_at: null,
      finished_at: null,
      last_error: null,
    };
    r.step_runs.push(sr);
  } else {
    // A step whose action changes between runs (the restore step's point): the new key.
    sr.operation_key = operationKey(r, step, dir);
  }
  sendAction(d, sr, null);
  d.accept(`[engine] ${describe(r, sr)} started with operation key ${sr.operation_key}`, sr.id, {
    operation_key: sr.operation_key,
  });
  return sr;
}

/**
 * Sends a step run's action afresh: runner = a new dispatch (`dispatch + 1`, unbound, older
 * attempts fenced); control plane = the same keyed apply again. `notBefore` delays it (backoff).
 */
export function sendAction(d: Draft, sr: StepRun, notBefore: number | null): void {
  const r = d.release;
  const action = actionOf(r, sr);
  sr.tries = 1;
  sr.started_at ??= d.now;
  sr.finished_at = null;
  if (sr.rerun_deadline != null) sr.rerun_deadline = null;
  if (action.kind === "runner") {
    sr.dispatch += 1;
    sr.bound_run_id = null;
    for (const a of sr.attempts) if (a.state !== "succeeded") a.state = "fenced";
    sr.state = "dispatching";
    emitDispatch(d, sr, notBefore);
  } else {
    sr.state = "applying";
    if (sr.direction === "fwd" && !isProbeRun(r, sr))
      r.high_water_mark = Math.max(r.high_water_mark, sr.step_index);
    emitControlPlane(d, sr, "apply", notBefore);
  }
}

/** The dispatch effect of the step run's current dispatch sequence. */
export function emitDispatch(d: Draft, sr: StepRun, notBefore: number | null): void {
  const action = actionOf(d.release, sr);
  if (action.kind !== "runner") throw new Error(`[engine] ${sr.id} is not a runner step run`);
  d.emit({
    type: "dispatch",
    step_run_id: sr.id,
    dispatch: sr.dispatch,
    operation_key: sr.operation_key,
    tool: action.tool,
    args: action.args,
    generation: d.release.generation,
    not_before: notBefore,
  });
}

/** A control-plane effect (keyed write, or a read of the target after `unknown`). */
export function emitControlPlane(
  d: Draft,
  sr: StepRun,
  mode: "apply" | "read",
  notBefore: number | null,
): void {
  const action = actionOf(d.release, sr);
  if (action.kind !== "control_plane") {
    throw new Error(`[engine] ${sr.id} is not a control-plane step run`);
  }
  d.emit({
    type: "control_plane",
    step_run_id: sr.id,
    operation_key: sr.operation_key,
    mode,
    request: action.request,
    generation: d.release.generation,
    not_before: notBefore,
  });
}
