/**
 * Dispatcher port: asks something (GitHub, or the local runner) to run one step run.
 * A successful result only means "accepted" (GitHub's 204 carries no run id).
 */
import type { DispatchPayload } from "../protocol/messages.ts";

export type DispatchResult =
  | { ok: true }
  /** retryable: network error / 5xx / timeout, send the same step run again; else 4xx. */
  | {
      ok: false;
      retryable: boolean;
      status: number | null;
      message: string;
      /**
       * Throttled, not accepted: held back by pacing or refused for rate (403/429). Send the
       * same step run again at this epoch ms; it is not a failed try.
       */
      retry_at?: number;
    };

export interface Dispatcher {
  /** Never throws for a refused or failed dispatch: the outcome is data. */
  dispatch(payload: DispatchPayload): Promise<DispatchResult>;
}
