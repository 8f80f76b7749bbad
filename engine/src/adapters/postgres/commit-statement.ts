/**
 * `commit` on Postgres as ONE statement (one round trip, atomic by itself): data-modifying
 * CTEs do the conditional update, then — only if it touched the row — complete the outbox
 * row, insert history and outbox rows and upsert attempt results. Row lists travel as one
 * jsonb array each, so the statement has the same shape for any number of rows.
 *
 * The outbox row being completed is locked first (`claim … FOR UPDATE`): the release update
 * requires it, so a claim taken over by another worker between check and write cannot let
 * the release change while the completion is lost.
 */
import { type RawBuilder, sql } from "kysely";
import type { CommitInput } from "../../ports/store.ts";
import { attemptColumns, historyColumns, outboxColumns, releaseColumns } from "../kysely/rows.ts";

/** One row: `updated` 1 if the release row was written, `claim_held` 1 if the claim is held. */
export interface CommitOutcome {
  updated: number;
  claim_held: number;
}

export function commitStatement(input: CommitInput): RawBuilder<CommitOutcome> {
  const r = releaseColumns(input.release);
  // JSON columns travel as JSON values inside the array (not as JSON text) so that
  // `->` yields the value itself; `checks` stays text, decoded by `->>` to its exact bytes.
  const history = JSON.stringify(
    input.history.map((h) => ({ ...historyColumns(h), data: h.data ?? null })),
  );
  const outbox = JSON.stringify(
    input.effects.map((e) => ({ ...outboxColumns(r.id, e, input.now), effect: e })),
  );
  const attempts = JSON.stringify(
    (input.attempt_results ?? []).map((a) => ({
      ...attemptColumns(a),
      log_truncated: a.log_truncated,
      preflight: a.preflight ?? null,
    })),
  );
  const doneId = input.complete_outbox?.id ?? null;
  const doneToken = input.complete_outbox?.claim_token ?? null;

  return sql<CommitOutcome>`
WITH claim AS (
  SELECT id FROM outbox
  WHERE id = ${doneId}::bigint AND claim_token = ${doneToken}::text AND done_at IS NULL
  FOR UPDATE
), u AS (
  UPDATE releases SET
    state = ${r.state}, generation = ${r.generation}, resource_version = ${r.resource_version},
    manifest_digest = ${r.manifest_digest}, high_water_mark = ${r.high_water_mark},
    step_cursor = ${r.step_cursor}, step_count = ${r.step_count},
    doc = ${r.doc}::json, updated_at = ${r.updated_at}
  WHERE id = ${r.id} AND resource_version = ${input.expected_version}
    AND (${doneId}::bigint IS NULL OR EXISTS (SELECT 1 FROM claim))
  RETURNING id
), done AS (
  UPDATE outbox SET done_at = ${input.now}
  FROM claim, u WHERE outbox.id = claim.id
  RETURNING outbox.id
), h AS (
  INSERT INTO history (release_id, at, kind, step_run_id, outcome, message, data)
  SELECT e.v->>'release_id', (e.v->>'at')::bigint, e.v->>'kind', e.v->>'step_run_id',
         e.v->>'outcome', e.v->>'message', e.v->'data'
  FROM u, jsonb_array_elements(${history}::jsonb) WITH ORDINALITY AS e(v, ord)
  ORDER BY e.ord
  RETURNING id
), o AS (
  INSERT INTO outbox (release_id, effect, due_at)
  SELECT e.v->>'release_id', e.v->'effect', (e.v->>'due_at')::bigint
  FROM u, jsonb_array_elements(${outbox}::jsonb) WITH ORDINALITY AS e(v, ord)
  ORDER BY e.ord
  RETURNING id
), a AS (
  INSERT INTO attempt_results (step_run_id, attempt, release_id, received_at, status, overall,
                               checks, log, log_truncated, raw_callback, preflight)
  SELECT e.v->>'step_run_id', (e.v->>'attempt')::integer, e.v->>'release_id',
         (e.v->>'received_at')::bigint, e.v->>'status', e.v->>'overall', e.v->>'checks',
         e.v->>'log', (e.v->>'log_truncated')::boolean, e.v->>'raw_callback', e.v->'preflight'
  FROM u, jsonb_array_elements(${attempts}::jsonb) AS e(v)
  ON CONFLICT (step_run_id, attempt) DO UPDATE SET
    release_id = excluded.release_id, received_at = excluded.received_at,
    status = excluded.status, overall = excluded.overall, checks = excluded.checks,
    log = excluded.log, log_truncated = excluded.log_truncated,
    raw_callback = excluded.raw_callback, preflight = excluded.preflight
  RETURNING step_run_id
)
SELECT (SELECT count(*) FROM u)::int AS updated, (SELECT count(*) FROM claim)::int AS claim_held`;
}
