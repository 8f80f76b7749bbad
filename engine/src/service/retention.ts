/**
 * Runs the store's retention (`Store.compactFinished`) from the reconciler's tick, at most once
 * per `everyMs`, a bounded batch at a time, so storage of finished releases stays bounded
 * without a separate job (docs/engine.md "Retention"). Never throws: a failed pass is logged
 * and tried again at the next interval.
 */
import type { Clock } from "../ports/clock.ts";
import type { Store } from "../ports/store.ts";
import type { Logger } from "./logger.ts";

/** When and how much to compact. Times in ms. */
export interface RetentionPolicy {
  /** Finished releases last updated longer ago than this are compacted; 0 turns retention off. */
  compactAfterMs: number;
  /** Shortest time between two passes. */
  everyMs: number;
  /** Releases compacted per pass (each its own transaction). */
  batch: number;
  /** Characters of each attempt's log kept after compaction. */
  logTailChars: number;
}

/** Defaults: compact after 7 days, look every 10 minutes, 200 releases a pass, 4,096-char logs. */
export const DEFAULT_RETENTION: RetentionPolicy = {
  compactAfterMs: 7 * 24 * 3_600_000,
  everyMs: 10 * 60_000,
  batch: 200,
  logTailChars: 4096,
};

export class Retention {
  private last = Number.NEGATIVE_INFINITY;
  private running: Promise<unknown> | null = null;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly policy: RetentionPolicy,
    private readonly log: Logger,
  ) {}

  /** One pass if retention is on and `everyMs` has passed since the last; else nothing. */
  async maybeRun(): Promise<void> {
    const now = this.clock.now();
    if (this.policy.compactAfterMs <= 0 || this.running || now - this.last < this.policy.everyMs) {
      return;
    }
    this.last = now;
    this.running = this.store
      .compactFinished({
        before: now - this.policy.compactAfterMs,
        now,
        limit: this.policy.batch,
        logTailChars: this.policy.logTailChars,
      })
      .then((r) => {
        if (r.releases > 0) {
          this.log.info(
            `[engine] retention compacted ${r.releases} finished release(s): ${r.history_rows_removed} refused history rows, ${r.outbox_rows_removed} outbox rows, ${r.attempt_results_shortened} attempt results`,
          );
        }
      })
      .catch((e) => this.log.error("[engine] retention pass failed; trying again later", e))
      .finally(() => {
        this.running = null;
      });
    await this.running;
  }
}
