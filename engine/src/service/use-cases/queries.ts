/**
 * Reads of releases: one record (`get`), the list, a page of history, the live marks the
 * dashboard polls, and the release record document with its lineage chain. Nothing here writes.
 */
import { BatonError } from "../../domain/errors.ts";
import type { HistoryEntry, Release } from "../../domain/types.ts";
import type { ReleaseSummary, Store } from "../../ports/store.ts";
import { RELEASE_ID_PATTERN } from "../../protocol/ids.ts";
import { buildRecord, type LineageLink } from "../../record/build.ts";
import type { ReleaseRecordDocument } from "../../record/schema.ts";
import type { ReleaseRecord } from "../api.ts";

/**
 * How long (ms) one read of a release mark answers every tab polling it: with any number of
 * tabs open, the live dashboard costs at most one indexed query per release per this period.
 */
export const LIVE_MARK_SHARE_MS = 500;

/** Ancestors a release record's `lineage.chain` lists at most. */
export const LINEAGE_CHAIN_MAX = 20;

/** A release's live mark and state, as the dashboard polls it. */
export type LiveState = { mark: string; state: Release["state"] };

export class ReleaseQueries {
  /** Live marks being read or read recently, shared by the dashboard tabs polling them. */
  private readonly marks = new Map<string, { at: number; value: Promise<LiveState | null> }>();

  constructor(private readonly store: Store) {}

  /**
   * The full record of release `id`: release, history, attempt results, gate evidence.
   * @throws BatonError `bad_request` (malformed id), `not_found`.
   */
  async get(id: string): Promise<ReleaseRecord> {
    if (!RELEASE_ID_PATTERN.test(id)) {
      throw new BatonError(
        "bad_request",
        `[engine] release id ${JSON.stringify(id)} is malformed`,
        [{ path: "id", message: "must look like r<number>", fix: "use an id such as r17" }],
      );
    }
    const release = await this.store.getRelease(id);
    if (!release) throw new BatonError("not_found", `[engine] release ${id} does not exist`);
    const [history, attempt_results, gate_evidence] = await Promise.all([
      this.store.getHistory(id),
      this.store.listAttemptResults(id),
      this.store.listEvidence(id),
    ]);
    return { release, history, attempt_results, gate_evidence };
  }

  /** The release alone, or null when unknown (`ReleaseApi.peek`). */
  peek(id: string): Promise<Release | null> {
    return RELEASE_ID_PATTERN.test(id) ? this.store.getRelease(id) : Promise.resolve(null);
  }

  list(q: { state?: Release["state"]; limit: number; before?: number }): Promise<ReleaseSummary[]> {
    return this.store.listReleases(q);
  }

  /** One page of history from `cursor`; `next_cursor` null past the last. @throws `not_found`. */
  async historyPage(
    id: string,
    q: { cursor: number; limit: number },
  ): Promise<{ entries: HistoryEntry[]; next_cursor: number | null }> {
    if (!(await this.store.getRelease(id)))
      throw new BatonError("not_found", `[engine] release ${id} does not exist`);
    // One more than asked says whether another page follows.
    const rows = await this.store.getHistory(id, { limit: q.limit + 1, offset: q.cursor });
    const entries = rows.slice(0, q.limit);
    return { entries, next_cursor: rows.length > q.limit ? q.cursor + q.limit : null };
  }

  async liveMark(id: string): Promise<string | null> {
    return (await this.liveState(id))?.mark ?? null;
  }

  /**
   * `"<resource_version>:<history count>"` and the state of release `id` (null when unknown):
   * one indexed query shared by the callers within `LIVE_MARK_SHARE_MS`.
   */
  liveState(id: string): Promise<LiveState | null> {
    const now = performance.now();
    const held = this.marks.get(id);
    if (held && now - held.at < LIVE_MARK_SHARE_MS) return held.value;
    const value = this.store
      .releaseMark(id)
      .then((m) =>
        m ? { mark: `${m.resource_version}:${m.history_count}`, state: m.state } : null,
      );
    this.marks.set(id, { at: now, value });
    value.catch(() => this.marks.delete(id));
    if (this.marks.size > 1000) {
      for (const [k, v] of this.marks) if (now - v.at >= LIVE_MARK_SHARE_MS) this.marks.delete(k);
    }
    return value;
  }

  /**
   * The release record document (docs/record.md); `repository` (owner/name) builds the run
   * links. @throws BatonError `not_found` / `bad_request` as `get`.
   */
  async releaseRecord(id: string, repository?: string): Promise<ReleaseRecordDocument> {
    return this.recordOf(await this.get(id), repository);
  }

  /** The record of a release already read (`get`), with its lineage chain read from the store. */
  async recordOf(rec: ReleaseRecord, repository?: string): Promise<ReleaseRecordDocument> {
    const { release, history, gate_evidence, attempt_results } = rec;
    return buildRecord(release, history, {
      ...(repository ? { repository } : {}),
      evidence: gate_evidence ?? [],
      attemptResults: attempt_results,
      chain: await this.lineageChain(release),
    });
  }

  /**
   * The releases `release` descends from by rollback or roll forward, nearest first, following
   * `lineage.of` (at most `LINEAGE_CHAIN_MAX`, a cycle or a missing release ends it).
   */
  private async lineageChain(release: Release): Promise<LineageLink[]> {
    const out: LineageLink[] = [];
    const seen = new Set([release.id]);
    let next = release.lineage?.of;
    while (next && !seen.has(next) && out.length < LINEAGE_CHAIN_MAX) {
      seen.add(next);
      const r = await this.store.getRelease(next);
      if (!r) break;
      out.push({
        id: r.id,
        verb: r.lineage?.verb ?? null,
        of: r.lineage?.of ?? null,
        manifest_of: r.lineage?.manifest_of ?? null,
      });
      next = r.lineage?.of;
    }
    return out;
  }
}
