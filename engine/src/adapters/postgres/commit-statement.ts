/**
 * `commit` on Postgres as ONE statement (one round trip, atomic by itself): data-modifying
 * CTEs do the conditional update, then — only if it touched the row — complete the outbox
 * row, insert history and outbox rows and upsert attempt results. Row lists travel as one
 * jsonb array each, so the statement has the same shape for any number of rows.
 *
 * The outbox row being completed is locked first (`claim … FOR UPDATE`): the release update
 * requires it, so a claim taken over by another worker between check and write cannot let
 * the release change while the completion is lost.
 *
 * Why the SQL text is built here and not by Kysely: the commit is the engine's hot path.
 * Each shape (with or without an outbox row to complete, history, effects, attempt results)
 * is one fixed text with positional parameters, built once per process and run as a named
 * prepared statement (planned once per connection); a commit only fills the values. Parts
 * with nothing to write are left out of the text, so Postgres neither parses an empty array
 * nor runs an empty insert. Only `u` returns rows: the other parts' results are never read
 * (data-modifying CTEs run to completion whether or not they are referenced).
 */
import { countSerialised } from "../../domain/work-counts.ts";
import type { CommitInput } from "../../ports/store.ts";
import { dueAt, releaseDoc } from "../kysely/rows.ts";

/** One row: `updated` 1 if the release row was written, `claim_held` 1 if the claim is held. */
export interface CommitOutcome {
  updated: number;
  claim_held: number;
}

/** A statement ready for `pg`: `name` identifies the prepared statement of this shape. */
export interface CommitQuery {
  name: string;
  text: string;
  values: unknown[];
}

interface Shape {
  claim: boolean;
  history: boolean;
  outbox: boolean;
  attempts: boolean;
}

const texts = new Map<number, string>();

/** The statement text of one shape. Parameters: $1..$9 release, then the optional parts'. */
function commitText(s: Shape): string {
  let n = 9;
  const p = () => `$${++n}`;
  const ctes: string[] = [];
  let claimHeld = "0";
  let guard = "";
  if (s.claim) {
    const [id, token, now] = [p(), p(), p()];
    ctes.push(`claim AS (
  SELECT id FROM outbox
  WHERE id = ${id}::bigint AND claim_token = ${token}::text AND done_at IS NULL
  FOR UPDATE
)`);
    guard = "\n    AND EXISTS (SELECT 1 FROM claim)";
    claimHeld = "(SELECT count(*) FROM claim)::int";
    ctes.push(`u AS (
  UPDATE releases SET
    state = $2, generation = $3, resource_version = $4, manifest_digest = $5,
    high_water_mark = $6, step_cursor = $7, doc = $8::json, updated_at = $9
  WHERE id = $1 AND resource_version = ${p()}::bigint${guard}
  RETURNING id
)`);
    ctes.push(`done AS (
  UPDATE outbox SET done_at = ${now}::bigint
  FROM claim, u WHERE outbox.id = claim.id
)`);
  } else {
    ctes.push(`u AS (
  UPDATE releases SET
    state = $2, generation = $3, resource_version = $4, manifest_digest = $5,
    high_water_mark = $6, step_cursor = $7, doc = $8::json, updated_at = $9
  WHERE id = $1 AND resource_version = ${p()}::bigint
  RETURNING id
)`);
  }
  if (s.history) {
    ctes.push(`h AS (
  INSERT INTO history (release_id, at, kind, step_run_id, outcome, message, data)
  SELECT e.v->>'release_id', (e.v->>'at')::bigint, e.v->>'kind', e.v->>'step_run_id',
         e.v->>'outcome', e.v->>'message', e.v->'data'
  FROM u, jsonb_array_elements(${p()}::jsonb) WITH ORDINALITY AS e(v, ord)
  ORDER BY e.ord
)`);
  }
  if (s.outbox) {
    ctes.push(`o AS (
  INSERT INTO outbox (release_id, effect, due_at)
  SELECT u.id, e.v->'effect', (e.v->>'due_at')::bigint
  FROM u, jsonb_array_elements(${p()}::jsonb) WITH ORDINALITY AS e(v, ord)
  ORDER BY e.ord
)`);
  }
  if (s.attempts) {
    ctes.push(`a AS (
  INSERT INTO attempt_results (step_run_id, attempt, release_id, received_at, status, overall,
                               checks, log, log_truncated, raw_callback, preflight)
  SELECT e.v->>'step_run_id', (e.v->>'attempt')::integer, e.v->>'release_id',
         (e.v->>'received_at')::bigint, e.v->>'status', e.v->>'overall', e.v->>'checks',
         e.v->>'log', (e.v->>'log_truncated')::boolean, e.v->>'raw_callback', e.v->'preflight'
  FROM u, jsonb_array_elements(${p()}::jsonb) AS e(v)
  ON CONFLICT (step_run_id, attempt) DO UPDATE SET
    release_id = excluded.release_id, received_at = excluded.received_at,
    status = excluded.status, overall = excluded.overall, checks = excluded.checks,
    log = excluded.log, log_truncated = excluded.log_truncated,
    raw_callback = excluded.raw_callback, preflight = excluded.preflight
)`);
  }
  return `WITH ${ctes.join(", ")}
SELECT (SELECT count(*) FROM u)::int AS updated, ${claimHeld} AS claim_held`;
}

/** The commit of `input` as one named prepared statement with its values. */
export function commitQuery(input: CommitInput): CommitQuery {
  const r = input.release;
  const attempts = input.attempt_results ?? [];
  const shape: Shape = {
    claim: input.complete_outbox !== undefined,
    history: input.history.length > 0,
    outbox: input.effects.length > 0,
    attempts: attempts.length > 0,
  };
  const mask =
    (shape.claim ? 1 : 0) |
    (shape.history ? 2 : 0) |
    (shape.outbox ? 4 : 0) |
    (shape.attempts ? 8 : 0);
  let text = texts.get(mask);
  if (text === undefined) {
    text = commitText(shape);
    texts.set(mask, text);
  }
  const values: unknown[] = [
    r.id,
    r.state,
    r.generation,
    r.resource_version,
    r.manifest_digest,
    r.high_water_mark,
    r.cursor,
    releaseDoc(r),
    r.updated_at,
  ];
  const done = input.complete_outbox;
  if (done) values.push(done.id, done.claim_token, input.now);
  values.push(input.expected_version);
  // JSON columns travel as JSON values inside the array (not as JSON text) so that
  // `->` yields the value itself; `checks` stays text, decoded by `->>` to its exact bytes.
  if (shape.history) {
    values.push(
      countSerialised(
        JSON.stringify(
          input.history.map((h) => ({
            release_id: h.release_id,
            at: h.at,
            kind: h.kind,
            step_run_id: h.step_run_id ?? null,
            outcome: h.outcome,
            message: h.message,
            data: h.data ?? null,
          })),
        ),
      ),
    );
  }
  if (shape.outbox) {
    values.push(
      countSerialised(
        JSON.stringify(input.effects.map((e) => ({ effect: e, due_at: dueAt(e, input.now) }))),
      ),
    );
  }
  if (shape.attempts) {
    values.push(
      countSerialised(
        JSON.stringify(
          attempts.map((a) => ({
            step_run_id: a.step_run_id,
            attempt: a.attempt,
            release_id: a.release_id,
            received_at: a.received_at,
            status: a.status,
            overall: a.overall,
            checks: countSerialised(JSON.stringify(a.checks ?? null)),
            log: a.log,
            log_truncated: a.log_truncated,
            raw_callback: a.raw_callback,
            preflight: a.preflight ?? null,
          })),
        ),
      ),
    );
  }
  return { name: `baton_commit_${mask}`, text, values };
}
