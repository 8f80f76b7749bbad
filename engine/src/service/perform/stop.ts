/**
 * Performs a `stop_check` row: one evaluation of the release's stop condition from the metrics
 * source (decided by the pure domain), fed back as the `stop_check` event. Reads the release
 * from the store, not a cache: the window starts at its latest observed exposure.
 */
import type { ReleaseEvent, StopCheckEffect } from "../../domain/types.ts";
import type { OutboxRow } from "../../ports/store.ts";
import { evaluateStop } from "../stop-evaluator.ts";
import type { PerformContext } from "./context.ts";
import { NO_METRICS } from "./gate.ts";

/** See the module comment. A release no longer watched gets an evaluation it will ignore. */
export async function performStopCheck(
  ctx: PerformContext,
  row: OutboxRow,
  e: StopCheckEffect,
): Promise<ReleaseEvent> {
  const release = await ctx.deps.store.getRelease(row.release_id);
  if (!release) {
    throw new Error(`[engine] release ${row.release_id} of outbox row ${row.id} is gone`);
  }
  const now = ctx.deps.clock.now();
  const evaluation = await evaluateStop(ctx.deps.metrics ?? NO_METRICS, release, e.seq, now);
  return {
    type: "stop_check",
    generation: e.generation,
    evaluation: evaluation ?? {
      seq: e.seq,
      at: now,
      wave: release.stop?.wave ?? 0,
      since: release.stop?.since ?? now,
      breached: false,
      no_data: true,
      reason: `release ${release.id} is not watched (${release.state})`,
      arms: null,
      metrics: [],
    },
  };
}
