/**
 * Write queries shared by both dialects, returned as Kysely builders so that an adapter can
 * run them its own way (SQLite: compiled and run synchronously inside one immediate
 * transaction; Postgres: in a Kysely transaction). The commit, the hot path, has its own
 * fixed statements per dialect (`sqlite/commit-statements.ts`, `postgres/commit-statement.ts`).
 */
import { type Kysely, sql } from "kysely";
import type { HistoryEntry, OutboxEffect, Release } from "../../domain/types.ts";
import type { AdmissionMark } from "../../ports/store.ts";
import { historyColumns, manifestColumns, outboxColumns, releaseColumns } from "./rows.ts";
import type { BatonDatabase } from "./tables.ts";

type Db = Kysely<BatonDatabase>;

export function insertRelease(db: Db, release: Release) {
  return db.insertInto("releases").values(releaseColumns(release));
}

/** The release's manifest, written once at creation (commits never touch it). */
export function insertManifest(db: Db, release: Release) {
  return db.insertInto("manifests").values(manifestColumns(release));
}

export function insertHistory(db: Db, entries: HistoryEntry[]) {
  return db.insertInto("history").values(entries.map(historyColumns));
}

export function insertOutbox(db: Db, releaseId: string, effects: OutboxEffect[], now: number) {
  return db.insertInto("outbox").values(effects.map((e) => outboxColumns(releaseId, e, now)));
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

/** Raises the model's admission mark to `mark`; an older or equal mark leaves it as is. */
export function raiseAdmissionMark(db: Db, mark: AdmissionMark) {
  return db
    .insertInto("admission_marks")
    .values({ ...mark })
    .onConflict((oc) =>
      oc
        .column("model")
        .doUpdateSet({
          issued_at: (eb) => eb.ref("excluded.issued_at"),
          manifest_digest: (eb) => eb.ref("excluded.manifest_digest"),
          release_id: (eb) => eb.ref("excluded.release_id"),
        })
        .where(sql<boolean>`excluded.issued_at > admission_marks.issued_at`),
    );
}
