/**
 * Store on Postgres (docs/storage.md, production): many engine processes may share the database.
 * `commit` and `claimDue` are single statements (see `commit-statement.ts`,
 * `claim-statement.ts`); `createRelease` is a short Kysely transaction that also writes the
 * release's manifest to `manifests`, once (commits never send it again).
 */
import { Kysely, PostgresDialect, type RawBuilder, sql } from "kysely";
import type pg from "pg";
import { storableValue } from "../../domain/storable-text.ts";
import type { HistoryEntry, OutboxEffect, Release } from "../../domain/types.ts";
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
import { storableCommit } from "../kysely/storable-commit.ts";
import { type BatonDatabase, parsedJson } from "../kysely/tables.ts";
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
import { claimStatement } from "./claim-statement.ts";
import { type CommitOutcome, commitQuery } from "./commit-statement.ts";
import { postgresMigrations } from "./migrations.ts";
import { createPool, type PoolOptions } from "./pool.ts";

export class PostgresStore extends KyselyStore {
  /**
   * The store's own connection pool. Exposed for the engine benchmark, which times a raw
   * conditional UPDATE on the same connections the store commits on; not for writing data.
   */
  readonly pool: pg.Pool;

  constructor(private readonly opts: PoolOptions) {
    const pool = createPool(opts);
    super(new Kysely<BatonDatabase>({ dialect: new PostgresDialect({ pool }) }), parsedJson);
    this.pool = pool;
  }

  /**
   * Runs a Kysely-built statement as a named prepared statement (the claim), so Postgres
   * parses and plans it once per connection. The commit has its own fixed texts
   * (`commitQuery`), so it skips the query builder too.
   */
  private async prepared<R>(name: string, query: RawBuilder<R>): Promise<R[]> {
    const c = query.compile(this.live());
    const res = await this.pool.query({ name, text: c.sql, values: c.parameters as unknown[] });
    return res.rows as R[];
  }

  async migrate(): Promise<void> {
    const db = this.live();
    let current = "(setup)";
    try {
      if (await this.migrated()) return;
      await db.transaction().execute(async (tx) => {
        // Engines starting together wait here instead of racing (one lock for the database:
        // migrations are rare and short).
        await sql`SELECT pg_advisory_xact_lock(hashtext('baton_migration'))`.execute(tx);
        if (this.opts.schema) {
          await sql.raw(`CREATE SCHEMA IF NOT EXISTS ${this.opts.schema}`).execute(tx);
        }
        await sql.raw(CREATE_MIGRATION_TABLE).execute(tx);
        const { rows } = await sql<{ name: string }>`SELECT name FROM baton_migration`.execute(tx);
        for (const [name, statements] of pending(
          postgresMigrations,
          rows.map((r) => r.name),
        )) {
          current = name;
          for (const s of statements) await sql.raw(s).execute(tx);
          await sql`INSERT INTO baton_migration VALUES (${name}, ${Date.now()})`.execute(tx);
        }
      });
    } catch (err) {
      if (current === "(setup)" && isConnectError(err)) {
        throw new Error(
          `[store] cannot open Postgres at ${where(this.opts.connectionString)} (DATABASE_URL): ${(err as Error).message}; fix: start Postgres there, or correct DATABASE_URL (user, password, host, port, database)`,
          { cause: err },
        );
      }
      throw migrationFailed(current, err);
    }
  }

  /**
   * One read, no transaction or lock: true when every migration is applied already (the usual
   * case for each new serverless isolate's first event, whose round trips it saves). Migrations
   * are only ever added, so a set found complete stays complete. False when there is no
   * migration table yet (`migrate` then takes the locked path, which creates it); any other error
   * (database down) is thrown, so a dead database fails once, within one timeout, not twice.
   */
  private async migrated(): Promise<boolean> {
    try {
      const { rows } = await sql<{ name: string }>`SELECT name FROM baton_migration`.execute(
        this.live(),
      );
      return (
        pending(
          postgresMigrations,
          rows.map((r) => r.name),
        ).length === 0
      );
    } catch (err) {
      // undefined_table (none on the search path), invalid_schema_name
      const code = (err as { code?: unknown }).code;
      if (code === "42P01" || code === "3F000") return false;
      throw err;
    }
  }

  async nextReleaseNumber(): Promise<number> {
    const { rows } = await sql<{ n: number }>`SELECT nextval('release_number') AS n`.execute(
      this.live(),
    );
    return Number(rows[0]?.n);
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
    const lanes = extras.claimLanes ?? [];
    try {
      await this.live()
        .transaction()
        .execute(async (tx) => {
          // Claims first: a start that loses a lane waits on the winner's row lock here, before
          // it has written anything else, and then rolls back.
          if (lanes.length > 0) {
            const got = new Set(
              (await claimLanes(tx, release.id, lanes, now).execute()).map((r) => r.lane_id),
            );
            const missing = lanes.filter((l) => !got.has(l));
            if (missing.length > 0) {
              // Read committed: this statement sees the winner's committed claim rows.
              throw new LanesClaimed(release.id, await selectLaneClaims(tx, missing).execute());
            }
          }
          await insertRelease(tx, release).execute();
          await insertManifest(tx, release).execute();
          if (history.length > 0) await insertHistory(tx, history).execute();
          if (effects.length > 0) await insertOutbox(tx, release.id, effects, now).execute();
          if (extras.admissionMark) await raiseAdmissionMark(tx, extras.admissionMark).execute();
          const source = extras.sourceMark;
          if (source && !(await setSourceMark(tx, source.mark, source.expect).executeTakeFirst())) {
            throw new SourceMarkMoved(source.mark.model, source.expect); // rolls back the creation
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
    await this.live()
      .transaction()
      .execute(async (tx) => {
        if (history.length > 0) await insertHistory(tx, history).execute();
        if (effects.length > 0) await insertOutbox(tx, releaseId, effects, now).execute();
      });
  }

  async commit(dirty: CommitInput): Promise<CommitResult> {
    this.live();
    const input = storableCommit(dirty);
    checkNextVersion(input.release.id, input.expected_version, input.release.resource_version);
    let outcome: CommitOutcome | undefined;
    try {
      const res = await this.pool.query<CommitOutcome>(commitQuery(input));
      outcome = res.rows[0];
    } catch (err) {
      throw writeFailed(`commit of release ${input.release.id}`, err);
    }
    if (outcome?.updated === 1) return { ok: true };
    if (input.complete_outbox && outcome?.claim_held !== 1) {
      return { ok: false, conflict: "outbox_claim" };
    }
    return { ok: false, conflict: "resource_version" };
  }

  protected async applyCompaction(
    releaseId: string,
    plan: CompactionPlan,
    now: number,
  ): Promise<boolean> {
    // Postgres compresses large values itself (TOAST), so the manifest stays as it is.
    return this.live()
      .transaction()
      .execute(async (tx) => {
        // A concurrent compaction of the same release waits here, then finds the row taken.
        const claimed = await tx
          .insertInto("release_retention")
          .values({ release_id: releaseId, compacted_at: now })
          .onConflict((oc) => oc.column("release_id").doNothing())
          .returning("release_id")
          .execute();
        if (claimed.length === 0) return false;
        for (const ids of chunks(plan.deleteHistoryIds)) {
          await tx.deleteFrom("history").where("id", "in", ids).execute();
        }
        for (const ids of chunks(plan.clearDataIds)) {
          await tx.updateTable("history").set({ data: "null" }).where("id", "in", ids).execute();
        }
        if (plan.summary)
          await tx.insertInto("history").values(historyColumns(plan.summary)).execute();
        for (const ids of chunks(plan.deleteOutboxIds)) {
          await tx.deleteFrom("outbox").where("id", "in", ids).execute();
        }
        for (const a of plan.attempts) {
          await tx
            .updateTable("attempt_results")
            .set({ log: a.log, log_truncated: a.log_truncated, raw_callback: "" })
            .where("step_run_id", "=", a.step_run_id)
            .where("attempt", "=", a.attempt)
            .execute();
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
    const rows = await this.prepared("baton_claim", claimStatement(q));
    return rows
      .map((r) => toOutboxRow(r, this.json))
      .sort((a, b) => a.due_at - b.due_at || a.id - b.id);
  }
}

/** Network errors and the server's refusals of the login itself (auth, unknown database). */
function isConnectError(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return (
    typeof code === "string" &&
    (/^E(CONNREFUSED|CONNRESET|NOTFOUND|AI_AGAIN|TIMEDOUT|HOSTUNREACH|NETUNREACH)$/.test(code) ||
      code === "28P01" || // invalid_password
      code === "28000" || // invalid_authorization_specification
      code === "3D000") // invalid_catalog_name: no such database
  );
}

/** `host:port/database` of a connection string, without its credentials. */
function where(connectionString: string | undefined): string {
  try {
    const u = new URL(connectionString ?? "");
    return `${u.hostname || "localhost"}:${u.port || "5432"}${u.pathname || "/"}`;
  } catch {
    return "the server DATABASE_URL names";
  }
}

/** Opens a Postgres store (a `pg` Pool; no connection is made until the first query). */
export function openPostgresStore(opts: PoolOptions): PostgresStore {
  return new PostgresStore(opts);
}
