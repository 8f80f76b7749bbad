/**
 * `claimDue` on Postgres as one statement: pick due rows with `FOR UPDATE SKIP LOCKED` (rows
 * another engine is claiming right now are skipped, not waited for), then lease them with a
 * fresh random token each. `MATERIALIZED` keeps the planner from re-running the pick.
 */
import { type RawBuilder, sql } from "kysely";

export function claimStatement(q: {
  now: number;
  limit: number;
  leaseMs: number;
  owner: string;
}): RawBuilder<Record<string, unknown>> {
  const now = Math.floor(q.now); // due_at is whole ms: due_at <= floor(now) <=> due_at <= now
  return sql`
WITH due AS MATERIALIZED (
  SELECT id FROM outbox
  WHERE done_at IS NULL AND due_at <= ${now}
    AND (claimed_until IS NULL OR claimed_until < ${now})
  ORDER BY due_at, id
  LIMIT ${q.limit}
  FOR UPDATE SKIP LOCKED
)
UPDATE outbox SET
  claim_token = ${q.owner}::text || ':' || gen_random_uuid()::text,
  claimed_until = ${Math.ceil(q.now + q.leaseMs)},
  claims = outbox.claims + 1
FROM due WHERE outbox.id = due.id
RETURNING outbox.*`;
}
