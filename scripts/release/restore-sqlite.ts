/**
 * Tool `restore-sqlite`: the reference restore tool of a `recoverable` recipe's
 * `restore_state` (docs/recovery-actions.md "Restore state"). Restores one table of a SQLite
 * database to a restore point: a snapshot file `<snapshots>/<point>.db` holding a copy of the
 * table and one row `baton_restore_point(name, taken_at)` (epoch ms). Point `latest` is the
 * snapshot taken last.
 *
 * It reports, in checks.json, a `restore` check with the point, when it was taken
 * (`point_at`), the rows of the live table the point does not have (`rows_lost`, by
 * `key_column`), the RPO (`rpo_ms`: from the point to the newest `time_column` of those rows;
 * 0 when none was lost) and `rows_restored`; then a `verify` check: the table read back equals
 * the snapshot's, row for row. A repeat with the same operation key restores nothing again and
 * reports what the first run did (kept in `baton_restores` in the database).
 *
 * Inputs (`restore_state.inputs`): `database`, `table`, `snapshots` (folder); optional
 * `key_column` (default `id`) and `time_column` (default `written_at`). Runs the `sqlite3`
 * command-line shell on the runner (BATON_SQLITE3 overrides its path).
 * Usage: restore-sqlite --args <args.json> --key <ssh key> --result-dir <dir> --operation-key <key>
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { appendLog, type Check, writeChecks, writeOutcome } from "../lib/result.ts";
import { parseToolCli } from "../lib/tool-args.ts";

const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const POINT = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

interface Inputs {
  database: string;
  table: string;
  snapshots: string;
  key: string;
  time: string;
}

class Refused extends Error {}

function inputsOf(args: Record<string, unknown>): { point: string; inputs: Inputs } {
  const raw = (args.inputs ?? {}) as Record<string, unknown>;
  const str = (k: string, dflt?: string) => {
    const v = raw[k] ?? dflt;
    if (typeof v !== "string" || v === "")
      throw new Refused(`[restore-sqlite] input \`${k}\` is required (restore_state.inputs.${k})`);
    return v;
  };
  const inputs = {
    database: str("database"),
    table: str("table"),
    snapshots: str("snapshots"),
    key: str("key_column", "id"),
    time: str("time_column", "written_at"),
  };
  for (const k of ["table", "key", "time"] as const)
    if (!NAME.test(inputs[k]))
      throw new Refused(`[restore-sqlite] input ${k} \`${inputs[k]}\` is not a SQL identifier`);
  const point = typeof args.point === "string" ? args.point : "latest";
  if (!POINT.test(point))
    throw new Refused(`[restore-sqlite] point \`${point}\` is not a restore point name`);
  return { point, inputs };
}

const q = (s: string) => `'${s.replaceAll("'", "''")}'`;

/** Runs SQL with the sqlite3 shell against `db`; answers the rows of the last statement. */
function sql(db: string, text: string): Record<string, unknown>[] {
  const bin = process.env.BATON_SQLITE3 || "sqlite3";
  const out = execFileSync(bin, ["-bail", "-json", db], {
    input: `.timeout 5000\n${text}\n`,
    encoding: "utf8",
    stdio: ["pipe", "pipe", "pipe"],
  }).trim();
  if (!out) return [];
  // -json prints one array per statement that returns rows: keep the last.
  const arrays = out.split(/\n(?=\[)/);
  return JSON.parse(arrays[arrays.length - 1]!) as Record<string, unknown>[];
}

/** The snapshot file of `point` and when it was taken. */
function snapshotOf(dir: string, point: string): { file: string; name: string; at: number } {
  if (!existsSync(dir)) throw new Refused(`[restore-sqlite] snapshot folder ${dir} does not exist`);
  const files = readdirSync(dir).filter((f) => f.endsWith(".db"));
  const read = (f: string) => {
    const file = join(dir, f);
    const row = sql(file, "SELECT name, taken_at FROM baton_restore_point LIMIT 1;")[0];
    if (!row || typeof row.taken_at !== "number")
      throw new Refused(`[restore-sqlite] snapshot ${file} has no baton_restore_point row`);
    return { file, name: String(row.name), at: row.taken_at };
  };
  if (point !== "latest") {
    if (!files.includes(`${point}.db`))
      throw new Refused(
        `[restore-sqlite] no restore point ${point} in ${dir} (points: ${files.map((f) => f.slice(0, -3)).join(", ") || "none"})`,
      );
    return read(`${point}.db`);
  }
  const all = files.map(read).sort((a, b) => b.at - a.at);
  if (!all[0]) throw new Refused(`[restore-sqlite] no restore point in ${dir}`);
  return all[0];
}

function restore(point: string, i: Inputs, operationKey: string): Check[] {
  const t0 = Date.now();
  sql(
    i.database,
    "CREATE TABLE IF NOT EXISTS baton_restores (operation_key TEXT PRIMARY KEY, report TEXT NOT NULL);",
  );
  const done = sql(
    i.database,
    `SELECT report FROM baton_restores WHERE operation_key = ${q(operationKey)};`,
  )[0];
  if (done) return JSON.parse(String(done.report)) as Check[];
  const snap = snapshotOf(i.snapshots, point);
  const attach = `ATTACH ${q(snap.file)} AS snap;`;
  const lost = sql(
    i.database,
    `${attach} SELECT count(*) AS n, max(${i.time}) AS last FROM main.${i.table} WHERE ${i.key} NOT IN (SELECT ${i.key} FROM snap.${i.table});`,
  )[0] ?? { n: 0, last: null };
  const rowsLost = Number(lost.n);
  const lastWrite = typeof lost.last === "number" ? lost.last : snap.at;
  const restored = sql(
    i.database,
    `${attach} BEGIN IMMEDIATE; DELETE FROM main.${i.table}; INSERT INTO main.${i.table} SELECT * FROM snap.${i.table}; COMMIT; SELECT count(*) AS n FROM main.${i.table};`,
  )[0];
  const diff = sql(
    i.database,
    `${attach} SELECT (SELECT count(*) FROM (SELECT * FROM main.${i.table} EXCEPT SELECT * FROM snap.${i.table})) + (SELECT count(*) FROM (SELECT * FROM snap.${i.table} EXCEPT SELECT * FROM main.${i.table})) AS d;`,
  )[0];
  const equal = Number(diff?.d) === 0;
  const checks: Check[] = [
    {
      name: "restore",
      status: "ok",
      duration_ms: Date.now() - t0,
      point: snap.name,
      point_at: snap.at,
      rows_lost: rowsLost,
      rpo_ms: rowsLost > 0 ? Math.max(0, lastWrite - snap.at) : 0,
      rows_restored: Number(restored?.n ?? 0),
      message: `table ${i.table} restored to point ${snap.name}; ${rowsLost} rows written after it are lost`,
    },
    {
      name: "verify",
      status: equal ? "ok" : "failed",
      message: equal
        ? `table ${i.table} read back equals point ${snap.name}`
        : `table ${i.table} differs from point ${snap.name} in ${Number(diff?.d)} rows after the restore`,
    },
  ];
  sql(
    i.database,
    `INSERT OR IGNORE INTO baton_restores VALUES (${q(operationKey)}, ${q(JSON.stringify(checks))});`,
  );
  return checks;
}

const cli = parseToolCli(process.argv.slice(2), process.env);
const log = (line: string) => {
  process.stdout.write(`${line}\n`);
  appendLog(cli.resultDir, line);
};
try {
  const args = JSON.parse(readFileSync(cli.argsPath, "utf8")) as Record<string, unknown>;
  const { point, inputs } = inputsOf(args);
  const checks = restore(point, inputs, cli.operationKey);
  writeChecks(cli.resultDir, checks);
  for (const c of checks) log(`[restore-sqlite] ${c.name}: ${c.status}: ${c.message ?? ""}`);
  const ok = checks.every((c) => c.status === "ok");
  writeOutcome(cli.resultDir, ok ? "succeeded" : "failed", ok ? "pass" : "fail");
  process.exitCode = ok ? 0 : 1;
} catch (e) {
  const message =
    e instanceof Refused ? e.message : `[restore-sqlite] ${(e as Error).message.trim()}`;
  log(message);
  writeChecks(cli.resultDir, [{ name: "restore", status: "failed", message }]);
  writeOutcome(cli.resultDir, "failed", "fail");
  process.exitCode = 1;
}
