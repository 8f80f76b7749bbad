/**
 * The part of the store that is the same SQL on both dialects: reads, and single-row outbox
 * updates. Each adapter adds `migrate`, `nextReleaseNumber`, `createRelease`, `commit` and
 * `claimDue`, which differ in locking and round trips.
 */
import type { Kysely } from "kysely";
import { sql } from "kysely";
import type { GateEvidence } from "../../domain/gate/evidence.ts";
import type { SourceMark } from "../../domain/source-order.ts";
import { type ReleaseState, TERMINAL_RELEASE_STATES } from "../../domain/states.ts";
import { storableValue } from "../../domain/storable-text.ts";
import type { HistoryEntry, Json, Manifest, OutboxEffect, Release } from "../../domain/types.ts";
import type {
  AdmissionMark,
  AttemptResult,
  CommitInput,
  CommitResult,
  LaneClaim,
  OutboxRow,
  ReleaseMark,
  ReleaseSummary,
  Store,
} from "../../ports/store.ts";
import { resultPassed } from "../../protocol/messages.ts";
import { closedError } from "./errors.ts";
import { ManifestCache } from "./manifest-cache.ts";
import { type CompactionPlan, type CompactionResult, compactionPlan } from "./retention.ts";
import {
  historyColumns,
  toAttemptResult,
  toHistoryEntry,
  toOutboxRow,
  toRelease,
  toSummary,
} from "./rows.ts";
import type { BatonDatabase, JsonCodec } from "./tables.ts";
import { finishOutbox, selectLaneClaims, setSourceMark } from "./writes.ts";

export abstract class KyselyStore implements Store {
  protected closed = false;
  /** Manifests written or read by this store (they never change after creation). */
  protected readonly manifests = new ManifestCache();

  constructor(
    protected readonly db: Kysely<BatonDatabase>,
    protected readonly json: JsonCodec,
  ) {}

  abstract migrate(): Promise<void>;
  abstract nextReleaseNumber(): Promise<number>;
  abstract createRelease(
    release: Release,
    history: HistoryEntry[],
    effects: OutboxEffect[],
    now: number,
  ): Promise<void>;
  abstract commit(input: CommitInput): Promise<CommitResult>;
  abstract appendHistoryWithEffects(
    releaseId: string,
    entries: HistoryEntry[],
    effects: OutboxEffect[],
    now: number,
  ): Promise<void>;
  abstract claimDue(q: {
    now: number;
    limit: number;
    leaseMs: number;
    owner: string;
  }): Promise<OutboxRow[]>;

  /**
   * Writes one release's `release_retention` row and its compaction plan in one transaction
   * (each dialect has its own way to run one). Returns false, writing nothing, when the row
   * exists already (another engine compacted the release meanwhile).
   */
  protected abstract applyCompaction(
    releaseId: string,
    plan: CompactionPlan,
    now: number,
  ): Promise<boolean>;

  /**
   * Retention (docs/engine.md "Retention"): compacts up to `limit` finished releases (terminal
   * state) last updated before `before` (epoch ms) and not compacted yet, oldest first; see
   * `kysely/retention.ts` for what is removed and what is kept. Each release is one transaction;
   * a non-terminal release is never touched. Logs keep their last `logTailChars` characters.
   */
  async compactFinished(q: {
    before: number;
    now: number;
    limit: number;
    logTailChars: number;
  }): Promise<CompactionResult> {
    const db = this.live();
    const candidates = await db
      .selectFrom("releases")
      .select("id")
      .where("state", "in", [...TERMINAL_RELEASE_STATES])
      .where("updated_at", "<", q.before)
      .where("id", "not in", db.selectFrom("release_retention").select("release_id"))
      .orderBy("updated_at")
      .orderBy("id")
      .limit(q.limit)
      .execute();
    const out: CompactionResult = {
      releases: 0,
      history_rows_removed: 0,
      outbox_rows_removed: 0,
      attempt_results_shortened: 0,
    };
    for (const { id } of candidates) {
      const [history, outbox, attempts] = await Promise.all([
        db
          .selectFrom("history")
          .select(["id", "kind", "outcome", "data"])
          .where("release_id", "=", id)
          .execute(),
        db
          .selectFrom("outbox")
          .select(["id", "done_at", "effect"])
          .where("release_id", "=", id)
          .execute(),
        db
          .selectFrom("attempt_results")
          .select([
            "step_run_id",
            "attempt",
            "status",
            "overall",
            "checks",
            "log",
            "log_truncated",
            "raw_callback",
          ])
          .where("release_id", "=", id)
          .execute(),
      ]);
      const plan = compactionPlan({
        release_id: id,
        history: history.map((h) => ({
          id: Number(h.id),
          kind: h.kind,
          outcome: h.outcome,
          has_data: this.json.read(h.data) !== null,
        })),
        outbox: outbox.map((o) => ({
          id: Number(o.id),
          done: o.done_at !== null,
          type: String((this.json.read(o.effect) as { type?: unknown } | null)?.type ?? ""),
        })),
        attempts: attempts.map((a) => ({
          step_run_id: a.step_run_id,
          attempt: a.attempt,
          log: a.log,
          log_truncated: Boolean(a.log_truncated),
          raw_len: a.raw_callback.length,
          passed: resultPassed(a.status, a.overall, JSON.parse(a.checks)),
        })),
        logTailChars: q.logTailChars,
        now: q.now,
      });
      if (!(await this.applyCompaction(id, plan, q.now))) continue;
      out.releases += 1;
      out.history_rows_removed += plan.deleteHistoryIds.length;
      out.outbox_rows_removed += plan.deleteOutboxIds.length;
      out.attempt_results_shortened += plan.attempts.length;
    }
    return out;
  }

  protected live(): Kysely<BatonDatabase> {
    if (this.closed) throw closedError();
    return this.db;
  }

  /** The release with its manifest: the doc alone when the manifest is cached, else joined. */
  async getRelease(id: string): Promise<Release | null> {
    const cached = this.manifests.get(id);
    if (cached) {
      const row = await this.live()
        .selectFrom("releases")
        .select("doc")
        .where("id", "=", id)
        .executeTakeFirst();
      return row ? toRelease(this.json.read(row.doc) as Release, cached) : null;
    }
    const row = await this.live()
      .selectFrom("releases")
      .leftJoin("manifests", "manifests.release_id", "releases.id")
      .select(["releases.doc", "manifests.manifest"])
      .where("releases.id", "=", id)
      .executeTakeFirst();
    if (!row) return null;
    const manifest = row.manifest == null ? null : (this.json.read(row.manifest) as Manifest);
    const release = toRelease(this.json.read(row.doc) as Release, manifest);
    this.manifests.set(id, release.manifest);
    return release;
  }

  async getReleaseIfChanged(id: string, version: number): Promise<Release | "unchanged" | null> {
    const cached = this.manifests.get(id);
    if (!cached) {
      const r = await this.getRelease(id);
      return r && r.resource_version === version ? "unchanged" : r;
    }
    const row = await this.live()
      .selectFrom("releases")
      .select([
        "resource_version",
        sql<unknown>`CASE WHEN resource_version = ${version} THEN NULL ELSE doc END`.as("doc"),
      ])
      .where("id", "=", id)
      .executeTakeFirst();
    if (!row) return null;
    if (Number(row.resource_version) === version) return "unchanged";
    return toRelease(this.json.read(row.doc as string) as Release, cached);
  }

  async appendEvidence(e: GateEvidence): Promise<boolean> {
    const r = await this.live()
      .insertInto("gate_evidence")
      .values({
        release_id: e.release_id,
        generation: e.generation,
        wave: e.wave,
        seq: e.seq,
        manifest_digest: e.manifest_digest,
        at: e.at,
        decision: e.decision,
        doc: JSON.stringify(storableValue(e)),
      })
      .onConflict((oc) => oc.columns(["release_id", "generation", "wave", "seq"]).doNothing())
      .executeTakeFirst();
    return Number(r.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  async listEvidence(releaseId: string): Promise<GateEvidence[]> {
    const rows = await this.live()
      .selectFrom("gate_evidence")
      .select("doc")
      .where("release_id", "=", releaseId)
      .orderBy("generation")
      .orderBy("wave")
      .orderBy("seq")
      .execute();
    return rows.map((r) => this.json.read(r.doc) as GateEvidence);
  }

  async laneClaims(laneIds: readonly string[]): Promise<LaneClaim[]> {
    if (laneIds.length === 0) return [];
    const rows = await selectLaneClaims(this.live(), laneIds).execute();
    return rows.map((r) => ({ lane_id: r.lane_id, release_id: r.release_id }));
  }

  async getAdmissionMark(model: string): Promise<AdmissionMark | null> {
    const row = await this.live()
      .selectFrom("admission_marks")
      .selectAll()
      .where("model", "=", model)
      .executeTakeFirst();
    if (!row) return null;
    return {
      model: row.model,
      issued_at: Number(row.issued_at),
      manifest_digest: row.manifest_digest,
      release_id: row.release_id,
    };
  }

  async getSourceMark(model: string): Promise<SourceMark | null> {
    const row = await this.live()
      .selectFrom("source_marks")
      .selectAll()
      .where("model", "=", model)
      .executeTakeFirst();
    if (!row) return null;
    return {
      model: row.model,
      commit: row.source_commit,
      committed_at: Number(row.committed_at),
      release_id: row.release_id,
      at: Number(row.at),
    };
  }

  async raiseSourceMark(mark: SourceMark, expect: string | null): Promise<boolean> {
    const row = await setSourceMark(this.live(), mark, expect).executeTakeFirst();
    return row !== undefined;
  }

  async appendHistory(entries: HistoryEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const rows = storableValue(entries).map(historyColumns);
    await this.live().insertInto("history").values(rows).execute();
  }

  async listReleases(q: {
    state?: ReleaseState;
    limit: number;
    before?: number;
  }): Promise<ReleaseSummary[]> {
    let query = this.live()
      .selectFrom("releases")
      .select([
        "id",
        "state",
        "recipe_name",
        "model",
        "high_water_mark",
        "step_cursor",
        "step_count",
        "created_at",
        "updated_at",
      ])
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .limit(q.limit);
    if (q.state !== undefined) query = query.where("state", "=", q.state);
    if (q.before !== undefined) query = query.where("created_at", "<", q.before);
    return (await query.execute()).map(toSummary);
  }

  async countReleases(): Promise<Partial<Record<ReleaseState, number>>> {
    const rows = await this.live()
      .selectFrom("releases")
      .select((eb) => ["state", eb.fn.countAll<number>().as("n")])
      .groupBy("state")
      .execute();
    const out: Partial<Record<ReleaseState, number>> = {};
    for (const r of rows) out[r.state as ReleaseState] = Number(r.n);
    return out;
  }

  async releaseMark(id: string): Promise<ReleaseMark | null> {
    const row = await this.live()
      .selectFrom("releases")
      .select((eb) => [
        "state",
        "resource_version",
        eb
          .selectFrom("history")
          .select((h) => h.fn.countAll<number>().as("n"))
          .where("history.release_id", "=", id)
          .as("history_count"),
      ])
      .where("id", "=", id)
      .executeTakeFirst();
    if (!row) return null;
    return {
      state: row.state as ReleaseState,
      resource_version: Number(row.resource_version),
      history_count: Number(row.history_count),
    };
  }

  async getHistory(
    releaseId: string,
    q: { limit?: number; offset?: number } = {},
  ): Promise<HistoryEntry[]> {
    let query = this.live()
      .selectFrom("history")
      .selectAll()
      .where("release_id", "=", releaseId)
      .orderBy("id", "asc");
    // SQLite accepts OFFSET only after a LIMIT, so an offset alone gets a limit that never binds.
    if (q.limit !== undefined || q.offset !== undefined) {
      query = query.limit(q.limit ?? Number.MAX_SAFE_INTEGER).offset(q.offset ?? 0);
    }
    return (await query.execute()).map((r) => toHistoryEntry(r, this.json));
  }

  async getAttemptResult(stepRunId: string, attempt: number): Promise<AttemptResult | null> {
    const row = await this.live()
      .selectFrom("attempt_results")
      .selectAll()
      .where("step_run_id", "=", stepRunId)
      .where("attempt", "=", attempt)
      .executeTakeFirst();
    return row ? toAttemptResult(row, this.json) : null;
  }

  async listAttemptResults(releaseId: string): Promise<AttemptResult[]> {
    const rows = await this.live()
      .selectFrom("attempt_results")
      .selectAll()
      .where("release_id", "=", releaseId)
      .orderBy("received_at")
      .orderBy("step_run_id")
      .orderBy("attempt")
      .execute();
    return rows.map((r) => toAttemptResult(r, this.json));
  }

  async releaseClaim(id: number, claimToken: string, dueAt: number): Promise<boolean> {
    const res = await this.live()
      .updateTable("outbox")
      .set({ claim_token: null, claimed_until: null, due_at: Math.ceil(dueAt) })
      .where("id", "=", id)
      .where("claim_token", "=", claimToken)
      .where("done_at", "is", null)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }

  async extendClaim(id: number, claimToken: string, claimedUntil: number): Promise<boolean> {
    const res = await this.live()
      .updateTable("outbox")
      .set({ claimed_until: Math.ceil(claimedUntil) })
      .where("id", "=", id)
      .where("claim_token", "=", claimToken)
      .where("done_at", "is", null)
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }

  async completeOutbox(id: number, claimToken: string): Promise<boolean> {
    const res = await finishOutbox(this.live(), id, claimToken, Date.now()).executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }

  async pendingOutbox(releaseId?: string): Promise<OutboxRow[]> {
    let query = this.live()
      .selectFrom("outbox")
      .selectAll()
      .where("done_at", "is", null)
      .orderBy("due_at")
      .orderBy("id");
    if (releaseId !== undefined) query = query.where("release_id", "=", releaseId);
    return (await query.execute()).map((r) => toOutboxRow(r, this.json));
  }

  async ping(o: { write?: boolean } = {}): Promise<void> {
    if (!o.write) {
      await sql`select 1`.execute(this.live());
      return;
    }
    // A real, committed write (the same SQL on both dialects): a no-op write would pass on a
    // full disk.
    await sql`insert into health_probe (id, at) values ('probe', ${Date.now()})
      on conflict (id) do update set at = excluded.at`.execute(this.live());
  }

  async useTokenId(q: { jti: string; expiresAt: number; now: number }): Promise<boolean> {
    const db = this.live();
    await db.deleteFrom("runner_token_ids").where("expires_at", "<", q.now).execute();
    const res = await db
      .insertInto("runner_token_ids")
      .values({ jti: q.jti, expires_at: q.expiresAt })
      .onConflict((oc) => oc.column("jti").doNothing())
      .executeTakeFirst();
    return (res.numInsertedOrUpdatedRows ?? 0n) > 0n;
  }

  async bindRun(q: { run: string; stepRunId: string; now: number }): Promise<string> {
    const db = this.live();
    await db
      .insertInto("runner_runs")
      .values({ run: q.run, step_run_id: q.stepRunId, bound_at: q.now })
      .onConflict((oc) => oc.column("run").doNothing())
      .execute();
    return (await this.boundStepRun(q.run)) ?? q.stepRunId;
  }

  async boundStepRun(run: string): Promise<string | null> {
    const row = await this.live()
      .selectFrom("runner_runs")
      .select("step_run_id")
      .where("run", "=", run)
      .executeTakeFirst();
    return row?.step_run_id ?? null;
  }

  async takeLease(q: {
    name: string;
    owner: string;
    until: number;
    now: number;
  }): Promise<boolean> {
    const row = await this.live()
      .insertInto("leases")
      .values({ name: q.name, owner: q.owner, until: q.until })
      .onConflict((oc) =>
        oc
          .column("name")
          .doUpdateSet({
            owner: (eb) => eb.ref("excluded.owner"),
            until: (eb) => eb.ref("excluded.until"),
          })
          .where((eb) => eb.or([eb("leases.owner", "=", q.owner), eb("leases.until", "<", q.now)])),
      )
      .returning("owner")
      .executeTakeFirst();
    return row?.owner === q.owner;
  }

  async putState(q: { name: string; value: Json; now: number }): Promise<void> {
    const value = JSON.stringify(q.value);
    await this.live()
      .insertInto("engine_state")
      .values({ name: q.name, value, at: q.now })
      .onConflict((oc) => oc.column("name").doUpdateSet({ value, at: q.now }))
      .execute();
  }

  async getState(name: string): Promise<{ value: Json; at: number } | null> {
    const row = await this.live()
      .selectFrom("engine_state")
      .select(["value", "at"])
      .where("name", "=", name)
      .executeTakeFirst();
    return row ? { value: JSON.parse(row.value) as Json, at: Number(row.at) } : null;
  }

  async swapState(q: {
    name: string;
    value: Json;
    now: number;
    expect: number | null;
  }): Promise<number | null> {
    const value = JSON.stringify(q.value);
    const at = q.expect === null ? q.now : Math.max(q.now, q.expect + 1);
    if (q.expect === null) {
      const r = await this.live()
        .insertInto("engine_state")
        .values({ name: q.name, value, at })
        .onConflict((oc) => oc.column("name").doNothing())
        .executeTakeFirst();
      return Number(r.numInsertedOrUpdatedRows ?? 0n) > 0 ? at : null;
    }
    const r = await this.live()
      .updateTable("engine_state")
      .set({ value, at })
      .where("name", "=", q.name)
      .where("at", "=", q.expect)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0 ? at : null;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.manifests.clear();
    await this.db.destroy();
  }
}
