/**
 * Bounds and backoff of engine-side tries (docs/state-machine.md "Runner steps",
 * "Control-plane steps"). Pure numbers so that tests and the simulator share them.
 */

/** Sends of one dispatch (network error / 5xx) before the step run is `unknown`. */
export const DISPATCH_TRIES_MAX = 5;
/** Control-plane tries (apply or read) of one step run before it is `failed`. */
export const CONTROL_PLANE_TRIES_MAX = 5;
/** First backoff (ms); doubles per try. */
export const BACKOFF_BASE_MS = 1_000;
/** Backoff cap (ms). */
export const BACKOFF_CAP_MS = 30_000;

/** Backoff before retry number `n` (1-based): 1 s, 2 s, 4 s … capped at 30 s. */
export function backoffMs(n: number): number {
  const exp = Math.max(0, Math.min(n - 1, 30));
  return Math.min(BACKOFF_BASE_MS * 2 ** exp, BACKOFF_CAP_MS);
}
