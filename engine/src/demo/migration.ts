/**
 * The demo's side of a recipe with a migration (docs/recipes.md "Migrations"): it seeds the
 * table the migration backfills in the embedded target's sandbox (a small SQLite file, so the
 * backfill the `migrate-table` tool performs over SSH is real), prints the phases, checkpoints
 * and evidence once the release ended, and shows that the contract is refused until the
 * rollback window of the release that activated the new form has closed.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import type { RecipeInput } from "../domain/recipe.ts";
import type { ReleaseRecordDocument } from "../record/schema.ts";

/** Rows the demo's table starts with. */
export const DEMO_ROWS = 200;

interface TableInputs {
  database: string;
  table: string;
  key: string;
  from: string;
  to: string;
}

const NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** The migrate phase's table inputs of `recipe`, or null when it has no such migration. */
function tableOf(recipe: RecipeInput): TableInputs | null {
  const m = recipe.migration;
  if (!m?.migrate) return null;
  const i = { ...(m.inputs ?? {}), ...(m.migrate.inputs ?? {}) };
  const t = {
    database: String(i.database ?? ""),
    table: String(i.table ?? ""),
    key: String(i.key ?? "id"),
    from: String(i.from ?? ""),
    to: String(i.to ?? ""),
  };
  const ok =
    /^[A-Za-z0-9._-]{1,200}$/.test(t.database) &&
    [t.table, t.key, t.from, t.to].every((n) => NAME.test(n));
  return ok ? t : null;
}

function sqlite(dbPath: string, sql: string): string {
  // stderr kept: a failed query is the caller's to describe, not sqlite3's raw text.
  return execFileSync("sqlite3", ["-batch", "-bail", dbPath, sql], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  }).trim();
}

/**
 * Creates the migration's table in the target's sandbox with `DEMO_ROWS` rows of mixed-case,
 * padded e-mail addresses (what the backfill normalises), unless it holds rows already.
 * Returns the lines to print; none when the recipe has no migrate phase with table inputs.
 */
export function seedMigrationTable(recipe: RecipeInput, sandboxDir: string): string[] {
  const t = tableOf(recipe);
  if (!t) return [];
  const db = join(sandboxDir, t.database);
  sqlite(
    db,
    `CREATE TABLE IF NOT EXISTS ${t.table} (${t.key} INTEGER PRIMARY KEY, ${t.from} TEXT NOT NULL);`,
  );
  if (Number(sqlite(db, `SELECT count(*) FROM ${t.table};`)) === 0) {
    const rows = Array.from(
      { length: DEMO_ROWS },
      (_, i) => `(${i + 1}, '  Customer${i + 1}@Example.COM ')`,
    ).join(",");
    sqlite(db, `INSERT INTO ${t.table} VALUES ${rows};`);
  }
  return [
    `[demo] migration      table ${t.table} in ${db} (${sqlite(db, `SELECT count(*) FROM ${t.table};`)} rows) on the SSH target: the release expands it (${t.to}), backfills ${t.to} from ${t.from} in checkpointed batches, verifies, then activates`,
  ];
}

/**
 * What the table holds after the release (in `state`): rows, rows with the new form, row
 * writes; or that the new form's column is not there, and why as far as the state tells.
 */
export function tableLines(recipe: RecipeInput, sandboxDir: string, state: string): string[] {
  const t = tableOf(recipe);
  if (!t) return [];
  const db = join(sandboxDir, t.database);
  try {
    const [rows, filled, writes] = sqlite(
      db,
      `SELECT count(*), count(${t.to}), coalesce(sum(${t.to}_writes), 0) FROM ${t.table};`,
    ).split("|");
    return [
      `[demo] migration      table ${t.table} now: ${rows} rows, ${filled} with ${t.to}, ${writes} row writes by the backfill`,
    ];
  } catch {
    const why =
      state === "rolled_back"
        ? "the release was undone"
        : `the release is ${state}: its expand did not run, or was undone`;
    return [`[demo] migration      table ${t.table} has no column ${t.to} (${why})`];
  }
}

/** The record's migration phases, checkpoints and evidence, one line each. */
export function phaseLines(doc: ReleaseRecordDocument): string[] {
  const m = doc.migration;
  if (!m) return [];
  const out: string[] = [];
  for (const p of m.phases) {
    out.push(`[demo] phase          ${p.phase.padEnd(9)}${p.state}`);
    for (const c of p.checkpoints ?? [])
      out.push(
        `[demo]                  checkpoint (attempt ${c.attempt}) ${JSON.stringify(c.checkpoint)}`,
      );
    for (const e of p.evidence ?? [])
      out.push(
        `[demo]                  evidence (attempt ${e.attempt}) ${e.checks.map((c) => `${c.name} ${c.passed ? "passed" : "FAILED"}`).join(", ")}`,
      );
  }
  return out;
}

/**
 * The later release that contracts the migration of `recipe`: the next image (a digest the demo
 * makes up; the release is only asked for, never run), the old form's readers the lanes ran
 * before (`previous_image`), and a contract by the migrate phase's tool. Null without a
 * migrate phase.
 */
export function contractRecipe(recipe: RecipeInput): RecipeInput | null {
  const m = recipe.migration;
  if (!m?.migrate) return null;
  return {
    ...structuredClone(recipe),
    name: `${recipe.name}-contract`.slice(0, 128),
    image: `${String(recipe.image).split("@")[0]}-next@sha256:${"c0".repeat(32)}`,
    previous_image: recipe.image,
    migration: {
      id: m.id,
      ...(m.lane ? { lane: m.lane } : {}),
      ...(m.inputs ? { inputs: { ...m.inputs } } : {}),
      contract: {
        forward: m.migrate.forward,
        ...(m.migrate.inputs ? { inputs: { ...m.migrate.inputs } } : {}),
      },
      old_form_readers: [String(recipe.previous_image)],
    },
  };
}
