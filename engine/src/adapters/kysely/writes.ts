/**
 * Write queries shared by both dialects, returned as Kysely builders so that an adapter can
 * run them its own way (SQLite: compiled and run synchronously inside one immediate
 * transaction; Postgres: in a Kysely transaction). The commit, the hot path, has its own
 * fixed statements per dialect (`sqlite/commit-statements.ts`, `postgres/commit-statement.ts`).
 */
import { type Kysely, sql } from "kysely";
import type { SourceMark } from "../../domain/source-order.ts";
import { TERMINAL_RELEASE_STATES } from "../../domain/states.ts";
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

/**
 * Sets the model's source mark to `mark` only while it is at commit `expect`: with `expect` null
 * an insert that does nothing when the model has a mark, otherwise an update of the row still at
 * `expect`. Returns the model's row when the mark was set, none when it had moved. Two writers
 * expecting the same commit: the second waits on the row (or its key) and finds it moved.
 */
export function setSourceMark(db: Db, mark: SourceMark, expect: string | null) {
  const row = {
    source_commit: mark.commit,
    committed_at: mark.committed_at,
    release_id: mark.release_id,
    at: mark.at,
  };
  if (expect === null) {
    return db
      .insertInto("source_marks")
      .values({ model: mark.model, ...row })
      .onConflict((oc) => oc.column("model").doNothing())
      .returning("model");
  }
  return db
    .updateTable("source_marks")
    .set(row)
    .where("model", "=", mark.model)
    .where("source_commit", "=", expect)
    .returning("model");
}

/**
 * Claims `laneIds` for `releaseId` (sorted, so two concurrent claims take row locks in one
 * order): inserts each claim, or takes over a claim whose release is terminal. Returns the lane
 * ids claimed; a lane missing from the result is owned by a release not yet terminal (or one
 * this transaction cannot see yet, which counts as in flight). Both SQLite and Postgres run the
 * upsert with RETURNING.
 */
export function claimLanes(db: Db, releaseId: string, laneIds: readonly string[], now: number) {
  const terminal = [...TERMINAL_RELEASE_STATES];
  return db
    .insertInto("lane_claims")
    .values(
      [...new Set(laneIds)].sort().map((lane_id) => ({
        lane_id,
        release_id: releaseId,
        claimed_at: now,
      })),
    )
    .onConflict((oc) =>
      oc
        .column("lane_id")
        .doUpdateSet({
          release_id: (eb) => eb.ref("excluded.release_id"),
          claimed_at: (eb) => eb.ref("excluded.claimed_at"),
        })
        .where(
          sql`(SELECT r.state FROM releases r WHERE r.id = lane_claims.release_id)`,
          "in",
          terminal,
        ),
    )
    .returning("lane_id");
}

/** The claim rows of `laneIds`, sorted by lane id. */
export function selectLaneClaims(db: Db, laneIds: readonly string[]) {
  return db
    .selectFrom("lane_claims")
    .select(["lane_id", "release_id"])
    .where("lane_id", "in", [...laneIds])
    .orderBy("lane_id");
}
