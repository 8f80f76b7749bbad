/**
 * Storage of the reference control plane: lanes, the ledger by operation key, the highest
 * generation seen per release id, and the history of applied changes. Synchronous on purpose:
 * `transaction` is a plain serialised section (better-sqlite3, or one JS turn in memory), so a
 * write's ledger check, apply, history and ledger row happen together or not at all.
 */
import type { ChangeRecord, LaneState, LedgerEntry } from "./model.ts";

/** Filter for `listHistory`; every field optional. */
export interface HistoryFilter {
  operation_key?: string;
  release_id?: string;
  lane?: string;
  /** Only entries with `id > after` (paging). */
  after?: number;
  limit?: number;
}

export interface CpStore {
  /** Runs `fn` atomically; a throw rolls back everything it wrote. */
  transaction<T>(fn: () => T): T;
  getLane(id: string): LaneState | undefined;
  putLane(lane: LaneState): void;
  /** All lanes, or those of one model, ordered by id. */
  listLanes(model?: string): LaneState[];
  getLedger(operationKey: string): LedgerEntry | undefined;
  putLedger(entry: LedgerEntry): void;
  listLedger(q: { release_id?: string; limit?: number }): LedgerEntry[];
  /** Highest generation applied for `releaseId`, or undefined if none. */
  getGeneration(releaseId: string): number | undefined;
  setGeneration(releaseId: string, generation: number): void;
  /** Appends and returns the record with its id. */
  appendHistory(entry: Omit<ChangeRecord, "id">): ChangeRecord;
  listHistory(q: HistoryFilter): ChangeRecord[];
  close(): void;
}
