/**
 * Runs Kysely-built queries synchronously on better-sqlite3, so a whole transaction runs
 * without yielding to the event loop. Why: better-sqlite3 waits for a busy database by
 * blocking the thread; an open transaction that awaited between statements could then block
 * the very code that would finish it. Statements are prepared once per SQL text.
 */
import type { Database, RunResult, Statement } from "better-sqlite3";
import type { Compilable } from "kysely";

const MAX_CACHED = 256;

export class SyncRunner {
  private readonly cache = new Map<string, Statement>();

  constructor(readonly raw: Database) {}

  private prepare(sql: string): Statement {
    let stmt = this.cache.get(sql);
    if (!stmt) {
      // Multi-row inserts make one text per row count; a cap keeps the cache bounded.
      if (this.cache.size >= MAX_CACHED) this.cache.clear();
      stmt = this.raw.prepare(sql);
      this.cache.set(sql, stmt);
    }
    return stmt;
  }

  /** Runs a write; `changes` is the number of rows it touched. */
  run(query: Compilable): RunResult {
    const c = query.compile();
    return this.prepare(c.sql).run(...(c.parameters as unknown[]));
  }

  /** Runs a query returning rows (SELECT, or a write with RETURNING). */
  all(query: Compilable): Record<string, unknown>[] {
    const c = query.compile();
    return this.prepare(c.sql).all(...(c.parameters as unknown[])) as Record<string, unknown>[];
  }

  /** Runs `fn` in `BEGIN IMMEDIATE … COMMIT` (the write lock is taken up front); throws roll back. */
  immediate<T>(fn: () => T): T {
    return this.raw.transaction(fn).immediate();
  }
}
