/**
 * SQLite schema. STRICT tables so a wrong type is refused instead of stored; JSON as text;
 * times as INTEGER epoch ms. The release number counter is a one-row table (no sequences).
 * 0002: the manifest (~20 KB, never changed after creation) moves out of `releases.doc` into
 * `manifests`, written once: SQLite rewrites a whole row (overflow pages included) on any
 * update, so keeping it in `releases` would rewrite it on every commit.
 */
import { RELEASE_STATES } from "../../domain/states.ts";
import { checkIn, type SqlMigrations } from "../kysely/migrate.ts";

/**
 * Release states as 0001 wrote them into the CHECK constraint. Frozen: a migration that ran
 * must mean the same thing forever; later states are added by later migrations (0003).
 */
const STATES_0001 = [
  "pending",
  "running",
  "paused",
  "compensating",
  "needs_operator",
  "succeeded",
  "rolled_back",
  "aborted",
] as const;

export const sqliteMigrations: SqlMigrations = {
  "0001_initial": [
    `CREATE TABLE releases (
      id TEXT PRIMARY KEY,
      number INTEGER UNIQUE,
      state TEXT NOT NULL ${checkIn("state", STATES_0001)},
      generation INTEGER NOT NULL,
      resource_version INTEGER NOT NULL,
      manifest_digest TEXT NOT NULL,
      recipe_name TEXT NOT NULL,
      model TEXT NOT NULL,
      high_water_mark INTEGER NOT NULL,
      step_cursor INTEGER NOT NULL,
      step_count INTEGER NOT NULL,
      doc TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    ) STRICT`,
    "CREATE INDEX releases_state_created ON releases (state, created_at)",
    "CREATE INDEX releases_created ON releases (created_at)",
    `CREATE TABLE history (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      release_id TEXT NOT NULL,
      at INTEGER NOT NULL,
      kind TEXT NOT NULL,
      step_run_id TEXT,
      outcome TEXT NOT NULL ${checkIn("outcome", ["accepted", "refused"])},
      message TEXT NOT NULL,
      data TEXT NOT NULL
    ) STRICT`,
    "CREATE INDEX history_release ON history (release_id, id)",
    `CREATE TABLE outbox (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      release_id TEXT NOT NULL,
      effect TEXT NOT NULL,
      due_at INTEGER NOT NULL,
      claim_token TEXT,
      claimed_until INTEGER,
      claims INTEGER NOT NULL DEFAULT 0,
      done_at INTEGER
    ) STRICT`,
    "CREATE INDEX outbox_due ON outbox (due_at) WHERE done_at IS NULL",
    "CREATE INDEX outbox_release ON outbox (release_id) WHERE done_at IS NULL",
    `CREATE TABLE attempt_results (
      step_run_id TEXT NOT NULL,
      attempt INTEGER NOT NULL,
      release_id TEXT NOT NULL,
      received_at INTEGER NOT NULL,
      status TEXT NOT NULL,
      overall TEXT NOT NULL,
      checks TEXT NOT NULL,
      log TEXT NOT NULL,
      log_truncated INTEGER NOT NULL,
      raw_callback TEXT NOT NULL,
      preflight TEXT NOT NULL,
      PRIMARY KEY (step_run_id, attempt)
    ) STRICT`,
    "CREATE INDEX attempt_results_release ON attempt_results (release_id)",
    "CREATE TABLE release_sequence (name TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT",
    "INSERT INTO release_sequence (name, value) VALUES ('release', 0)",
  ],
  "0002_manifests": [
    `CREATE TABLE manifests (
      release_id TEXT PRIMARY KEY,
      manifest TEXT NOT NULL
    ) STRICT`,
    `INSERT INTO manifests (release_id, manifest)
       SELECT id, json_extract(doc, '$.manifest') FROM releases
       WHERE json_type(doc, '$.manifest') = 'object'`,
    `UPDATE releases SET doc = json_remove(doc, '$.manifest')
       WHERE json_type(doc, '$.manifest') = 'object'`,
  ],
  // `abandoned` (docs/state-machine.md "Ways out"). SQLite cannot alter a CHECK constraint,
  // so the table is rebuilt with the current vocabulary (same columns, same rows, same indexes).
  "0003_release_state_abandoned": [
    `CREATE TABLE releases_0003 (
      id TEXT PRIMARY KEY,
      number INTEGER UNIQUE,
      state TEXT NOT NULL ${checkIn("state", RELEASE_STATES)},
      generation INTEGER NOT NULL,
      resource_version INTEGER NOT NULL,
      manifest_digest TEXT NOT NULL,
      recipe_name TEXT NOT NULL,
      model TEXT NOT NULL,
      high_water_mark INTEGER NOT NULL,
      step_cursor INTEGER NOT NULL,
      step_count INTEGER NOT NULL,
      doc TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    ) STRICT`,
    `INSERT INTO releases_0003 (id, number, state, generation, resource_version, manifest_digest,
       recipe_name, model, high_water_mark, step_cursor, step_count, doc, created_at, updated_at)
     SELECT id, number, state, generation, resource_version, manifest_digest, recipe_name, model,
       high_water_mark, step_cursor, step_count, doc, created_at, updated_at FROM releases`,
    "DROP TABLE releases",
    "ALTER TABLE releases_0003 RENAME TO releases",
    "CREATE INDEX releases_state_created ON releases (state, created_at)",
    "CREATE INDEX releases_created ON releases (created_at)",
  ],
  "0004_release_retention": [
    `CREATE TABLE release_retention (
      release_id TEXT PRIMARY KEY,
      compacted_at INTEGER NOT NULL
    ) STRICT`,
  ],
  "0005_admission_marks": [
    `CREATE TABLE admission_marks (
      model TEXT PRIMARY KEY,
      issued_at INTEGER NOT NULL,
      manifest_digest TEXT NOT NULL,
      release_id TEXT NOT NULL
    ) STRICT`,
  ],
  "0006_gate_evidence": [
    `CREATE TABLE gate_evidence (
      release_id TEXT NOT NULL,
      generation INTEGER NOT NULL,
      wave INTEGER NOT NULL,
      seq INTEGER NOT NULL,
      manifest_digest TEXT NOT NULL,
      at INTEGER NOT NULL,
      decision TEXT NOT NULL,
      doc TEXT NOT NULL,
      PRIMARY KEY (release_id, generation, wave, seq)
    ) STRICT`,
  ],
  // One owner per lane (docs/guarantees.md G9): a claim row per lane id, written in the
  // transaction that creates the release; the primary key makes two concurrent starts of
  // overlapping releases fail one. Claims of releases not yet terminal are backfilled (the first
  // release by number wins a lane two of them already shared).
  "0007_lane_claims": [
    `CREATE TABLE lane_claims (
      lane_id TEXT PRIMARY KEY,
      release_id TEXT NOT NULL,
      claimed_at INTEGER NOT NULL
    ) STRICT`,
    `INSERT INTO lane_claims (lane_id, release_id, claimed_at)
       SELECT json_extract(l.value, '$.id'), r.id, r.created_at
       FROM releases r JOIN manifests m ON m.release_id = r.id, json_each(m.manifest, '$.lanes') l
       WHERE r.state NOT IN ('succeeded', 'rolled_back', 'aborted', 'abandoned')
         AND json_extract(l.value, '$.id') IS NOT NULL
       ORDER BY r.number
       ON CONFLICT (lane_id) DO NOTHING`,
  ],
  // The write probe of `/healthz` (Store.ping({ write: true })): one row, upserted.
  "0008_health_probe": [
    `CREATE TABLE health_probe (id TEXT PRIMARY KEY, at INTEGER NOT NULL) STRICT`,
  ],
  // The OIDC runner credential (docs/runner.md): each token id (jti) once, kept until the
  // token expires; each workflow run bound to the step run it preflighted first.
  "0009_runner_tokens": [
    `CREATE TABLE runner_token_ids (jti TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) STRICT`,
    "CREATE INDEX runner_token_ids_expires ON runner_token_ids (expires_at)",
    `CREATE TABLE runner_runs (
      run TEXT PRIMARY KEY,
      step_run_id TEXT NOT NULL,
      bound_at INTEGER NOT NULL
    ) STRICT`,
  ],
  // Named leases (Store.takeLease): a periodic job runs on one engine of several at a time.
  "0010_leases": [
    `CREATE TABLE leases (name TEXT PRIMARY KEY, owner TEXT NOT NULL, until INTEGER NOT NULL) STRICT`,
  ],
  // Engine state kept across events (Store.putState): the serverless entries' last drift
  // observation and counters, which no process holds between events.
  "0011_engine_state": [
    `CREATE TABLE engine_state (name TEXT PRIMARY KEY, value TEXT NOT NULL, at INTEGER NOT NULL) STRICT`,
  ],
  // Merge order is release order (docs/lifecycle.md): per model, the newest commit the recipe
  // workflow acted on and the release that stands for it. Models with releases from before get
  // their mark at the workflow's next run.
  "0012_source_marks": [
    `CREATE TABLE source_marks (
      model TEXT PRIMARY KEY,
      source_commit TEXT NOT NULL,
      committed_at INTEGER NOT NULL,
      release_id TEXT NOT NULL,
      at INTEGER NOT NULL
    ) STRICT`,
  ],
};
