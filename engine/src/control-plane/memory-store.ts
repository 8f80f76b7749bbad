/** In-memory `CpStore`, for the test double and `:memory:`-like runs without SQLite. */
import type { ChangeRecord, LaneState, LedgerEntry } from "./model.ts";
import type { CpStore, HistoryFilter } from "./store.ts";

const clone = <T>(v: T): T => structuredClone(v);

/** A `CpStore` on Maps. `transaction` snapshots and restores on throw, so refusals leave no trace. */
export class MemoryCpStore implements CpStore {
  private lanes = new Map<string, LaneState>();
  private ledger = new Map<string, LedgerEntry>();
  private generations = new Map<string, number>();
  private history: ChangeRecord[] = [];

  transaction<T>(fn: () => T): T {
    const saved = {
      lanes: new Map(this.lanes),
      ledger: new Map(this.ledger),
      generations: new Map(this.generations),
      history: this.history.length,
    };
    try {
      return fn();
    } catch (err) {
      this.lanes = saved.lanes;
      this.ledger = saved.ledger;
      this.generations = saved.generations;
      this.history.length = saved.history;
      throw err;
    }
  }
  getLane(id: string) {
    const lane = this.lanes.get(id);
    return lane && clone(lane);
  }
  putLane(lane: LaneState) {
    this.lanes.set(lane.id, clone(lane));
  }
  listLanes(model?: string) {
    return [...this.lanes.values()]
      .filter((l) => model === undefined || l.model === model)
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .map(clone);
  }
  getLedger(key: string) {
    const e = this.ledger.get(key);
    return e && clone(e);
  }
  putLedger(entry: LedgerEntry) {
    this.ledger.set(entry.operation_key, clone(entry));
  }
  listLedger(q: { release_id?: string; limit?: number }) {
    return [...this.ledger.values()]
      .filter((e) => q.release_id === undefined || e.release_id === q.release_id)
      .slice(0, q.limit ?? Number.MAX_SAFE_INTEGER)
      .map(clone);
  }
  getGeneration(releaseId: string) {
    return this.generations.get(releaseId);
  }
  setGeneration(releaseId: string, generation: number) {
    this.generations.set(releaseId, generation);
  }
  appendHistory(entry: Omit<ChangeRecord, "id">) {
    const record = { id: this.history.length + 1, ...clone(entry) };
    this.history.push(record);
    return clone(record);
  }
  listHistory(q: HistoryFilter) {
    return this.history
      .filter(
        (h) =>
          (q.operation_key === undefined || h.operation_key === q.operation_key) &&
          (q.release_id === undefined || h.release_id === q.release_id) &&
          (q.lane === undefined || h.lane === q.lane) &&
          (q.after === undefined || h.id > q.after),
      )
      .slice(0, q.limit ?? Number.MAX_SAFE_INTEGER)
      .map(clone);
  }
  close() {}
}
