/**
 * Mapping between domain values and table rows, the same for both dialects.
 */
import type { ReleaseState } from "../../domain/states.ts";
import type { HistoryEntry, Json, Manifest, OutboxEffect, Release } from "../../domain/types.ts";
import { countSerialised } from "../../domain/work-counts.ts";
import type { AttemptResult, OutboxRow, ReleaseSummary } from "../../ports/store.ts";
import type { JsonCodec } from "./tables.ts";

/** `r17` -> 17; null for ids of another shape (they are still stored). */
export function releaseNumber(id: string): number | null {
  const m = /^r(\d{1,15})$/.exec(id);
  return m ? Number(m[1]) : null;
}

/**
 * When an outbox row becomes due (epoch ms): the effect's own time, else `now`. Rounded up to
 * a whole ms, because backoff with jitter yields fractions and the column is an integer.
 */
export function dueAt(effect: OutboxEffect, now: number): number {
  return Math.ceil(effect.type === "deadline" ? effect.at : (effect.not_before ?? now));
}

/**
 * The `releases.doc` JSON text: the release without its manifest. The manifest (~20 KB of a
 * ~31 KB release with 24 steps) never changes after creation; it is written once to
 * `manifests`, so commits neither serialise nor send it.
 */
export function releaseDoc(r: Release): string {
  const { manifest: _manifest, ...rest } = r;
  return countSerialised(JSON.stringify(rest));
}

/** The `manifests` row of a release (written once, by `createRelease`). */
export function manifestColumns(r: Release) {
  return { release_id: r.id, manifest: countSerialised(JSON.stringify(r.manifest)) };
}

/**
 * A `Release` from its stored doc (without manifest) and its manifest, keys in the order the
 * domain builds them. A doc that still carries a manifest (written before migration 0002 and
 * not moved) is accepted as is when no manifest row exists.
 * @throws Error `[store] …` when neither holds a manifest (a row written outside the store).
 */
export function toRelease(doc: Omit<Release, "manifest">, manifest: Manifest | null): Release {
  const m = manifest ?? (doc as Partial<Release>).manifest;
  if (!m) {
    throw new Error(
      `[store] release ${doc.id} has no manifest row; it was not written by createRelease`,
    );
  }
  const {
    id,
    state,
    generation,
    resource_version,
    manifest_digest,
    manifest: _old,
    ...rest
  } = doc as Release;
  return { id, state, generation, resource_version, manifest_digest, manifest: m, ...rest };
}

/** Columns of `releases` derived from a release (the doc plus what queries filter on). */
export function releaseColumns(r: Release) {
  return {
    id: r.id,
    number: releaseNumber(r.id),
    state: r.state,
    generation: r.generation,
    resource_version: r.resource_version,
    manifest_digest: r.manifest_digest,
    recipe_name: r.manifest.recipe_name,
    model: r.manifest.model,
    high_water_mark: r.high_water_mark,
    step_cursor: r.cursor,
    step_count: r.manifest.steps.length,
    doc: releaseDoc(r),
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

export function historyColumns(h: HistoryEntry) {
  return {
    release_id: h.release_id,
    at: h.at,
    kind: h.kind,
    step_run_id: h.step_run_id ?? null,
    outcome: h.outcome,
    message: h.message,
    data: countSerialised(JSON.stringify(h.data ?? null)),
  };
}

export function outboxColumns(releaseId: string, effect: OutboxEffect, now: number) {
  return {
    release_id: releaseId,
    effect: countSerialised(JSON.stringify(effect)),
    due_at: dueAt(effect, now),
  };
}

export function attemptColumns(a: AttemptResult) {
  return {
    step_run_id: a.step_run_id,
    attempt: a.attempt,
    release_id: a.release_id,
    received_at: a.received_at,
    status: a.status,
    overall: a.overall,
    checks: countSerialised(JSON.stringify(a.checks ?? null)),
    log: a.log,
    log_truncated: a.log_truncated ? 1 : 0,
    raw_callback: a.raw_callback,
    preflight: countSerialised(JSON.stringify(a.preflight ?? null)),
  };
}

// biome-ignore lint/suspicious/noExplicitAny: rows come from either driver
type Row = Record<string, any>;

export function toHistoryEntry(row: Row, json: JsonCodec): HistoryEntry {
  return {
    release_id: row.release_id,
    at: Number(row.at),
    kind: row.kind,
    step_run_id: row.step_run_id,
    outcome: row.outcome,
    message: row.message,
    data: json.read(row.data) as Json,
  };
}

export function toOutboxRow(row: Row, json: JsonCodec): OutboxRow {
  return {
    id: Number(row.id),
    release_id: row.release_id,
    effect: json.read(row.effect) as OutboxEffect,
    due_at: Number(row.due_at),
    claim_token: row.claim_token,
    claimed_until: row.claimed_until === null ? null : Number(row.claimed_until),
    claims: Number(row.claims),
  };
}

export function toAttemptResult(row: Row, json: JsonCodec): AttemptResult {
  return {
    step_run_id: row.step_run_id,
    attempt: Number(row.attempt),
    release_id: row.release_id,
    received_at: Number(row.received_at),
    status: row.status,
    overall: row.overall,
    checks: JSON.parse(row.checks) as Json,
    log: row.log,
    log_truncated: Boolean(row.log_truncated),
    raw_callback: row.raw_callback,
    preflight: json.read(row.preflight) as Json,
  };
}

export function toSummary(row: Row): ReleaseSummary {
  return {
    id: row.id,
    state: row.state as ReleaseState,
    recipe_name: row.recipe_name,
    model: row.model,
    high_water_mark: Number(row.high_water_mark),
    cursor: Number(row.step_cursor),
    step_count: Number(row.step_count),
    created_at: Number(row.created_at),
    updated_at: Number(row.updated_at),
  };
}
