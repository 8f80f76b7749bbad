/**
 * Backoff of the reconciler's own failures (the store or a port threw, not an outcome the
 * transition decides on): 1 s, 2 s, 4 s … capped at 30 s, the schedule of
 * docs/state-machine.md "Runner steps".
 */
export const RECONCILER_BACKOFF_BASE_MS = 1_000;
export const RECONCILER_BACKOFF_CAP_MS = 30_000;

/** Delay (ms) before the `n`-th retry, n ≥ 1. */
export function reconcilerBackoffMs(n: number): number {
  const k = Math.max(0, Math.min(n - 1, 20));
  return Math.min(RECONCILER_BACKOFF_BASE_MS * 2 ** k, RECONCILER_BACKOFF_CAP_MS);
}

/** Longest delay between two tries of a notice (ms). */
export const NOTIFY_BACKOFF_CAP_MS = 300_000;

/** Delay (ms) after the `n`-th failed try of a notice (n ≥ 1): base, 2×base, 4×base … ≤ 5 min. */
export function notifyBackoffMs(n: number, baseMs: number): number {
  const k = Math.max(0, Math.min(n - 1, 20));
  return Math.min(baseMs * 2 ** k, NOTIFY_BACKOFF_CAP_MS);
}
