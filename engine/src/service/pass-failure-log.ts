import type { Logger } from "./release-service.ts";
/**
 * Logs failed reconciler passes as one line each, without a stack: the first failure, a new
 * cause, and a repeat of the same cause at most once a minute (a store outage at one pass per
 * second would otherwise fill the log); and one line when passes succeed again.
 */
export function passFailureLog(
  log: Logger,
  now: () => number = Date.now,
): { ok(): void; failed(e: unknown): void } {
  let last = "";
  let loggedAt = 0;
  let repeats = 0;
  return {
    ok() {
      if (!last) return;
      log.info(`[engine] reconciler passes succeed again (after: ${last})`);
      last = "";
      repeats = 0;
    },
    failed(e) {
      const cause = (e instanceof Error ? e.message : String(e)).replace(/\s+/g, " ").slice(0, 300);
      const t = now();
      if (cause !== last || t - loggedAt >= 60_000) {
        const more = cause === last && repeats > 0 ? ` (${repeats} more since the last line)` : "";
        log.error(`[engine] reconciler pass failed: ${cause}${more}; retrying every pass`);
        loggedAt = t;
        repeats = 0;
      } else {
        repeats++;
      }
      last = cause;
    },
  };
}
