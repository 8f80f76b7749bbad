/**
 * The forward path: start, advance past a succeeded step, finish (docs/state-machine.md
 * "Starting and moving forward").
 */
import type { Draft } from "./draft.ts";
import { holdsAtCursor } from "./holds.ts";
import { advanceParallelWave, parallelWaveOf } from "./lanes.ts";
import { advanceProbes, atProbes } from "./probe.ts";
import { awaitsRollbackRestore, holdForRollbackRestore } from "./recovery.ts";
import { beginStepRun } from "./send.ts";
import { holdsForFinalBake } from "./stop.ts";

/**
 * Begins the forward step at `cursor`, or finishes the release past the last step. On a lane
 * row of a parallel wave, begins what the wave's limits allow (`lanes.ts`) instead; on a
 * rollback's probe steps, every probe not begun yet, within their cap (`probe.ts`). Begins
 * nothing while a hold is in force or due here (`holds.ts`: pause, dark, manual promotion).
 */
export function beginForwardAtCursor(d: Draft): void {
  const r = d.release;
  if (holdsAtCursor(d)) return;
  if (atProbes(r)) {
    const past = advanceProbes(d, (i) => beginStepRun(d, i, "fwd"));
    if (past) beginForwardAtCursor(d);
    return;
  }
  const wave = parallelWaveOf(r, r.cursor);
  if (wave !== null) {
    const past = advanceParallelWave(d, wave, (i) => beginStepRun(d, i, "fwd"));
    if (past) beginForwardAtCursor(d);
    return;
  }
  if (r.cursor >= r.manifest.steps.length) {
    // A rollback of a recoverable release: traffic and images are back; its restore follows.
    if (awaitsRollbackRestore(r)) {
      holdForRollbackRestore(d);
      return;
    }
    // `stop_condition.bake_ms`: stays running, watched, for the bake after the last wave.
    if (holdsForFinalBake(d)) return;
    r.state = "succeeded";
    r.succeeded_at = d.now;
    r.stop = null;
    r.reason = null;
    d.accept(`[engine] release ${r.id} succeeded: all ${r.manifest.steps.length} steps done`);
    return;
  }
  beginStepRun(d, r.cursor, "fwd");
}

/** `start`: pending -> running at step 0. */
export function start(d: Draft): void {
  const r = d.release;
  r.state = "running";
  r.cursor = 0;
  d.accept(`[engine] release ${r.id} started: ${r.manifest.steps.length} steps`);
  beginForwardAtCursor(d);
}
