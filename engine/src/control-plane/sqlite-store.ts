/**
 * `CpStore` on its own SQLite file (better-sqlite3 12, WAL, synchronous=NORMAL): state and ledger
 * survive a crash of the process that embeds the control plane (WAL + NORMAL is durable against a
 * process kill; a power loss may drop the last transactions). `:memory:` for tests.
 */
import Database from "better-sqlite3";
import { privateSqliteFile } from "../node/private-file.ts";
import type { ChangeRecord, CpAction, LaneState, LedgerEntry } from "./model.ts";
import type { CpStore, HistoryFilter } from "./store.ts";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS cp_lanes (
  id TEXT PRIMARY KEY, model TEXT, weight INTEGER NOT NULL, excluded INTEGER NOT NULL,
  capabilities TEXT NOT NULL, advertised INTEGER NOT NULL, updated_at INTEGER NOT NULL,
  image TEXT);
CREATE TABLE IF NOT EXISTS cp_ledger (
  operation_key TEXT PRIMARY KEY, request_hash TEXT NOT NULL, release_id TEXT NOT NULL,
  release_uid TEXT, generation INTEGER NOT NULL, action TEXT NOT NULL, response TEXT NOT NULL, at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS cp_ledger_release ON cp_ledger (release_id);
CREATE TABLE IF NOT EXISTS cp_generations (release_id TEXT PRIMARY KEY, generation INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS cp_history (
  id INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, operation_key TEXT NOT NULL,
  release_id TEXT NOT NULL, generation INTEGER NOT NULL, kind TEXT NOT NULL, lane TEXT,
  model TEXT, before TEXT NOT NULL, after TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS cp_history_key ON cp_history (operation_key);
`;

interface LaneRow {
  id: string;
  model: string | null;
  weight: number;
  excluded: number;
  capabilities: string;
  advertised: number;
  updated_at: number;
  image: string | null;
}
interface LedgerRow {
  operation_key: string;
  request_hash: string;
  release_id: string;
  generation: number;
  release_uid: string | null;
  action: string;
  response: string;
  at: number;
}
interface HistoryRow {
  id: number;
  at: number;
  operation_key: string;
  release_id: string;
  generation: number;
  kind: ChangeRecord["kind"];
  lane: string | null;
  model: string | null;
  before: string;
  after: string;
}

const toLane = (r: LaneRow): LaneState => ({
  id: r.id,
  model: r.model,
  weight: r.weight,
  excluded: r.excluded === 1,
  capabilities: JSON.parse(r.capabilities) as string[],
  advertised: r.advertised === 1,
  updated_at: r.updated_at,
  // Absent unless the lane reported one (the shape of a lane that never did).
  ...(r.image ? { image: r.image } : {}),
});
const toLedger = (r: LedgerRow): LedgerEntry => ({
  ...r,
  action: JSON.parse(r.action) as CpAction,
  response: JSON.parse(r.response) as LedgerEntry["response"],
});
const toHistory = (r: HistoryRow): ChangeRecord => ({
  ...r,
  before: JSON.parse(r.before),
  after: JSON.parse(r.after),
});

/** Opens (creating if needed) the control plane's SQLite file, or `:memory:`. */
export class SqliteCpStore implements CpStore {
  private readonly db: Database.Database;
  /** Prepared statements by SQL text: each is prepared once and reused (the router asks per request). */
  private readonly statements = new Map<string, Database.Statement>();

  constructor(file: string) {
    privateSqliteFile(file);
    this.db = new Database(file);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = NORMAL");
    this.db.pragma("busy_timeout = 5000");
    this.db.exec(SCHEMA);
    // Ledger files written before release uids existed lack the column; add it (rows get NULL:
    // matched on the request alone, the old behaviour).
    const cols = this.db.pragma("table_info(cp_ledger)") as { name: string }[];
    if (!cols.some((c) => c.name === "release_uid")) {
      this.db.exec("ALTER TABLE cp_ledger ADD COLUMN release_uid TEXT");
    }
    // Lane files written before lanes reported images lack the column (rows get NULL: unknown).
    const laneCols = this.db.pragma("table_info(cp_lanes)") as { name: string }[];
    if (!laneCols.some((c) => c.name === "image")) {
      this.db.exec("ALTER TABLE cp_lanes ADD COLUMN image TEXT");
    }
  }

  /** The statement of `text`, prepared on first use and reused after. */
  private sql(text: string): Database.Statement {
    let st = this.statements.get(text);
    if (!st) {
      st = this.db.prepare(text);
      this.statements.set(text, st);
    }
    return st;
  }

  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }
  getLane(id: string) {
    const row = this.sql("SELECT * FROM cp_lanes WHERE id = ?").get(id) as LaneRow | undefined;
    return row && toLane(row);
  }
  putLane(l: LaneState) {
    this.sql(
      `INSERT INTO cp_lanes (id, model, weight, excluded, capabilities, advertised, updated_at, image)
         VALUES (@id, @model, @weight, @excluded, @capabilities, @advertised, @updated_at, @image)
         ON CONFLICT (id) DO UPDATE SET model = excluded.model, weight = excluded.weight,
           excluded = excluded.excluded, capabilities = excluded.capabilities,
           advertised = excluded.advertised, updated_at = excluded.updated_at,
           image = excluded.image`,
    ).run({
      ...l,
      image: l.image ?? null,
      excluded: l.excluded ? 1 : 0,
      advertised: l.advertised ? 1 : 0,
      capabilities: JSON.stringify(l.capabilities),
    });
  }
  listLanes(model?: string) {
    const rows =
      model === undefined
        ? this.sql("SELECT * FROM cp_lanes ORDER BY id").all()
        : this.sql("SELECT * FROM cp_lanes WHERE model = ? ORDER BY id").all(model);
    return (rows as LaneRow[]).map(toLane);
  }
  getLedger(key: string) {
    const row = this.sql("SELECT * FROM cp_ledger WHERE operation_key = ?").get(key) as
      | LedgerRow
      | undefined;
    return row && toLedger(row);
  }
  putLedger(e: LedgerEntry) {
    this.sql(
      `INSERT INTO cp_ledger (operation_key, request_hash, release_id, release_uid, generation, action, response, at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      e.operation_key,
      e.request_hash,
      e.release_id,
      e.release_uid ?? null,
      e.generation,
      JSON.stringify(e.action),
      JSON.stringify(e.response),
      e.at,
    );
  }
  listLedger(q: { release_id?: string; limit?: number }) {
    const rows = this.sql(
      "SELECT * FROM cp_ledger WHERE (@release_id IS NULL OR release_id = @release_id) ORDER BY at, operation_key LIMIT @limit",
    ).all({ release_id: q.release_id ?? null, limit: q.limit ?? -1 }) as LedgerRow[];
    return rows.map(toLedger);
  }
  getGeneration(releaseId: string) {
    const row = this.sql("SELECT generation FROM cp_generations WHERE release_id = ?").get(
      releaseId,
    ) as { generation: number } | undefined;
    return row?.generation;
  }
  setGeneration(releaseId: string, generation: number) {
    this.sql(
      `INSERT INTO cp_generations (release_id, generation) VALUES (?, ?)
         ON CONFLICT (release_id) DO UPDATE SET generation = excluded.generation`,
    ).run(releaseId, generation);
  }
  appendHistory(e: Omit<ChangeRecord, "id">) {
    const info = this.sql(
      `INSERT INTO cp_history (at, operation_key, release_id, generation, kind, lane, model, before, after)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      e.at,
      e.operation_key,
      e.release_id,
      e.generation,
      e.kind,
      e.lane,
      e.model,
      JSON.stringify(e.before),
      JSON.stringify(e.after),
    );
    return { id: Number(info.lastInsertRowid), ...e };
  }
  listHistory(q: HistoryFilter) {
    const rows = this.sql(
      `SELECT * FROM cp_history
         WHERE (@operation_key IS NULL OR operation_key = @operation_key)
           AND (@release_id IS NULL OR release_id = @release_id)
           AND (@lane IS NULL OR lane = @lane)
           AND id > @after
         ORDER BY id LIMIT @limit`,
    ).all({
      operation_key: q.operation_key ?? null,
      release_id: q.release_id ?? null,
      lane: q.lane ?? null,
      after: q.after ?? 0,
      limit: q.limit ?? -1,
    }) as HistoryRow[];
    return rows.map(toHistory);
  }
  close() {
    if (this.db.open) this.db.close();
  }
}
