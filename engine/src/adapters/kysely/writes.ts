/**
 * Write queries shared by both dialects, returned as Kysely builders so that an adapter can
 * run them its own way (SQLite: compiled and run synchronously inside one immediate
 * transaction; Postgres: in a Kysely transaction).
 */
import type { Kysely } from "kysely";
import type { Effect, HistoryEntry, Release } from "../../domain/types.ts";
import type { AttemptResult } from "../../ports/store.ts";
import {
  attemptColumns,
  historyColumns,
  manifestColumns,
  outboxColumns,
  releaseColumns,
} from "./rows.ts";
import type { BatonDatabase } from "./tables.ts";

type Db = Kysely<BatonDatabase>;

export function insertRelease(db: Db, release: Release) {
  return db.insertInto("releases").values(releaseColumns(release));
}

/** The release's manifest, written once at creation (commits never touch it). */
export function insertManifest(db: Db, release: Release) {
  return db.insertInto("manifests").values(manifestColumns(release));
}

/** The conditional update: touches the row only if nobody changed it since `expected`. */
export function updateRelease(db: Db, release: Release, expected: number) {
  const { id, created_at: _c, recipe_name: _r, model: _m, ...cols } = releaseColumns(release);
  return db
    .updateTable("releases")
    .set(cols)
    .where("id", "=", id)
    .where("resource_version", "=", expected);
}

export function insertHistory(db: Db, entries: HistoryEntry[]) {
  return db.insertInto("history").values(entries.map(historyColumns));
}

export function insertOutbox(db: Db, releaseId: string, effects: Effect[], now: number) {
  return db.insertInto("outbox").values(effects.map((e) => outboxColumns(releaseId, e, now)));
}

/** Upsert by (step_run_id, attempt): a replayed callback overwrites its own attempt only. */
export function upsertAttemptResults(db: Db, results: AttemptResult[]) {
  return db
    .insertInto("attempt_results")
    .values(results.map(attemptColumns))
    .onConflict((oc) =>
      oc.columns(["step_run_id", "attempt"]).doUpdateSet((eb) => ({
        release_id: eb.ref("excluded.release_id"),
        received_at: eb.ref("excluded.received_at"),
        status: eb.ref("excluded.status"),
        overall: eb.ref("excluded.overall"),
        checks: eb.ref("excluded.checks"),
        log: eb.ref("excluded.log"),
        log_truncated: eb.ref("excluded.log_truncated"),
        raw_callback: eb.ref("excluded.raw_callback"),
        preflight: eb.ref("excluded.preflight"),
      })),
    );
}

/** Marks an outbox row done, only while `claimToken` still holds it. */
export function finishOutbox(db: Db, id: number, claimToken: string, at: number) {
  return db
    .updateTable("outbox")
    .set({ done_at: at })
    .where("id", "=", id)
    .where("claim_token", "=", claimToken)
    .where("done_at", "is", null);
}
