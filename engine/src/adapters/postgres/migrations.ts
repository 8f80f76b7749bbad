/**
 * Postgres schema. Differs from SQLite where Postgres does better: typed JSON columns,
 * identity columns, a SEQUENCE for release numbers, a partial index for due outbox rows.
 * - `releases.doc` is `json`, not `jsonb`: the document is rewritten whole on every
 *   transition and never searched inside, and converting ~20 KB to jsonb cost 0.5 ms per
 *   commit here (json ~0.2 ms with lz4); see docs/storage.md.
 * - `checks` and `raw_callback` are text so they come back byte for byte (jsonb would reorder
 *   keys and drop duplicates).
 * - history `data`, outbox `effect` and `preflight` are small and jsonb (queryable, indexable).
 * - 0002: the manifest (~20 KB, never changed after creation) moves out of `releases.doc` into
 *   `manifests`, written once; a commit then sends only the ~11 KB that changes. Existing rows
 *   are moved (their doc goes through jsonb once to drop the key: same values, key order may
 *   change).
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

export const postgresMigrations: SqlMigrations = {
  "0001_initial": [
    `CREATE TABLE releases (
      id text PRIMARY KEY,
      number bigint UNIQUE,
      state text NOT NULL ${checkIn("state", STATES_0001)},
      generation integer NOT NULL,
      resource_version bigint NOT NULL,
      manifest_digest text NOT NULL,
      recipe_name text NOT NULL,
      model text NOT NULL,
      high_water_mark integer NOT NULL,
      step_cursor integer NOT NULL,
      step_count integer NOT NULL,
      doc json NOT NULL,
      created_at bigint NOT NULL,
      updated_at bigint NOT NULL
    )`,
    // lz4 compresses the TOASTed doc faster than the default pglz; skipped where the server
    // was built without it (EXECUTE defers parsing, so older servers are caught too).
    `DO $$ BEGIN
       EXECUTE 'ALTER TABLE releases ALTER COLUMN doc SET COMPRESSION lz4';
     EXCEPTION WHEN OTHERS THEN NULL;
     END $$`,
    "CREATE INDEX releases_state_created ON releases (state, created_at)",
    "CREATE INDEX releases_created ON releases (created_at)",
    `CREATE TABLE history (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      release_id text NOT NULL,
      at bigint NOT NULL,
      kind text NOT NULL,
      step_run_id text,
      outcome text NOT NULL ${checkIn("outcome", ["accepted", "refused"])},
      message text NOT NULL,
      data jsonb NOT NULL
    )`,
    "CREATE INDEX history_release ON history (release_id, id)",
    `CREATE TABLE outbox (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      release_id text NOT NULL,
      effect jsonb NOT NULL,
      due_at bigint NOT NULL,
      claim_token text,
      claimed_until bigint,
      claims integer NOT NULL DEFAULT 0,
      done_at bigint
    )`,
    "CREATE INDEX outbox_due ON outbox (due_at, id) WHERE done_at IS NULL",
    "CREATE INDEX outbox_release ON outbox (release_id) WHERE done_at IS NULL",
    `CREATE TABLE attempt_results (
      step_run_id text NOT NULL,
      attempt integer NOT NULL,
      release_id text NOT NULL,
      received_at bigint NOT NULL,
      status text NOT NULL,
      overall text NOT NULL,
      checks text NOT NULL,
      log text NOT NULL,
      log_truncated boolean NOT NULL,
      raw_callback text NOT NULL,
      preflight jsonb NOT NULL,
      PRIMARY KEY (step_run_id, attempt)
    )`,
    "CREATE INDEX attempt_results_release ON attempt_results (release_id)",
    "CREATE SEQUENCE release_number AS bigint",
  ],
  "0002_manifests": [
    `CREATE TABLE manifests (
      release_id text PRIMARY KEY,
      manifest json NOT NULL
    )`,
    `DO $$ BEGIN
       EXECUTE 'ALTER TABLE manifests ALTER COLUMN manifest SET COMPRESSION lz4';
     EXCEPTION WHEN OTHERS THEN NULL;
     END $$`,
    `INSERT INTO manifests (release_id, manifest)
       SELECT id, doc->'manifest' FROM releases WHERE doc->'manifest' IS NOT NULL`,
    `UPDATE releases SET doc = (doc::jsonb - 'manifest')::json WHERE doc->'manifest' IS NOT NULL`,
  ],
  // `abandoned` (docs/state-machine.md "Ways out"): the state CHECK follows the vocabulary.
  "0003_release_state_abandoned": [
    "ALTER TABLE releases DROP CONSTRAINT IF EXISTS releases_state_check",
    `ALTER TABLE releases ADD CONSTRAINT releases_state_check ${checkIn("state", RELEASE_STATES)}`,
  ],
  "0004_release_retention": [
    `CREATE TABLE release_retention (
      release_id TEXT PRIMARY KEY,
      compacted_at BIGINT NOT NULL
    )`,
  ],
  "0005_admission_marks": [
    `CREATE TABLE admission_marks (
      model text PRIMARY KEY,
      issued_at bigint NOT NULL,
      manifest_digest text NOT NULL,
      release_id text NOT NULL
    )`,
  ],
  "0006_gate_evidence": [
    `CREATE TABLE gate_evidence (
      release_id text NOT NULL,
      generation integer NOT NULL,
      wave integer NOT NULL,
      seq integer NOT NULL,
      manifest_digest text NOT NULL,
      at bigint NOT NULL,
      decision text NOT NULL,
      doc jsonb NOT NULL,
      PRIMARY KEY (release_id, generation, wave, seq)
    )`,
  ],
  // One owner per lane (docs/guarantees.md G9): a claim row per lane id, written in the
  // transaction that creates the release; the primary key makes two concurrent starts of
  // overlapping releases fail one. Claims of releases not yet terminal are backfilled (the first
  // release by number wins a lane two of them already shared).
  "0007_lane_claims": [
    `CREATE TABLE lane_claims (
      lane_id text PRIMARY KEY,
      release_id text NOT NULL,
      claimed_at bigint NOT NULL
    )`,
    `INSERT INTO lane_claims (lane_id, release_id, claimed_at)
       SELECT l->>'id', r.id, r.created_at
       FROM releases r JOIN manifests m ON m.release_id = r.id,
         json_array_elements(m.manifest->'lanes') l
       WHERE r.state NOT IN ('succeeded', 'rolled_back', 'aborted', 'abandoned')
         AND l->>'id' IS NOT NULL
       ORDER BY r.number
       ON CONFLICT (lane_id) DO NOTHING`,
  ],
  // The write probe of `/healthz` (Store.ping({ write: true })): one row, upserted.
  "0008_health_probe": [`CREATE TABLE health_probe (id text PRIMARY KEY, at bigint NOT NULL)`],
  // The OIDC runner credential (docs/runner.md): each token id (jti) once, kept until the
  // token expires; each workflow run bound to the step run it preflighted first.
  "0009_runner_tokens": [
    `CREATE TABLE runner_token_ids (jti text PRIMARY KEY, expires_at bigint NOT NULL)`,
    "CREATE INDEX runner_token_ids_expires ON runner_token_ids (expires_at)",
    `CREATE TABLE runner_runs (
      run text PRIMARY KEY,
      step_run_id text NOT NULL,
      bound_at bigint NOT NULL
    )`,
  ],
  // Named leases (Store.takeLease): a periodic job runs on one engine of several at a time.
  "0010_leases": [
    `CREATE TABLE leases (name text PRIMARY KEY, owner text NOT NULL, until bigint NOT NULL)`,
  ],
  // Engine state kept across events (Store.putState): the serverless entries' last drift
  // observation and counters, which no process holds between events.
  "0011_engine_state": [
    `CREATE TABLE engine_state (name text PRIMARY KEY, value text NOT NULL, at bigint NOT NULL)`,
  ],
  // Merge order is release order (docs/lifecycle.md): per model, the newest commit the recipe
  // workflow acted on and the release that stands for it. Models with releases from before get
  // their mark at the workflow's next run.
  "0012_source_marks": [
    `CREATE TABLE source_marks (
      model text PRIMARY KEY,
      source_commit text NOT NULL,
      committed_at bigint NOT NULL,
      release_id text NOT NULL,
      at bigint NOT NULL
    )`,
  ],
};
