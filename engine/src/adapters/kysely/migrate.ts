/**
 * Runs one dialect's migrations with Kysely's `Migrator` (it records what ran in
 * `baton_migration` and, on Postgres, holds an advisory lock so engines starting together
 * do not race). Migrations are plain SQL, one list per dialect, kept side by side in
 * `adapters/sqlite/migrations.ts` and `adapters/postgres/migrations.ts`.
 */
import { type Kysely, type Migration, Migrator, sql } from "kysely";

/** Ordered by name: `0001_…`, `0002_…`. Each is a list of SQL statements. */
export type SqlMigrations = Record<string, string[]>;

/** Applies pending migrations. Throws `[store] migration … failed` naming the step. */
export async function runMigrations(db: Kysely<unknown>, migrations: SqlMigrations) {
  const provided: Record<string, Migration> = {};
  for (const [name, statements] of Object.entries(migrations)) {
    provided[name] = {
      async up(tx) {
        for (const s of statements) await sql.raw(s).execute(tx);
      },
    };
  }
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => provided },
    migrationTableName: "baton_migration",
    migrationLockTableName: "baton_migration_lock",
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === "Error")?.migrationName ?? "(setup)";
    const msg = error instanceof Error ? error.message : String(error);
    throw new Error(`[store] migration ${failed} failed; the database was left as before: ${msg}`, {
      cause: error,
    });
  }
}

/** `CHECK (col IN ('a','b'))` from a vocabulary, so SQL and TypeScript share one list. */
export function checkIn(column: string, values: readonly string[]): string {
  return `CHECK (${column} IN (${values.map((v) => `'${v}'`).join(", ")}))`;
}
