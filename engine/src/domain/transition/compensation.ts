/**
 * Compensation (docs/state-machine.md rule 3 and "Compensation"): backward step
 * runs from the high-water mark down to step index 0, one at a time, each durable, only for steps that
 * have a backward action and may have taken effect; the lane rows of a parallel wave lane by
 * lane in the order that keeps its limits (`undoLaneOrder`). Never re-enters the forward path.
 */
import { type Draft, stepRunAt } from "./draft.ts";
import { guards } from "./guards.ts";
import { laneUndoSequence, parallelWaveOf, undoLaneOrder } from "./lanes.ts";
import { holdForRollForward, pastRollForwardPoint } from "./recovery.ts";
import { beginStepRun } from "./send.ts";
import { beginVerification, verifying } from "./verify.ts";

/**
 * running/paused -> compensating: `generation + 1`, cursor at the high-water mark; a
 * roll_forward_only release past its `unsafe_after` step is held `paused` instead (recovery.ts).
 */
export function beginCompensation(d: Draft, why: string): void {
  const r = d.release;
  // roll_forward_only past its point: rollback is unsafe; held for roll forward instead.
  if (pastRollForwardPoint(r)) {
    holdForRollForward(d, why);
    return;
  }
  r.state = "compensating";
  r.generation += 1;
  r.cursor = r.high_water_mark;
  r.reason = why;
  r.compensation_cause = why;
  r.rerun_deadline = null;
  r.gate = null;
  r.hold = null;
  r.stop = null;
  // Other lanes of a parallel wave may have dispatches no runner has bound yet: cancelled (the
  // generation moves on, so their preflight is refused), as abort does.
  for (const sr of r.step_runs) {
    if (sr.direction === "fwd" && sr.kind === "runner" && guards.awaitsFirstRun(sr)) {
      sr.state = "failed";
      sr.finished_at = d.now;
      sr.last_error = "cancelled: the release is compensating and no runner had started it";
      d.accept(
        `[engine] step run ${sr.id} cancelled before a runner started it: the release compensates`,
        sr.id,
      );
    }
  }
  d.accept(
    `[engine] release ${r.id} compensating from step ${r.high_water_mark + 1} (generation ${r.generation}): ${why}`,
  );
  continueCompensation(d);
}

/**
 * Messages name steps 1-based, as the dashboard and CLI show them.
 * Starts the next backward step run, skipping steps with nothing to undo. Below step 0 the
 * undo is verified (`verify.ts`): the release stays `compensating` until the reading comes
 * back, then ends `rolled_back` (a recoverable release first waits `needs_operator` for its
 * restore action) or `needs_operator` on a difference. Waits while a forward step run is
 * still in flight or a backward one runs.
 */
export function continueCompensation(d: Draft): void {
  const r = d.release;
  if (r.state !== "compensating") return;
  const flying = r.step_runs.find((sr) => sr.direction === "fwd" && guards.inFlight(sr));
  if (flying) {
    d.accept(
      `[engine] compensation waits for forward step run ${flying.id} (${flying.state}) to settle`,
      flying.id,
    );
    return;
  }
  while (r.cursor >= 0) {
    const wave = parallelWaveOf(r, r.cursor);
    if (wave !== null) {
      if (undoParallelWave(d, wave)) return;
      continue;
    }
    const step = r.manifest.steps[r.cursor];
    const fwd = stepRunAt(r, r.cursor, "fwd");
    if (step?.backward && fwd && guards.mayHaveTakenEffect(fwd)) {
      const bwd = stepRunAt(r, r.cursor, "bwd");
      if (bwd?.state === "succeeded") {
        r.cursor -= 1;
        continue;
      }
      if (bwd && guards.inFlight(bwd)) return;
      beginStepRun(d, r.cursor, "bwd");
      return;
    }
    const why = !step?.backward ? "no backward action" : "its forward action never took effect";
    d.accept(
      `[engine] step ${r.cursor + 1}${step ? ` ${step.name}` : ""} skipped in compensation: ${why}`,
      fwd?.id ?? null,
    );
    r.cursor -= 1;
  }
  // Every step that may have taken effect is undone: read the lanes back before rolled_back
  // (the restore wait of a recoverable release comes after a passed verification).
  if (verifying(r)) return;
  d.accept(
    `[engine] release ${r.id}: every step that may have taken effect was undone; verifying the lanes before it is rolled back`,
  );
  beginVerification(d, "compensation", "engine");
}

/** Whether step `i` has something to undo: a backward action and a forward step run that may have taken effect. */
function hasEffectToUndo(d: Draft, i: number): boolean {
  const fwd = stepRunAt(d.release, i, "fwd");
  return !!d.release.manifest.steps[i]?.backward && !!fwd && guards.mayHaveTakenEffect(fwd);
}

/**
 * The cursor is on a lane row of parallel wave `wave`: begins (or waits on) the backward step
 * run of the first row, in `laneUndoSequence` order, with something to undo and not undone yet,
 * and returns true; when none is left, moves the cursor below the wave's lane rows and returns
 * false. Undoing the lanes out of service first and the lanes excluded before the start last
 * keeps the wave within `max_unavailable`, its failure domains and `min_serving` while it is
 * undone, as the forward walk was (docs/recipes.md "Parallel waves").
 */
function undoParallelWave(d: Draft, wave: number): boolean {
  const r = d.release;
  const rows = laneUndoSequence(r, wave);
  const todo = rows.filter((i) => hasEffectToUndo(d, i));
  const next = todo.find((i) => stepRunAt(r, i, "bwd")?.state !== "succeeded");
  if (next === undefined) {
    r.cursor = Math.min(...rows) - 1;
    d.accept(
      todo.length === 0
        ? `[engine] lanes of wave ${wave + 1}: nothing to undo`
        : `[engine] every lane of wave ${wave + 1} is undone`,
    );
    return false;
  }
  const bwd = stepRunAt(r, next, "bwd");
  if (!todo.some((i) => stepRunAt(r, i, "bwd"))) {
    const lanes = undoLaneOrder(r, wave)
      .filter((l) => l.rows.some((i) => todo.includes(i)))
      .map((l) => l.lane);
    d.accept(
      `[engine] undoing the lanes of wave ${wave + 1} one at a time: ${lanes.join(", ")} (lanes out of service first, lanes excluded before the start last, so no more of them are out at once than max_unavailable allows)`,
    );
  }
  r.cursor = next;
  if (bwd && guards.inFlight(bwd)) return true;
  beginStepRun(d, next, "bwd");
  return true;
}
