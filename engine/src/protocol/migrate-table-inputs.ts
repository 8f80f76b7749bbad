/**
 * The inputs the `migrate-table` runner tool reads (scripts/release/migrate-table.ts), checked
 * in one place: by the tool before it builds any command, and by the contract check on a recipe
 * whose migration or custom step runs the tool, so a bad input is refused at `baton check`
 * rather than on the machine. Inputs: `database` (a path on the machine), `table`, `key`
 * (default `id`), `from`, `to` (lowercase SQL names), `batch` (rows per batch, 1-100,000,
 * default 100).
 */

/** A lowercase SQL name: a letter or '_', then letters, digits or '_' (≤ 63). */
const NAME = /^[a-z_][a-z0-9_]{0,62}$/;
/** A file path of letters, digits, '.', '_', '/', '-' (≤ 200), without '..'. */
const PATH = /^[A-Za-z0-9._/-]{1,200}$/;
/** Rows per batch: at least 1, at most 100,000; default 100. */
export const MIGRATE_TABLE_BATCH = { min: 1, max: 100_000, default: 100 } as const;

/** The migrate-table inputs, validated and defaulted. */
export interface MigrateTableInputs {
  database: string;
  table: string;
  key: string;
  from: string;
  to: string;
  batch: number;
}

/** One bad input: its name, what it must be, and what to write. */
export interface InputProblem {
  field: string;
  message: string;
  fix: string;
}

/** Checks `inputs` (any JSON); the problems (empty when good) and the defaulted inputs. */
export function migrateTableInputs(inputs: Record<string, unknown>): {
  problems: InputProblem[];
  value: MigrateTableInputs;
} {
  const problems: InputProblem[] = [];
  const name = (field: string, fallback?: string): string => {
    const v = inputs[field] ?? fallback;
    if (typeof v === "string" && NAME.test(v)) return v;
    problems.push({
      field,
      message: `inputs.${field} must be a lowercase SQL name: a letter or '_', then letters, digits or '_' (got ${JSON.stringify(v) ?? "nothing"})`,
      fix: `Name the ${field === "key" ? "integer key column" : field === "table" ? "table" : `column to migrate ${field}`} as the table spells it, e.g. ${field === "key" ? "id" : field === "table" ? "customers" : field === "from" ? "email" : "email_norm"}.`,
    });
    return "";
  };
  const database = inputs.database;
  if (typeof database !== "string" || !PATH.test(database) || database.includes(".."))
    problems.push({
      field: "database",
      message:
        "inputs.database must be a file path of letters, digits, '.', '_', '/', '-' (no '..')",
      fix: "Give the database file's path on the machine, relative to the SSH user's home, e.g. customers.db.",
    });
  const batch = inputs.batch ?? MIGRATE_TABLE_BATCH.default;
  if (
    typeof batch !== "number" ||
    !Number.isInteger(batch) ||
    batch < MIGRATE_TABLE_BATCH.min ||
    batch > MIGRATE_TABLE_BATCH.max
  )
    problems.push({
      field: "batch",
      message: `inputs.batch must be a whole number of rows, ${MIGRATE_TABLE_BATCH.min} to ${MIGRATE_TABLE_BATCH.max}`,
      fix: `Use a whole number of rows per batch from ${MIGRATE_TABLE_BATCH.min} to ${MIGRATE_TABLE_BATCH.max}, e.g. 500, or remove it for ${MIGRATE_TABLE_BATCH.default}.`,
    });
  const value = {
    database: typeof database === "string" ? database : "",
    table: name("table"),
    key: name("key", "id"),
    from: name("from"),
    to: name("to"),
    batch: typeof batch === "number" ? batch : MIGRATE_TABLE_BATCH.default,
  };
  return { problems, value };
}
