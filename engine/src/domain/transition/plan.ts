/**
 * What an operator action would set running: the step runs, in order, that the engine starts
 * after accepting it (docs/state-machine.md "Ways out"). Pure; the same rules the transition
 * applies (compensation undoes, from a step down to step 0, every step with a backward action
 * whose forward step run may have taken effect and is not undone yet), so a confirmation page
 * can list what will be undone or redeployed, lane by lane. Only meaningful for actions
 * `availableActions` offers.
 */
import type { Release } from "../types.ts";
import type { AvailableAction } from "./exits.ts";
import { guards } from "./guards.ts";
import { undoSequence } from "./lanes.ts";

/** One step run the action leads to. `index` is the 0-based step index. */
export interface PlannedStep {
  index: number;
  direction: "fwd" | "bwd";
  lane: string | null;
}

/** What taking an action leads to: the steps that run, and (abandon) those left as they are. */
export interface ActionPlan {
  runs: PlannedStep[];
  /** abandon: the undo steps that will NOT run (their effect stays in place). */
  leftAsIs: PlannedStep[];
}

const at = (r: Release, i: number, dir: "fwd" | "bwd") =>
  r.step_runs.find((s) => s.step_index === i && s.direction === dir);

/**
 * The backward steps compensation would still run, from step `from` down to step 0, in the
 * order it runs them (`undoSequence`: a parallel wave's lanes one at a time, lanes out of
 * service first), leaving out `except` (the step run being retried or resolved).
 */
export function undoFrom(r: Release, from: number, except?: number): PlannedStep[] {
  const out: PlannedStep[] = [];
  for (const i of undoSequence(r, from)) {
    const step = r.manifest.steps[i];
    const fwd = at(r, i, "fwd");
    if (i === except || !step?.backward || !fwd || !guards.mayHaveTakenEffect(fwd)) continue;
    if (at(r, i, "bwd")?.state === "succeeded") continue;
    out.push({ index: i, direction: "bwd", lane: step.lane });
  }
  return out;
}

function forwardFrom(r: Release, from: number): PlannedStep[] {
  return r.manifest.steps
    .filter((s) => s.index >= from)
    .map((s) => ({ index: s.index, direction: "fwd" as const, lane: s.lane }));
}

/**
 * The plan of `a` on `r` as it is now:
 * - abort: the undo steps from the high-water mark down (none when nothing took effect);
 * - resume: the forward steps from the cursor (step 0 for a pending release) to the end;
 * - promote: the forward steps from the cursor (the next wave, past the inconclusive gate);
 * - retry: the step run again, then forward to the end (or, for an undo, the rest of the undo);
 * - resolve: the undo steps that follow the resolved one;
 * - abandon: nothing runs; `leftAsIs` lists the undo steps that will not run;
 * - pause: nothing new runs; `runs` lists the forward step runs in flight, which settle;
 * - release: the forward steps from the cursor (the first exposure) to the end;
 * - confirm_restore: nothing runs (compensation is done; the release ends rolled_back; a
 *   rollback release's steps are done, and it ends succeeded);
 * - verify: no step runs (the lanes are read: the control plane and the lanes' machines);
 * - restore_state: the restore step (one past the table), then the lanes are read again.
 */
export function planOf(r: Release, a: Pick<AvailableAction, "action" | "target">): ActionPlan {
  const none: ActionPlan = { runs: [], leftAsIs: [] };
  switch (a.action) {
    case "abort":
      return { runs: r.high_water_mark < 0 ? [] : undoFrom(r, r.high_water_mark), leftAsIs: [] };
    case "pause":
      return {
        runs: r.step_runs
          .filter((s) => s.direction === "fwd" && guards.inFlight(s))
          .map((s) => ({
            index: s.step_index,
            direction: "fwd" as const,
            lane: r.manifest.steps[s.step_index]?.lane ?? null,
          })),
        leftAsIs: [],
      };
    case "resume":
    case "release":
    case "promote":
      return {
        runs: forwardFrom(r, r.state === "pending" ? 0 : Math.max(r.cursor, 0)),
        leftAsIs: [],
      };
    case "retry": {
      const sr = r.step_runs.find((s) => s.id === a.target);
      if (!sr) return none;
      const lane = r.manifest.steps[sr.step_index]?.lane ?? null;
      const self: PlannedStep = { index: sr.step_index, direction: sr.direction, lane };
      return sr.direction === "fwd"
        ? { runs: [self, ...forwardFrom(r, sr.step_index + 1)], leftAsIs: [] }
        : { runs: [self, ...undoFrom(r, r.high_water_mark, sr.step_index)], leftAsIs: [] };
    }
    case "resolve": {
      const sr = r.step_runs.find((s) => s.id === a.target);
      return sr ? { runs: undoFrom(r, r.high_water_mark, sr.step_index), leftAsIs: [] } : none;
    }
    case "abandon":
      return { runs: [], leftAsIs: undoFrom(r, Math.max(r.cursor, r.high_water_mark)) };
    case "confirm_restore":
    case "verify":
      return none;
    case "restore_state":
      return {
        runs: [{ index: r.manifest.steps.length, direction: "bwd", lane: null }],
        leftAsIs: [],
      };
  }
}
