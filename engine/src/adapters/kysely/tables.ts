/**
 * Table shapes shared by the SQLite and Postgres adapters (docs/storage.md), as Kysely types.
 * Times are epoch ms (INTEGER / bigint; Postgres int8 is parsed to a JS number by the pool).
 * JSON columns are written as JSON text; SQLite returns text, Postgres jsonb returns a parsed
 * value, so reads go through the dialect's `JsonCodec`.
 */
import type { ColumnType, Generated } from "kysely";

/** A JSON column: written as JSON text, read back as text (SQLite) or parsed (Postgres jsonb). */
export type JsonColumn = ColumnType<unknown, string, string>;

export interface ReleasesTable {
  id: string;
  /** The `<number>` of `r<number>`; null for ids of another shape. */
  number: number | null;
  state: string;
  generation: number;
  resource_version: number;
  manifest_digest: string;
  recipe_name: string;
  model: string;
  high_water_mark: number;
  step_cursor: number;
  step_count: number;
  /**
   * The `Release` without its manifest (step runs, attempts, reason…), rewritten on every
   * commit. The manifest never changes after creation and lives in `manifests` (written once).
   * Rows written before migration 0002 were moved there by that migration.
   */
  doc: JsonColumn;
  created_at: number;
  updated_at: number;
}

/** One row per release, written once by `createRelease`: the release's compiled manifest. */
export interface ManifestsTable {
  release_id: string;
  /** The `Manifest` as JSON (SQLite text, Postgres `json`). */
  manifest: JsonColumn;
}

export interface HistoryTable {
  id: Generated<number>;
  release_id: string;
  at: number;
  kind: string;
  step_run_id: string | null;
  outcome: string;
  message: string;
  data: JsonColumn;
}

export interface OutboxTable {
  id: Generated<number>;
  release_id: string;
  effect: JsonColumn;
  due_at: number;
  claim_token: string | null;
  claimed_until: number | null;
  claims: Generated<number>;
  done_at: number | null;
}

export interface AttemptResultsTable {
  step_run_id: string;
  attempt: number;
  release_id: string;
  received_at: number;
  status: string;
  overall: string;
  /** `checks.json` as JSON text, never re-encoded by the database (text, not jsonb). */
  checks: string;
  log: string;
  /** SQLite stores 0/1, Postgres boolean. */
  log_truncated: ColumnType<number | boolean, number | boolean, number | boolean>;
  raw_callback: string;
  preflight: JsonColumn;
}

/**
 * Per model, the newest signed manifest admitted (docs/trust.md, manifest_freshness): raised
 * with the release's creation, never lowered (a rollback does not lower it).
 */
export interface AdmissionMarksTable {
  model: string;
  /** Signed issue time of the manifest, epoch ms. */
  issued_at: number;
  manifest_digest: string;
  release_id: string;
}

/**
 * Per model, the newest commit the recipe workflow acted on and the release that stands for it
 * (docs/lifecycle.md "Merge order is release order"): moved only by a conditional upsert that
 * names the commit it expects (`setSourceMark`).
 */
export interface SourceMarksTable {
  model: string;
  source_commit: string;
  /** The commit's committer time, epoch ms. */
  committed_at: number;
  release_id: string;
  /** When the mark was set, epoch ms. */
  at: number;
}

/** SQLite only (Postgres uses a SEQUENCE): one row per counter. */
/** One gate evaluation (docs/gate.md); `doc` is the whole `GateEvidence` record. */
export interface GateEvidenceTable {
  release_id: string;
  generation: number;
  wave: number;
  seq: number;
  manifest_digest: string;
  at: number;
  decision: string;
  doc: JsonColumn;
}

export interface ReleaseSequenceTable {
  name: string;
  value: number;
}

export interface BatonDatabase {
  releases: ReleasesTable;
  manifests: ManifestsTable;
  history: HistoryTable;
  outbox: OutboxTable;
  attempt_results: AttemptResultsTable;
  release_sequence: ReleaseSequenceTable;
  release_retention: ReleaseRetentionTable;
  admission_marks: AdmissionMarksTable;
  source_marks: SourceMarksTable;
  gate_evidence: GateEvidenceTable;
  lane_claims: LaneClaimsTable;
  runner_token_ids: RunnerTokenIdsTable;
  runner_runs: RunnerRunsTable;
  leases: LeasesTable;
  engine_state: EngineStateTable;
}

/**
 * Named engine state kept across events (`Store.putState`): `value` is JSON text, `at` when it
 * was written (epoch ms).
 */
export interface EngineStateTable {
  name: string;
  value: string;
  at: number;
}

/**
 * Named leases shared by the engines of one database (`Store.takeLease`): a periodic job that
 * should run on one engine at a time (drift observation) runs where `owner` holds `name` until
 * `until` (epoch ms).
 */
export interface LeasesTable {
  name: string;
  owner: string;
  until: number;
}

/** Token ids (jti) of OIDC runner credentials already used, kept until `expires_at` (epoch ms). */
export interface RunnerTokenIdsTable {
  jti: string;
  expires_at: number;
}

/** A workflow run (`repository#run_id`) and the step run it is bound to (its first preflight). */
export interface RunnerRunsTable {
  run: string;
  step_run_id: string;
  bound_at: number;
}

/**
 * One row per lane id: the release that owns the lane (docs/guarantees.md G9). Written with the
 * release; a claim whose release is terminal is taken over by the next release of the lane.
 */
export interface LaneClaimsTable {
  lane_id: string;
  release_id: string;
  claimed_at: number;
}

/** Finished releases already compacted by the retention policy (`Store.compactFinished`). */
export interface ReleaseRetentionTable {
  release_id: string;
  compacted_at: number;
}

/** How a dialect hands back JSON columns. */
export interface JsonCodec {
  read(value: unknown): unknown;
}

/** SQLite: JSON columns come back as text. */
export const textJson: JsonCodec = { read: (v) => JSON.parse(v as string) };
/** Postgres jsonb: the driver already parsed it. */
export const parsedJson: JsonCodec = { read: (v) => v };
