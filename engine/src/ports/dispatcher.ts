/**
 * Dispatcher port: asks something (GitHub, or the local runner) to run one step run.
 * A successful result only means "accepted" (GitHub's 204 carries no run id).
 */
import type { DispatchPayload } from "../protocol/messages.ts";

export type DispatchResult =
  | { ok: true }
  /** retryable: network error / 5xx / timeout, send the same step run again; else 4xx. */
  | { ok: false; retryable: boolean; status: number | null; message: string };

export interface Dispatcher {
  /** Never throws for a refused or failed dispatch: the outcome is data. */
  dispatch(payload: DispatchPayload): Promise<DispatchResult>;
}
