/**
 * Store port (docs/storage.md). One interface; adapters for SQLite (embedded default) and
 * Postgres live in `adapters/sqlite` and `adapters/postgres`, both on Kysely, and one
 * contract suite (`test/contract/store.contract.ts`) runs against both.
 *
 * Every state change is one call to `commit`: a conditional update of the release row on
 * `resource_version`, plus history rows, outbox rows, attempt results and the completion of
 * the outbox row whose outcome caused it — all in one transaction.
 */

import type { GateEvidence } from "../domain/gate/evidence.ts";
import type { SourceMark } from "../domain/source-order.ts";
import type { ReleaseState } from "../domain/states.ts";
import type { HistoryEntry, Json, OutboxEffect, Release } from "../domain/types.ts";

/** A pending effect in the outbox. */
export interface OutboxRow {
  id: number;
  release_id: string;
  effect: OutboxEffect;
  /** Epoch ms when the effect becomes due. */
  due_at: number;
  /** Set while claimed: who holds the lease and until when (epoch ms). */
  claim_token: string | null;
  claimed_until: number | null;
  /** How many times this row was claimed (performed or attempted). */
  claims: number;
}

/** Everything a runner reported for one attempt (callback stored verbatim). */
export interface AttemptResult {
  step_run_id: string;
  attempt: number;
  release_id: string;
  received_at: number;
  status: string;
  overall: string;
  /** `checks.json` exactly as received (any JSON). */
  checks: Json;
  log: string;
  log_truncated: boolean;
  /** The raw callback body as received (UTF-8 text). */
  raw_callback: string;
  /** The preflight request that opened this attempt, for the record. */
  preflight: Json;
}

export interface CommitInput {
  /** The new release state; its `resource_version` must be `expected_version + 1`. */
  release: Release;
  expected_version: number;
  history: HistoryEntry[];
  effects: OutboxEffect[];
  /** Epoch ms used for `due_at` of effects with no time of their own. */
  now: number;
  attempt_results?: AttemptResult[];
  /** Mark this outbox row done in the same transaction (only if still held by `claim_token`). */
  complete_outbox?: { id: number; claim_token: string };
}

export type CommitResult =
  | { ok: true }
  /** Another writer changed the release first, or the outbox claim was lost: reload and retry. */
  | { ok: false; conflict: "resource_version" | "outbox_claim" };

export interface ReleaseSummary {
  id: string;
  state: ReleaseState;
  recipe_name: string;
  model: string;
  high_water_mark: number;
  cursor: number;
  step_count: number;
  created_at: number;
  updated_at: number;
}

/** A cheap fingerprint of a release: it changes whenever the release or its history does. */
export interface ReleaseMark {
  state: ReleaseState;
  resource_version: number;
  history_count: number;
}

/**
 * Per model, the newest signed manifest admitted: the high-water mark of the freeze /
 * rollback check (docs/trust.md). Times are epoch ms.
 */
export interface AdmissionMark {
  model: string;
  issued_at: number;
  manifest_digest: string;
  release_id: string;
}

/** What `createRelease` writes besides the release, in the same transaction. */
export interface CreateExtras {
  /** Raise the model's admission mark (never lowers it). */
  admissionMark?: AdmissionMark;
  /**
   * Lane ids the release claims (docs/guarantees.md G9): one owner per lane id across every
   * engine sharing the database. A lane whose claim is held by a release not yet terminal makes
   * `createRelease` write nothing and throw `LanesClaimed`; a claim held by a terminal release is
   * taken over.
   */
  claimLanes?: readonly string[];
  /**
   * Set the model's source mark to `mark` (docs/lifecycle.md "Merge order is release order"),
   * only if the model's mark is still at commit `expect` (null: the model has none). When it
   * moved, `createRelease` writes nothing and throws `SourceMarkMoved`.
   */
  sourceMark?: { mark: SourceMark; expect: string | null };
}

/**
 * Thrown by `createRelease` when the model's source mark is no longer at the commit the start
 * was judged against (another start of the model moved it); nothing was written.
 */
export class SourceMarkMoved extends Error {
  constructor(
    readonly model: string,
    readonly expected: string | null,
  ) {
    super(
      `[store] the source mark of model ${model} is no longer at ${expected ?? "no commit"}; nothing was written`,
    );
    this.name = "SourceMarkMoved";
  }
}

/** A lane claim: the lane id and the release that owns it. */
export interface LaneClaim {
  lane_id: string;
  release_id: string;
}

/**
 * Thrown by `createRelease` when another release not yet terminal owns some of the lanes; the
 * transaction was rolled back (nothing written). `owners` lists each such lane and its owner.
 */
export class LanesClaimed extends Error {
  constructor(
    readonly releaseId: string,
    readonly owners: LaneClaim[],
  ) {
    super(
      `[store] release ${releaseId} was not created: lanes ${owners
        .map((o) => `${o.lane_id} (owned by ${o.release_id})`)
        .join(", ")} are claimed by releases in flight; nothing was written`,
    );
    this.name = "LanesClaimed";
  }
}

export interface Store {
  /** Creates tables if needed. Idempotent. */
  migrate(): Promise<void>;
  /** Reserves the next release number (unique across engines sharing the database). */
  nextReleaseNumber(): Promise<number>;
  /** Inserts a new release (resource_version 1) with its first history and effects. */
  createRelease(
    release: Release,
    history: HistoryEntry[],
    effects: OutboxEffect[],
    now: number,
    extras?: CreateExtras,
  ): Promise<void>;
  /** The model's admission mark, or null before its first signed manifest. */
  getAdmissionMark(model: string): Promise<AdmissionMark | null>;
  /** The model's source mark, or null before the recipe workflow first acted on the model. */
  getSourceMark(model: string): Promise<SourceMark | null>;
  /**
   * Sets the model's source mark to `mark` without a release (the recipe workflow found a true
   * repeat), only if the mark is still at commit `expect` (null: none yet). One conditional
   * upsert: of several callers expecting the same commit exactly one wins. False, changing
   * nothing, when the mark moved.
   */
  raiseSourceMark(mark: SourceMark, expect: string | null): Promise<boolean>;
  /** Claim rows of `laneIds` (any order; absent lanes are not listed), sorted by lane id. */
  laneClaims(laneIds: readonly string[]): Promise<LaneClaim[]>;
  getRelease(id: string): Promise<Release | null>;
  /**
   * The release if its stored `resource_version` is not `version`, `"unchanged"` if it is,
   * null when there is no such release: one indexed read that carries the document only when
   * a copy held at `version` is stale (another engine process wrote since).
   */
  getReleaseIfChanged(id: string, version: number): Promise<Release | "unchanged" | null>;
  /**
   * Stores one gate evaluation (docs/gate.md). Idempotent on (release_id, generation, wave,
   * seq): the first write stands; a repeat returns false and changes nothing.
   */
  appendEvidence(evidence: GateEvidence): Promise<boolean>;
  /** A release's evidence ordered by generation, wave, seq. */
  listEvidence(releaseId: string): Promise<GateEvidence[]>;
  /** Applies one transition atomically; see `CommitInput`. */
  commit(input: CommitInput): Promise<CommitResult>;
  /** Appends history without touching the release (refused events). */
  appendHistory(entries: HistoryEntry[]): Promise<void>;
  /**
   * Appends history and outbox effects of `releaseId` in one transaction, without touching the
   * release (drift entries and their notices: both are written, or neither).
   */
  appendHistoryWithEffects(
    releaseId: string,
    entries: HistoryEntry[],
    effects: OutboxEffect[],
    now: number,
  ): Promise<void>;
  /** Newest first. `before` is a cursor: created_at of the last row seen. */
  listReleases(q: {
    state?: ReleaseState;
    limit: number;
    before?: number;
  }): Promise<ReleaseSummary[]>;
  /**
   * How many releases the store holds in each state (states with none are absent), in one
   * grouped query: the `baton_releases` gauge of `GET /metrics`.
   */
  countReleases(): Promise<Partial<Record<ReleaseState, number>>>;
  /**
   * What the live dashboard polls: the release's state, `resource_version` and number of
   * history rows, in one indexed query (no document read). Null when the release is unknown.
   */
  releaseMark(id: string): Promise<ReleaseMark | null>;
  /** Oldest first. */
  getHistory(releaseId: string, q?: { limit?: number; offset?: number }): Promise<HistoryEntry[]>;
  getAttemptResult(stepRunId: string, attempt: number): Promise<AttemptResult | null>;
  listAttemptResults(releaseId: string): Promise<AttemptResult[]>;
  /**
   * Claims up to `limit` due, unclaimed (or lease-expired) outbox rows for `leaseMs`
   * (Postgres: `FOR UPDATE SKIP LOCKED`). Each claimed row gets a fresh `claim_token`.
   */
  claimDue(q: { now: number; limit: number; leaseMs: number; owner: string }): Promise<OutboxRow[]>;
  /** Gives a claimed row back, due again at `due_at` (e.g. backoff after a failed try). */
  releaseClaim(id: number, claimToken: string, dueAt: number): Promise<boolean>;
  /**
   * Renews a claim still held by `claimToken` (row not done, not claimed by another since):
   * its lease now ends at `claimedUntil` (epoch ms, rounded up). False when the claim is lost.
   * The reconciler renews the rows it is still performing, so a slow effect is not taken over
   * and performed a second time while its holder is alive.
   */
  extendClaim(id: number, claimToken: string, claimedUntil: number): Promise<boolean>;
  /** Marks a claimed row done without a release change (its effect needs no outcome). */
  completeOutbox(id: number, claimToken: string): Promise<boolean>;
  /** Pending (not done) outbox rows of a release, for diagnostics and tests. */
  pendingOutbox(releaseId?: string): Promise<OutboxRow[]>;
  /**
   * Retention: compacts up to `limit` finished (terminal) releases last updated before `before`
   * (epoch ms) that were not compacted yet. Keeps the release document, the manifest, every
   * accepted history entry and each attempt's status, checks and log tail (`logTailChars`);
   * removes refused history entries (one summary entry counts them), outbox rows that are done
   * or deadlines, and raw callback bodies. Never touches a non-terminal release.
   */
  compactFinished(q: {
    before: number;
    now: number;
    limit: number;
    logTailChars: number;
  }): Promise<{
    releases: number;
    history_rows_removed: number;
    outbox_rows_removed: number;
    attempt_results_shortened: number;
  }>;
  /**
   * Cheap liveness check of the database (`select 1`). With `write: true` it also proves a
   * write: one row of `health_probe` is upserted with the current time (epoch ms) and
   * committed, so a full disk, a read-only database or a failed-over replica fails it.
   * Throws when unreachable or (with `write`) when the write is refused.
   */
  ping(o?: { write?: boolean }): Promise<void>;
  /**
   * Records the id (`jti`) of a runner's OIDC token, kept until `expiresAt` (epoch ms; ids
   * expired before `now` are dropped first). Returns false, changing nothing, when the id was
   * recorded already: a replay.
   */
  useTokenId(q: { jti: string; expiresAt: number; now: number }): Promise<boolean>;
  /**
   * Binds workflow run `run` (`repository#run_id`) to `stepRunId` unless it is bound already;
   * returns the step run the run is bound to (the first binding stands, across engines).
   */
  bindRun(q: { run: string; stepRunId: string; now: number }): Promise<string>;
  /** The step run `run` is bound to, or null. */
  boundStepRun(run: string): Promise<string | null>;
  /**
   * Takes or renews lease `name` for `owner` until `until` (epoch ms): true when `owner` holds
   * it now (it was free, had expired before `now`, or `owner` held it already), false when
   * another owner holds it past `now` (nothing changes then). One atomic upsert, so of several
   * engines asking at once exactly one gets a free lease. A periodic job that should run on
   * one engine of several (drift observation) asks before each run.
   */
  takeLease(q: { name: string; owner: string; until: number; now: number }): Promise<boolean>;
  /**
   * Writes engine state `name` (any JSON value), replacing what it held; `now` (epoch ms) is
   * kept as its time. For what an engine that lives for one event (serverless) must find again
   * at the next one: the last drift observation and its counters.
   */
  putState(q: { name: string; value: Json; now: number }): Promise<void>;
  /** Engine state `name` as last written, with its time (epoch ms); null when never written. */
  getState(name: string): Promise<{ value: Json; at: number } | null>;
  /**
   * Compare-and-set of engine state `name`: writes `value` only if the state's time is still
   * `expect` (null: only if it was never written). The new time is `max(now, expect + 1)`, so
   * every write moves it. Returns the new time, or null (nothing changed) when another write
   * came first: read again and retry. For documents several engines may change (incidents).
   */
  swapState(q: {
    name: string;
    value: Json;
    now: number;
    expect: number | null;
  }): Promise<number | null>;
  close(): Promise<void>;
}
