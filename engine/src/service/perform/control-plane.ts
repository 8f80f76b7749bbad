/**
 * Performs a `control_plane` row: an absolute keyed write (then read back: a 2xx is not the
 * state) or an observation, through the ControlPlane port, with the release id, generation and
 * model on every call. The outcome event says what the control plane shows vs what was asked.
 */
import { withoutWithdrawn } from "../../domain/kill-switch.ts";
import type { ControlPlaneEffect, ControlPlaneOp, ReleaseEvent } from "../../domain/types.ts";
import { faultPoint } from "../../faults.ts";
import type { ControlPlane, WriteContext } from "../../ports/control-plane.ts";
import type { OutboxRow, Store } from "../../ports/store.ts";
import { DEFAULT_MODEL } from "../../protocol/control-plane.ts";
import { withdrawnOf } from "../use-cases/kill-switch.ts";
import type { PerformContext } from "./context.ts";

/** The outcome event of one control-plane write (`applied`, with its read-back) or read (`observed`). */
export async function performControlPlane(
  ctx: PerformContext,
  row: OutboxRow,
  e: ControlPlaneEffect,
): Promise<ReleaseEvent> {
  const release = await ctx.deps.releases.recentRelease(row.release_id);
  const uid = release?.uid;
  // Every write names its model: traffic is per model and the op carries none.
  const write: WriteContext = {
    operation_key: e.operation_key,
    release_id: row.release_id,
    generation: e.generation,
    model: release?.manifest.model ?? DEFAULT_MODEL,
    ...(uid ? { release_uid: uid } : {}),
  };
  ctx.assertLeaseHeld(row);
  faultPoint("after_commit_before_effect", {
    step_run_id: e.step_run_id,
    effect: "control_plane",
  });
  let event: ReleaseEvent;
  if (e.mode === "apply") {
    const { request, withheld } = await withKillSwitches(ctx.deps.store, e.request, write.model);
    let r: Awaited<ReturnType<ControlPlane["apply"]>>;
    try {
      r = await ctx.deps.controlPlane.apply(request, write);
    } catch (err) {
      r = {
        outcome: "unknown",
        message: `[engine] control plane threw: ${(err as Error).message}`,
      };
    }
    event = {
      type: "applied",
      step_run_id: e.step_run_id,
      outcome: r.outcome,
      message:
        r.outcome === "ok"
          ? r.replayed
            ? "[engine] control plane replayed the keyed write"
            : `[engine] control plane applied the write${withheld.length ? ` (without ${withheld.join(", ")}: withdrawn by a kill switch in force)` : ""}`
          : r.outcome === "failed"
            ? `HTTP ${r.status}: ${r.message}`
            : r.message,
    };
    // A 2xx is not the state: read back what the write changed (assert_traffic is a read).
    if (r.outcome === "ok" && request.op !== "assert_traffic") {
      event.read_back = await readBack(ctx, request, write);
    }
  } else {
    let r: Awaited<ReturnType<ControlPlane["observe"]>>;
    try {
      r = await ctx.deps.controlPlane.observe(e.request, write);
    } catch (err) {
      r = { ok: false, message: `[engine] control plane threw: ${(err as Error).message}` };
    }
    event = {
      type: "observed",
      step_run_id: e.step_run_id,
      matches: r.ok ? r.matches : null,
      message: r.ok
        ? `[engine] control plane shows ${describeObserved(e.request, r.observed)}${r.matches ? "" : `, expected ${describeExpected(e.request)}`}`
        : r.message,
    };
  }
  faultPoint("after_effect_before_outcome", {
    step_run_id: e.step_run_id,
    effect: "control_plane",
  });
  return event;
}

/**
 * A capability write without the capabilities a kill switch in force withdrew from the model
 * (docs/recovery-actions.md): neither a forward `advertise_capabilities` nor its undo (which
 * restores the baseline observed before the withdraw) gives one back. Other ops unchanged,
 * with no read of the kill-switch book.
 */
async function withKillSwitches(
  store: Pick<Store, "getState">,
  op: ControlPlaneOp,
  model: string,
): Promise<{ request: ControlPlaneOp; withheld: string[] }> {
  if (op.op !== "set_capabilities") return { request: op, withheld: [] };
  const withdrawn = await withdrawnOf(store, model);
  const withheld = [...new Set(op.capabilities)].filter((c) => withdrawn.includes(c)).sort();
  if (withheld.length === 0) return { request: op, withheld };
  return {
    request: { ...op, capabilities: withoutWithdrawn(op.capabilities, withdrawn) },
    withheld,
  };
}

/** The read-back after a 2xx write: what the control plane shows now vs the write's target. */
async function readBack(
  ctx: PerformContext,
  op: ControlPlaneOp,
  write: WriteContext,
): Promise<{ matches: boolean | null; message: string }> {
  let r: Awaited<ReturnType<ControlPlane["observe"]>>;
  try {
    r = await ctx.deps.controlPlane.observe(op, write);
  } catch (err) {
    r = { ok: false, message: `[engine] control plane threw: ${(err as Error).message}` };
  }
  if (!r.ok) return { matches: null, message: r.message };
  const seen = describeObserved(op, r.observed);
  return r.matches
    ? { matches: true, message: seen }
    : { matches: false, message: `${seen}, expected ${describeExpected(op)}` };
}

/** What a read shows, limited to the fields the op concerns (lane id first). */
function describeObserved(op: ControlPlaneOp, observed: unknown): string {
  if (op.op === "set_traffic" || op.op === "assert_traffic") {
    return `traffic ${observed === null ? "(no lane serves the model)" : JSON.stringify(observed)}`;
  }
  const lane = observed as { excluded?: unknown; capabilities?: unknown; advertised?: unknown };
  if (!lane) return `no lane ${op.lane}`;
  return op.op === "set_marker"
    ? `lane ${op.lane} excluded=${String(lane.excluded)}`
    : `lane ${op.lane} capabilities=${JSON.stringify(lane.capabilities)} advertised=${String(lane.advertised)}`;
}

/** The state an op asks for, in the words of `describeObserved`. */
function describeExpected(op: ControlPlaneOp): string {
  switch (op.op) {
    case "set_traffic":
    case "assert_traffic":
      return `traffic ${JSON.stringify(op.weights)}`;
    case "set_marker":
      return `excluded=${op.present}`;
    case "set_capabilities":
      return `capabilities=${JSON.stringify([...new Set(op.capabilities)].sort())} advertised=${op.advertised}`;
  }
}
