/**
 * Migrations: plain SQL, one ordered list per dialect, kept side by side in
 * `adapters/sqlite/migrations.ts` and `adapters/postgres/migrations.ts`. What ran is recorded
 * in `baton_migration` in the store's own schema. Each adapter runs `pending` + the
 * statements inside one transaction that holds its dialect's lock, so engines starting
 * together apply each migration once. (Kysely's `Migrator` was not used: it looks for its
 * tables in every schema, so two stores in two schemas of one database confuse it.)
 */

/** Ordered by name: `0001_…`, `0002_…`. Each is a list of SQL statements. */
export type SqlMigrations = Record<string, string[]>;

export const CREATE_MIGRATION_TABLE =
  "CREATE TABLE IF NOT EXISTS baton_migration (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)";

/** Migrations not yet applied, in order. */
export function pending(all: SqlMigrations, applied: Iterable<string>): [string, string[]][] {
  const done = new Set(applied);
  return Object.entries(all)
    .filter(([name]) => !done.has(name))
    .sort(([a], [b]) => a.localeCompare(b));
}

/** Wraps a failure: the transaction rolled back, so the database is as before. */
export function migrationFailed(name: string, err: unknown): Error {
  const msg = err instanceof Error ? err.message : String(err);
  return new Error(`[store] migration ${name} failed; the database was left as before: ${msg}`, {
    cause: err,
  });
}

/** `CHECK (col IN ('a','b'))` from a vocabulary, so SQL and TypeScript share one list. */
export function checkIn(column: string, values: readonly string[]): string {
  return `CHECK (${column} IN (${values.map((v) => `'${v}'`).join(", ")}))`;
}
