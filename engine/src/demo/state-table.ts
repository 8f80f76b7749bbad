/**
 * The demo's persisted state: one small SQLite table (`features`) the demo writes rows to, and
 * restore points taken of it, in the shape the reference restore tool `restore-sqlite` reads
 * (docs/recovery-actions.md "Restore state"): a snapshot `<snapshots>/<name>.db` holding a copy
 * of the table and one `baton_restore_point(name, taken_at)` row.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";

/** The table's inputs for a recipe's `restore_state` (`database`, `table`, `snapshots`). */
export interface StateTable {
  database: string;
  table: string;
  snapshots: string;
  /** Writes one row now (`written_at` = `at`, epoch ms); answers its id. */
  write(at: number): number;
  /** Takes restore point `name` at `at` (epoch ms): a copy of the table as it is now. */
  snapshot(name: string, at: number): void;
  /** The ids in the table, ascending. */
  ids(): number[];
  close(): void;
}

/** Creates the table in `dir/state.db` with its snapshot folder `dir/snapshots`. */
export function openStateTable(dir: string): StateTable {
  const database = join(dir, "state.db");
  const snapshots = join(dir, "snapshots");
  mkdirSync(snapshots, { recursive: true });
  const db = new Database(database);
  db.exec(
    "CREATE TABLE IF NOT EXISTS features (id INTEGER PRIMARY KEY, value TEXT NOT NULL, written_at INTEGER NOT NULL)",
  );
  const insert = db.prepare("INSERT INTO features (value, written_at) VALUES (?, ?)");
  return {
    database,
    table: "features",
    snapshots,
    write(at) {
      return Number(insert.run(`v${at}`, at).lastInsertRowid);
    },
    snapshot(name, at) {
      const file = join(snapshots, `${name}.db`);
      db.prepare("VACUUM INTO ?").run(file);
      const snap = new Database(file);
      snap.exec("CREATE TABLE baton_restore_point (name TEXT NOT NULL, taken_at INTEGER NOT NULL)");
      snap.prepare("INSERT INTO baton_restore_point VALUES (?, ?)").run(name, at);
      snap.close();
    },
    ids() {
      return (db.prepare("SELECT id FROM features ORDER BY id").all() as { id: number }[]).map(
        (r) => r.id,
      );
    },
    close() {
      db.close();
    },
  };
}
