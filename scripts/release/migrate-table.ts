/**
 * Tool `migrate-table`: the phases of a column migration of one SQLite table on the lane's
 * machine (docs/recipes.md "Migrations"), run with the `sqlite3` CLI over SSH. Which phase and
 * direction come from `args.step` (the migration's step name and direction):
 *   expand   forward: add `<to>` and its write counter `<to>_writes`; backward: drop them
 *   migrate  forward: backfill `<to> = lower(trim(<from>))` in batches of `batch` rows by
 *            `<key>`, from `args.checkpoint.after_key` when the engine handed one back; after
 *            each committed batch checks.json holds the checkpoint (so a cut-short run reports
 *            it); then the verifications (count, integrity, equivalence);
 *            backward: clear `<to>` (the expand's undo drops it)
 *   contract forward: drop `<from>` (irreversible)
 * Inputs: `database` (path on the machine, relative to the SSH user's home), `table`, `key`
 * (default `id`, an integer key), `from`, `to`, `batch` (default 100). Each is validated
 * before any command is built. Every row write also adds 1 to `<to>_writes`: a row written
 * twice (a batch redone) shows there.
 * Usage: migrate-table --args <args.json> --key <ssh key> --result-dir <dir> --operation-key <key>
 */
import { readFileSync } from "node:fs";
import { migrateTableInputs } from "../../engine/src/protocol/migrate-table-inputs.ts";
import { appendLog, type Check, writeChecks, writeOutcome } from "../lib/result.ts";
import { shQuote } from "../lib/shell-quote.ts";
import { connect, type SshSession } from "../lib/ssh.ts";
import { parseToolCli, readToolArgs } from "../lib/tool-args.ts";

const STEP_MS = 120_000;

interface Spec {
  phase: string;
  direction: string;
  database: string;
  table: string;
  key: string;
  from: string;
  to: string;
  batch: number;
  afterKey: number | null;
}

/** The migration's inputs and the checkpoint from the raw args; throws naming a bad field. */
function specOf(raw: Record<string, unknown>): Spec {
  const step = (raw.step ?? {}) as Record<string, unknown>;
  const inputs = (raw.inputs ?? {}) as Record<string, unknown>;
  const { problems, value } = migrateTableInputs(inputs);
  if (problems[0]) throw new Error(`[migrate-table] ${problems[0].message}`);
  const cp = (raw.checkpoint ?? null) as Record<string, unknown> | null;
  const after = cp?.after_key;
  if (after !== undefined && (typeof after !== "number" || !Number.isSafeInteger(after)))
    throw new Error("[migrate-table] args.checkpoint.after_key must be an integer key");
  return {
    phase: String(step.name ?? ""),
    direction: String(step.direction ?? "forward"),
    ...value,
    afterKey: typeof after === "number" ? after : null,
  };
}

async function main(): Promise<number> {
  const cli = parseToolCli(process.argv.slice(2), process.env);
  const dir = cli.resultDir;
  const log = (line: string) => {
    process.stdout.write(`${line}\n`);
    appendLog(dir, line);
  };
  const checks: Check[] = [];
  const conclude = (
    overall: "pass" | "fail",
    status = overall === "pass" ? "succeeded" : "failed",
  ) => {
    writeChecks(dir, checks);
    writeOutcome(dir, status, overall);
    return overall === "pass" ? 0 : 1;
  };
  let session: SshSession | undefined;
  const onSignal = (sig: NodeJS.Signals) => {
    log(`[migrate-table] received ${sig}; the last committed batch's checkpoint stands`);
    conclude("fail", "cancelled");
    session?.close();
    process.exit(143);
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);

  let spec: Spec;
  let lane: ReturnType<typeof readToolArgs>["lane"];
  try {
    lane = readToolArgs(cli.argsPath).lane;
    spec = specOf(JSON.parse(readFileSync(cli.argsPath, "utf8")) as Record<string, unknown>);
  } catch (e) {
    log((e as Error).message);
    checks.push({
      name: "arguments",
      status: "failed",
      class: "bad_arguments",
      message: (e as Error).message,
    });
    return conclude("fail");
  }
  try {
    session = await connect(
      { host: lane.host, port: lane.port, user: lane.user, hostKey: lane.host_key },
      {
        privateKey: readFileSync(cli.keyPath, "utf8"),
        passphrase: process.env.BATON_SSH_PASSPHRASE || undefined,
        connectTimeoutMs: 20_000,
      },
    );
  } catch (e) {
    log((e as Error).message);
    checks.push({ name: "connect", status: "failed", message: (e as Error).message });
    return conclude("fail");
  }
  checks.push({ name: "connect", status: "ok" });
  const sql = async (text: string): Promise<string> => {
    const r = await session!.exec(
      `sqlite3 -batch -bail ${shQuote(spec.database)} ${shQuote(text)}`,
      STEP_MS,
    );
    if (r.exit_code !== 0)
      throw new Error(
        `sqlite3 exited ${r.exit_code ?? r.signal}: ${(r.stderr || r.stdout).trim().slice(0, 400)}`,
      );
    return r.stdout.trim();
  };
  const { table: t, from, to } = spec;
  const hasColumn = async (c: string) =>
    (await sql(`SELECT count(*) FROM pragma_table_info('${t}') WHERE name = '${c}';`)) === "1";
  try {
    log(`[migrate-table] ${spec.phase} ${spec.direction} on ${spec.database} table ${t}`);
    if (spec.phase === "expand" && spec.direction === "forward") {
      if (!(await hasColumn(to)))
        await sql(
          `ALTER TABLE ${t} ADD COLUMN ${to} TEXT; ALTER TABLE ${t} ADD COLUMN ${to}_writes INTEGER NOT NULL DEFAULT 0;`,
        );
      checks.push({ name: "expand", status: "ok", message: `${t} has ${to} beside ${from}` });
    } else if (spec.phase === "expand") {
      if (await hasColumn(to))
        await sql(`ALTER TABLE ${t} DROP COLUMN ${to}; ALTER TABLE ${t} DROP COLUMN ${to}_writes;`);
      checks.push({ name: "unexpand", status: "ok", message: `${to} dropped from ${t}` });
    } else if (spec.phase === "migrate" && spec.direction === "forward") {
      await backfill(spec, sql, checks, dir, log);
      const [rows, filled] = (await sql(`SELECT count(*), count(${to}) FROM ${t};`))
        .split("|")
        .map(Number);
      const integrity = await sql("PRAGMA integrity_check; PRAGMA foreign_key_check;");
      const differ = Number(
        await sql(`SELECT count(*) FROM ${t} WHERE ${to} IS NOT lower(trim(${from}));`),
      );
      checks.push(
        {
          name: "count",
          kind: "verification",
          status: rows === filled ? "passed" : "failed",
          expected: rows ?? null,
          observed: filled ?? null,
          message: `${filled} of ${rows} rows have ${to}`,
        },
        {
          name: "integrity",
          kind: "verification",
          status: integrity === "ok" ? "passed" : "failed",
          expected: "ok",
          observed: integrity.slice(0, 200),
          message: "PRAGMA integrity_check and foreign_key_check",
        },
        {
          name: "equivalence",
          kind: "verification",
          status: differ === 0 ? "passed" : "failed",
          expected: 0,
          observed: differ,
          message: `rows whose ${to} is not lower(trim(${from}))`,
        },
      );
      const ok = checks.every((c) => c.status !== "failed");
      return conclude(ok ? "pass" : "fail");
    } else if (spec.phase === "migrate") {
      if (await hasColumn(to)) await sql(`UPDATE ${t} SET ${to} = NULL;`);
      checks.push({ name: "unmigrate", status: "ok", message: `${to} cleared` });
    } else if (spec.phase === "contract" && spec.direction === "forward") {
      if (await hasColumn(from)) await sql(`ALTER TABLE ${t} DROP COLUMN ${from};`);
      checks.push({ name: "contract", status: "ok", message: `${from} dropped from ${t}` });
    } else {
      throw new Error(
        `no ${spec.direction} action for step ${JSON.stringify(spec.phase)} (expand, migrate or contract)`,
      );
    }
    return conclude("pass");
  } catch (e) {
    log(`[migrate-table] ${(e as Error).message}`);
    checks.push({
      name: spec.phase || "migration",
      status: "failed",
      message: (e as Error).message,
    });
    return conclude("fail");
  } finally {
    session.close();
  }
}

/**
 * Batches from the checkpoint to the end. Each batch is one transaction that writes its rows
 * and answers the last key it covered; checks.json is rewritten after each with the new
 * checkpoint, so a run cut short (killed, failed) reports the last committed one.
 */
async function backfill(
  spec: Spec,
  sql: (text: string) => Promise<string>,
  checks: Check[],
  dir: string,
  log: (line: string) => void,
): Promise<void> {
  const { table: t, key: k, from, to, batch } = spec;
  let after = spec.afterKey;
  const record: Check = {
    name: "backfill",
    kind: "checkpoint",
    status: "running",
    resumed_from: after,
    checkpoint: { after_key: after, rows: 0 },
  };
  checks.push(record);
  let rows = 0;
  for (let round = 0; round < 1_000_000; round++) {
    const where = after === null ? "" : `WHERE ${k} > ${after}`;
    const slice = `SELECT ${k} FROM ${t} ${where} ORDER BY ${k} LIMIT ${batch}`;
    const out = await sql(
      `BEGIN IMMEDIATE; UPDATE ${t} SET ${to} = lower(trim(${from})), ${to}_writes = ${to}_writes + 1 WHERE ${k} IN (${slice}); SELECT coalesce(max(${k}), ''), count(*) FROM (${slice}); COMMIT;`,
    );
    // The SELECT runs after the UPDATE in the same transaction: the same slice (keys unchanged).
    const [last, n] = out.split("|");
    if (!n || Number(n) === 0) break;
    after = Number(last);
    rows += Number(n);
    record.checkpoint = { after_key: after, rows };
    writeChecks(dir, checks);
    log(`[migrate-table] batch of ${n} rows committed; checkpoint after_key=${after}`);
  }
  record.status = "ok";
  record.message = `${rows} rows written this run${spec.afterKey === null ? "" : `, resumed after key ${spec.afterKey}`}`;
}

process.exitCode = await main();
