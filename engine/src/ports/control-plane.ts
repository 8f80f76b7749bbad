/**
 * Control-plane port (docs/control-plane.md): absolute traffic weights, lane markers and capabilities.
 * Every write carries an operation key plus the release id and generation; the receiver
 * replays a repeated key with the same body, refuses a reused key with another body (422) and
 * a stale generation (409).
 */
import type { ControlPlaneOp } from "../domain/types.ts";
import type { LanesRead, WriteContext } from "../protocol/control-plane.ts";

/** Identity of a write (with its model), and a read of the lanes; defined by the wire contract. */
export type { LanesRead, WriteContext };

export type ApplyResult =
  /** Applied now, or replayed from an earlier identical request with the same key. */
  | { outcome: "ok"; replayed: boolean }
  /** Definitive refusal (4xx: stale generation, key reused with another body, bad request). */
  | { outcome: "failed"; status: number; message: string }
  /** Not observed: timeout, network error, 5xx. Resolve by `observe`. */
  | { outcome: "unknown"; message: string };

export type ObserveResult =
  /** matches: the target state the op asks for is what the control plane shows now. */
  { ok: true; matches: boolean; observed: unknown } | { ok: false; message: string };

export interface ControlPlane {
  /** Sends one keyed, absolute write (`assert_traffic` is answered by a read). Never throws. */
  apply(op: ControlPlaneOp, ctx: WriteContext): Promise<ApplyResult>;
  /** Reads the target state of `op` and says whether it matches. Never throws. */
  observe(op: ControlPlaneOp, ctx: WriteContext): Promise<ObserveResult>;
  /**
   * Reads every lane of `model` (every lane when omitted) as the control plane holds it now:
   * weight (%), `excluded`, capabilities, and `image` when the control plane reports one.
   * Optional: a control plane without a listing leaves the fleet view's observed side empty.
   * Never throws. `signal` (optional to honour) ends the read early: the caller gave up.
   */
  lanes?(model?: string, signal?: AbortSignal): Promise<LanesRead>;
}
