/**
 * The demo's line about the migrated table (engine/src/demo/migration.ts tableLines): when the
 * new form's column is not there it says so and why as far as the release's state tells, never
 * "undone" for a release that is only paused.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { tableLines } from "../../engine/src/demo/migration.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";

const recipe = parse(readFileSync("recipes/migration.yaml", "utf8")) as RecipeInput;
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function sandboxWithTable(withNewForm: boolean): string {
  const dir = mkdtempSync(join(tmpdir(), "baton-demo-mig-"));
  dirs.push(dir);
  const i = recipe.migration?.inputs as {
    database: string;
    table: string;
    key: string;
    from: string;
    to: string;
  };
  const db = new Database(join(dir, i.database));
  db.exec(`CREATE TABLE ${i.table} (${i.key} INTEGER PRIMARY KEY, ${i.from} TEXT)`);
  if (withNewForm)
    db.exec(
      `ALTER TABLE ${i.table} ADD ${i.to} TEXT; ALTER TABLE ${i.table} ADD ${i.to}_writes INTEGER`,
    );
  db.exec(`INSERT INTO ${i.table} (${i.key}, ${i.from}) VALUES (1, 'a')`);
  db.close();
  return dir;
}

describe("demo tableLines", () => {
  it("a paused release without the new column is not called undone", () => {
    const lines = tableLines(recipe, sandboxWithTable(false), "paused");
    expect(lines).toEqual([
      "[demo] migration      table customers has no column email_norm (the release is paused: its expand did not run, or was undone)",
    ]);
  });

  it("a rolled-back release: undone; a table with the column: its counts", () => {
    expect(tableLines(recipe, sandboxWithTable(false), "rolled_back")[0]).toContain(
      "(the release was undone)",
    );
    expect(tableLines(recipe, sandboxWithTable(true), "succeeded")[0]).toBe(
      "[demo] migration      table customers now: 1 rows, 0 with email_norm, 0 row writes by the backfill",
    );
  });
});
