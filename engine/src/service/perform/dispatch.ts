/**
 * Performs a `dispatch` row: builds the dispatch payload from the release (a payload GitHub
 * would refuse is a definitive `dispatch_failed`, never sent), checks the claim's lease, asks
 * the Dispatcher port, and turns its answer into the outcome event.
 */
import { BatonError } from "../../domain/errors.ts";
import type { DispatchEffect, ReleaseEvent } from "../../domain/types.ts";
import { faultPoint } from "../../faults.ts";
import type { OutboxRow } from "../../ports/store.ts";
import { buildDispatchPayload } from "../payload.ts";
import type { PerformContext } from "./context.ts";

/** The outcome event of one dispatch (accepted or failed, retryable or not). */
export async function performDispatch(
  ctx: PerformContext,
  row: OutboxRow,
  e: DispatchEffect,
): Promise<ReleaseEvent> {
  const base = { step_run_id: e.step_run_id, dispatch: e.dispatch };
  const release = await ctx.deps.releases.recentRelease(row.release_id);
  if (!release)
    throw new Error(`[engine] release ${row.release_id} of outbox row ${row.id} is gone`);
  let payload: ReturnType<typeof buildDispatchPayload>;
  try {
    payload = buildDispatchPayload(e, release, ctx.deps.publicUrl);
  } catch (err) {
    // F01: never send what GitHub would refuse; a definitive failure, like GitHub's 422.
    if (err instanceof BatonError) {
      return { type: "dispatch_failed", ...base, retryable: false, message: err.message };
    }
    throw err;
  }
  ctx.assertLeaseHeld(row);
  faultPoint("after_commit_before_effect", { step_run_id: e.step_run_id, effect: "dispatch" });
  let event: ReleaseEvent;
  try {
    const r = await ctx.deps.dispatcher.dispatch(payload);
    event = r.ok
      ? { type: "dispatch_accepted", ...base }
      : {
          type: "dispatch_failed",
          ...base,
          retryable: r.retryable,
          message: r.status ? `HTTP ${r.status}: ${r.message}` : r.message,
          ...(r.retry_at !== undefined ? { throttled_until: r.retry_at } : {}),
        };
  } catch (err) {
    // The port promises not to throw; if it does, GitHub may or may not have it: retryable.
    event = {
      type: "dispatch_failed",
      ...base,
      retryable: true,
      message: `[engine] dispatcher threw: ${(err as Error).message}`,
    };
  }
  faultPoint("after_effect_before_outcome", { step_run_id: e.step_run_id, effect: "dispatch" });
  return event;
}
