/**
 * The statements of a SQLite `commit`, prepared once per connection. Why not Kysely here: the
 * commit is the engine's hot path, and compiling the query builders on every commit cost
 * about as much as running the statements. Multi-row inserts run one prepared single-row
 * statement per row, in order (no round trips in SQLite), so history ids keep event order.
 */
import type { Database, Statement } from "better-sqlite3";
import type { HistoryEntry, OutboxEffect, Release } from "../../domain/types.ts";
import { countSerialised } from "../../domain/work-counts.ts";
import type { AttemptResult } from "../../ports/store.ts";
import { attemptColumns, dueAt, historyColumns, releaseDoc } from "../kysely/rows.ts";

export class CommitStatements {
  private readonly update: Statement;
  private readonly finish: Statement;
  private readonly history: Statement;
  private readonly outbox: Statement;
  private readonly attempt: Statement;

  constructor(db: Database) {
    this.update = db.prepare(
      `UPDATE releases SET state = ?, generation = ?, resource_version = ?, manifest_digest = ?,
         high_water_mark = ?, step_cursor = ?, doc = ?, updated_at = ?
       WHERE id = ? AND resource_version = ?`,
    );
    this.finish = db.prepare(
      "UPDATE outbox SET done_at = ? WHERE id = ? AND claim_token = ? AND done_at IS NULL",
    );
    this.history = db.prepare(
      `INSERT INTO history (release_id, at, kind, step_run_id, outcome, message, data)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    );
    this.outbox = db.prepare("INSERT INTO outbox (release_id, effect, due_at) VALUES (?, ?, ?)");
    this.attempt = db.prepare(
      `INSERT INTO attempt_results (step_run_id, attempt, release_id, received_at, status, overall,
         checks, log, log_truncated, raw_callback, preflight)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (step_run_id, attempt) DO UPDATE SET
         release_id = excluded.release_id, received_at = excluded.received_at,
         status = excluded.status, overall = excluded.overall, checks = excluded.checks,
         log = excluded.log, log_truncated = excluded.log_truncated,
         raw_callback = excluded.raw_callback, preflight = excluded.preflight`,
    );
  }

  /** The conditional update; 1 if the row was at `expected` and is now written, else 0. */
  updateRelease(r: Release, expected: number): number {
    return this.update.run(
      r.state,
      r.generation,
      r.resource_version,
      r.manifest_digest,
      r.high_water_mark,
      r.cursor,
      releaseDoc(r),
      r.updated_at,
      r.id,
      expected,
    ).changes;
  }

  /** Marks an outbox row done while `claimToken` holds it; 1 if it did. */
  finishOutbox(id: number, claimToken: string, at: number): number {
    return this.finish.run(at, id, claimToken).changes;
  }

  insertHistory(entries: HistoryEntry[]): void {
    for (const h of entries) {
      const c = historyColumns(h);
      this.history.run(c.release_id, c.at, c.kind, c.step_run_id, c.outcome, c.message, c.data);
    }
  }

  insertOutbox(releaseId: string, effects: OutboxEffect[], now: number): void {
    for (const e of effects)
      this.outbox.run(releaseId, countSerialised(JSON.stringify(e)), dueAt(e, now));
  }

  /** Upsert by (step_run_id, attempt): a replayed callback overwrites its own attempt only. */
  upsertAttempts(results: AttemptResult[]): void {
    for (const a of results) {
      const c = attemptColumns(a);
      this.attempt.run(
        c.step_run_id,
        c.attempt,
        c.release_id,
        c.received_at,
        c.status,
        c.overall,
        c.checks,
        c.log,
        c.log_truncated,
        c.raw_callback,
        c.preflight,
      );
    }
  }
}
