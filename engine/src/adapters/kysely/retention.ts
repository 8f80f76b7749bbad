/**
 * Retention of finished releases (docs/engine.md "Retention"): what compaction removes from a
 * release that is terminal and old enough, as a pure plan both store adapters execute in one
 * transaction. What a release record needs is kept: the release document (step runs,
 * attempts, high-water mark, reason), the manifest, every accepted history entry (its message;
 * its event data too when a person or an admission decided it), and each attempt's status,
 * overall, checks and the tail of its log. Removed: refused history entries (late, duplicate,
 * forged requests; replaced by one counted summary entry), the event data of automatic
 * entries (the message and the release document say what happened), outbox rows that are done
 * or are deadlines (a terminal release ignores deadlines), and the raw callback bodies (their
 * content is already stored parsed), with logs cut to their tail: `logTailChars` for a failed
 * attempt, a quarter of it for a passing one.
 */
import type { HistoryEntry } from "../../domain/types.ts";

/** Default: logs of compacted attempts keep their last 4,096 characters. */
export const DEFAULT_LOG_TAIL_CHARS = 4096;

/** History kinds whose event data is kept: decisions of people (and admission), not automatic steps. */
export const KEEP_DATA_KINDS: ReadonlySet<string> = new Set([
  "start",
  "abort",
  "resume",
  "retry",
  "resolve",
  "abandon",
  "accept",
  "promote",
  "pause",
  "release",
  "rollback",
  "roll_forward",
  "admission",
  "prerequisites",
  "retention",
]);

/** The rows of one finished release that compaction looks at. */
export interface CompactionInput {
  release_id: string;
  /** History rows of the release: id, kind and outcome. */
  history: { id: number; kind: string; outcome: string; has_data: boolean }[];
  /** Outbox rows: id, whether done, and the effect's type. */
  outbox: { id: number; done: boolean; type: string }[];
  /** Attempt results: key, log, whether already truncated, raw callback length (chars). */
  attempts: {
    step_run_id: string;
    attempt: number;
    log: string;
    log_truncated: boolean;
    raw_len: number;
    passed: boolean;
  }[];
  logTailChars: number;
  now: number;
}

/** What to write: deletions, one summary history entry, and attempt rows to shorten. */
export interface CompactionPlan {
  deleteHistoryIds: number[];
  /** Accepted automatic entries whose event data is dropped (set to null). */
  clearDataIds: number[];
  summary: HistoryEntry | null;
  deleteOutboxIds: number[];
  attempts: { step_run_id: string; attempt: number; log: string; log_truncated: boolean }[];
}

/** Builds the plan (pure). Counts refused entries per kind for the summary entry. */
export function compactionPlan(input: CompactionInput): CompactionPlan {
  const refused = input.history.filter((h) => h.outcome === "refused");
  const byKind: Record<string, number> = {};
  for (const h of refused) byKind[h.kind] = (byKind[h.kind] ?? 0) + 1;
  const kinds = Object.entries(byKind)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([k, n]) => `${k}: ${n}`)
    .join(", ");
  const summary: HistoryEntry | null =
    refused.length === 0
      ? null
      : {
          release_id: input.release_id,
          at: input.now,
          kind: "retention",
          step_run_id: null,
          outcome: "accepted",
          message: `[engine] retention: ${refused.length} refused request${refused.length === 1 ? "" : "s"} of this finished release compacted into this line (${kinds}); every accepted entry is kept`,
          data: { refused: refused.length, by_kind: byKind },
        };
  return {
    deleteHistoryIds: refused.map((h) => h.id),
    clearDataIds: input.history
      .filter((h) => h.outcome === "accepted" && h.has_data && !KEEP_DATA_KINDS.has(h.kind))
      .map((h) => h.id),
    summary,
    deleteOutboxIds: input.outbox.filter((o) => o.done || o.type === "deadline").map((o) => o.id),
    attempts: input.attempts
      .map((a) => ({ a, keep: a.passed ? Math.floor(input.logTailChars / 4) : input.logTailChars }))
      .filter(({ a, keep }) => a.raw_len > 0 || a.log.length > keep)
      .map(({ a, keep }) => {
        const cut = a.log.length > keep;
        return {
          step_run_id: a.step_run_id,
          attempt: a.attempt,
          log: cut ? a.log.slice(a.log.length - keep) : a.log,
          log_truncated: a.log_truncated || cut,
        };
      }),
  };
}

/** What one `compactFinished` call did, for logs and the benchmark. */
export interface CompactionResult {
  /** Releases compacted by this call. */
  releases: number;
  history_rows_removed: number;
  outbox_rows_removed: number;
  attempt_results_shortened: number;
}

/** Splits ids into chunks (SQL parameter lists stay bounded). */
export function chunks<T>(xs: readonly T[], size = 500): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += size) out.push(xs.slice(i, i + size));
  return out;
}
