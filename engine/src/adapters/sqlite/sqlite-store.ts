/**
 * Store on SQLite (docs/storage.md, embedded default): one file, WAL mode, one writer at a time.
 * Every write method is one synchronous `BEGIN IMMEDIATE` transaction (see `SyncRunner`).
 */
import Database from "better-sqlite3";
import { Kysely, SqliteDialect, sql } from "kysely";
import { storableValue } from "../../domain/storable-text.ts";
import type { HistoryEntry, OutboxEffect, Release } from "../../domain/types.ts";
import { privateSqliteFile } from "../../node/private-file.ts";
import {
  type CommitInput,
  type CommitResult,
  type CreateExtras,
  LanesClaimed,
  type OutboxRow,
  SourceMarkMoved,
} from "../../ports/store.ts";
import { KyselyStore } from "../kysely/base-store.ts";
import { checkNextVersion, writeFailed } from "../kysely/errors.ts";
import { CREATE_MIGRATION_TABLE, migrationFailed, pending } from "../kysely/migrate.ts";
import { type CompactionPlan, chunks } from "../kysely/retention.ts";
import { historyColumns, toOutboxRow } from "../kysely/rows.ts";
import type { BatonDatabase } from "../kysely/tables.ts";
import {
  claimLanes,
  insertHistory,
  insertManifest,
  insertOutbox,
  insertRelease,
  raiseAdmissionMark,
  selectLaneClaims,
  setSourceMark,
} from "../kysely/writes.ts";
import { CommitStatements } from "./commit-statements.ts";
import { deflateJson, isDeflated, sqliteJson } from "./json-codec.ts";
import { sqliteMigrations } from "./migrations.ts";
import { SyncRunner } from "./sync-runner.ts";

/** How long a write waits for another process's write lock before failing (ms). */
const BUSY_TIMEOUT_MS = 5000;

class ClaimLost extends Error {}

export class SqliteStore extends KyselyStore {
  private readonly sync: SyncRunner;
  /** Prepared on first commit (the tables exist only after `migrate`). */
  private statements: CommitStatements | null = null;

  constructor(raw: Database.Database) {
    super(new Kysely<BatonDatabase>({ dialect: new SqliteDialect({ database: raw }) }), sqliteJson);
    this.sync = new SyncRunner(raw);
  }

  /**
   * The store's own better-sqlite3 connection. Exposed for the engine benchmark, which times
   * a raw conditional UPDATE on the same connection the store commits on; not for writing data.
   */
  get database(): Database.Database {
    return this.sync.raw;
  }

  async migrate(): Promise<void> {
    this.live();
    const raw = this.sync.raw;
    let current = "(setup)";
    try {
      this.sync.immediate(() => {
        raw.exec(CREATE_MIGRATION_TABLE);
        const applied = raw.prepare("SELECT name FROM baton_migration").pluck().all() as string[];
        for (const [name, statements] of pending(sqliteMigrations, applied)) {
          current = name;
          for (const s of statements) raw.exec(s);
          raw.prepare("INSERT INTO baton_migration VALUES (?, ?)").run(name, Date.now());
        }
      });
    } catch (err) {
      throw migrationFailed(current, err);
    }
  }

  async nextReleaseNumber(): Promise<number> {
    const q = this.live()
      .updateTable("release_sequence")
      .set({ value: sql`value + 1` })
      .where("name", "=", "release")
      .returning("value");
    const rows = this.sync.immediate(() => this.sync.all(q));
    return Number(rows[0]?.value);
  }

  async createRelease(
    dirty: Release,
    dirtyHistory: HistoryEntry[],
    dirtyEffects: OutboxEffect[],
    now: number,
    extras: CreateExtras = {},
  ): Promise<void> {
    // NUL and lone surrogates become U+FFFD on every store (domain/storable-text.ts).
    const [release, history, effects] = storableValue([dirty, dirtyHistory, dirtyEffects] as const);
    const db = this.live();
    const lanes = extras.claimLanes ?? [];
    try {
      this.sync.immediate(() => {
        this.sync.run(insertRelease(db, release));
        this.sync.run(insertManifest(db, release));
        if (history.length > 0) this.sync.run(insertHistory(db, history));
        if (effects.length > 0) this.sync.run(insertOutbox(db, release.id, effects, now));
        if (extras.admissionMark) this.sync.run(raiseAdmissionMark(db, extras.admissionMark));
        const source = extras.sourceMark;
        if (source && this.sync.all(setSourceMark(db, source.mark, source.expect)).length === 0) {
          throw new SourceMarkMoved(source.mark.model, source.expect); // rolls back the creation
        }
        if (lanes.length > 0) {
          const got = new Set(
            this.sync.all(claimLanes(db, release.id, lanes, now)).map((r) => r.lane_id),
          );
          const missing = lanes.filter((l) => !got.has(l));
          if (missing.length > 0) {
            // Throwing rolls the whole creation back (the immediate transaction).
            const owners = this.sync.all(selectLaneClaims(db, missing)).map((r) => ({
              lane_id: String(r.lane_id),
              release_id: String(r.release_id),
            }));
            throw new LanesClaimed(release.id, owners);
          }
        }
      });
    } catch (err) {
      if (err instanceof LanesClaimed || err instanceof SourceMarkMoved) throw err;
      throw writeFailed(`creating release ${release.id}`, err);
    }
    this.manifests.set(release.id, release.manifest);
  }

  async appendHistoryWithEffects(
    releaseId: string,
    dirtyHistory: HistoryEntry[],
    dirtyEffects: OutboxEffect[],
    now: number,
  ): Promise<void> {
    const [history, effects] = storableValue([dirtyHistory, dirtyEffects] as const);
    const db = this.live();
    this.sync.immediate(() => {
      if (history.length > 0) this.sync.run(insertHistory(db, history));
      if (effects.length > 0) this.sync.run(insertOutbox(db, releaseId, effects, now));
    });
  }

  async commit(dirty: CommitInput): Promise<CommitResult> {
    this.live();
    const input = storableValue(dirty);
    const { release, history, effects, now } = input;
    checkNextVersion(release.id, input.expected_version, release.resource_version);
    try {
      this.statements ??= new CommitStatements(this.sync.raw);
      const st = this.statements;
      return this.sync.immediate((): CommitResult => {
        if (st.updateRelease(release, input.expected_version) === 0) {
          return { ok: false, conflict: "resource_version" };
        }
        const done = input.complete_outbox;
        if (done && st.finishOutbox(done.id, done.claim_token, now) === 0) {
          throw new ClaimLost(); // rolls back the release update too
        }
        st.insertHistory(history);
        st.insertOutbox(release.id, effects, now);
        st.upsertAttempts(input.attempt_results ?? []);
        return { ok: true };
      });
    } catch (err) {
      if (err instanceof ClaimLost) return { ok: false, conflict: "outbox_claim" };
      throw writeFailed(`commit of release ${release.id}`, err);
    }
  }

  protected async applyCompaction(
    releaseId: string,
    plan: CompactionPlan,
    now: number,
  ): Promise<boolean> {
    const db = this.live();
    return this.sync.immediate(() => {
      const claimed = this.sync.run(
        db
          .insertInto("release_retention")
          .values({ release_id: releaseId, compacted_at: now })
          .onConflict((oc) => oc.column("release_id").doNothing()),
      );
      if (claimed.changes === 0) return false;
      for (const ids of chunks(plan.deleteHistoryIds)) {
        this.sync.run(db.deleteFrom("history").where("id", "in", ids));
      }
      for (const ids of chunks(plan.clearDataIds)) {
        this.sync.run(db.updateTable("history").set({ data: "null" }).where("id", "in", ids));
      }
      if (plan.summary)
        this.sync.run(db.insertInto("history").values(historyColumns(plan.summary)));
      for (const ids of chunks(plan.deleteOutboxIds)) {
        this.sync.run(db.deleteFrom("outbox").where("id", "in", ids));
      }
      for (const a of plan.attempts) {
        this.sync.run(
          db
            .updateTable("attempt_results")
            .set({ log: a.log, log_truncated: a.log_truncated ? 1 : 0, raw_callback: "" })
            .where("step_run_id", "=", a.step_run_id)
            .where("attempt", "=", a.attempt),
        );
      }
      // SQLite stores text as is: the manifest (~20 KB of repetitive JSON) and the release
      // document (~14 KB for 32 step runs: the same keys on every step run) are kept deflated.
      // Every value stays; reads inflate them (json-codec.ts). A later commit of the release
      // writes its document as plain JSON again.
      const row = this.sync.all(
        db.selectFrom("manifests").select("manifest").where("release_id", "=", releaseId),
      )[0] as { manifest?: string } | undefined;
      if (row?.manifest && !isDeflated(row.manifest)) {
        this.sync.run(
          db
            .updateTable("manifests")
            .set({ manifest: deflateJson(row.manifest) })
            .where("release_id", "=", releaseId),
        );
      }
      const rel = this.sync.all(
        db.selectFrom("releases").select("doc").where("id", "=", releaseId),
      )[0] as { doc?: string } | undefined;
      if (rel?.doc && !isDeflated(rel.doc)) {
        this.sync.run(
          db
            .updateTable("releases")
            .set({ doc: deflateJson(rel.doc) })
            .where("id", "=", releaseId),
        );
      }
      return true;
    });
  }

  async claimDue(q: {
    now: number;
    limit: number;
    leaseMs: number;
    owner: string;
  }): Promise<OutboxRow[]> {
    const db = this.live();
    const now = Math.floor(q.now); // due_at is whole ms: due_at <= floor(now) <=> due_at <= now
    const due = db
      .selectFrom("outbox")
      .select("id")
      .where("done_at", "is", null)
      .where("due_at", "<=", now)
      .where((eb) => eb.or([eb("claimed_until", "is", null), eb("claimed_until", "<", now)]))
      .orderBy("due_at")
      .orderBy("id")
      .limit(q.limit);
    const claim = db
      .updateTable("outbox")
      .set({
        claim_token: sql<string>`${q.owner} || ':' || lower(hex(randomblob(12)))`,
        claimed_until: Math.ceil(q.now + q.leaseMs),
        claims: sql<number>`claims + 1`,
      })
      .where("id", "in", due)
      .returningAll();
    const rows = this.sync.immediate(() => this.sync.all(claim));
    return rows
      .map((r) => toOutboxRow(r, this.json))
      .sort((a, b) => a.due_at - b.due_at || a.id - b.id);
  }
}

/**
 * Opens (creating if needed) a SQLite database file, or `:memory:` for unit tests, in WAL
 * mode with `synchronous=NORMAL` (a commit survives a process crash; a power cut may lose the
 * last commits but never corrupts the file) and a busy timeout; the file and its companions
 * are 0600 (`privateSqliteFile`). Does not migrate.
 */
export function openSqliteStore(file: string): SqliteStore {
  privateSqliteFile(file);
  const raw = new Database(file);
  raw.pragma("journal_mode = WAL");
  raw.pragma("synchronous = NORMAL");
  raw.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  return new SqliteStore(raw);
}
