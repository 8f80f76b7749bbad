/**
 * Work counts: how much the engine copies and serialises, for the work-count budgets
 * (`bench/budgets.json`, checked by `npm run check:budgets`). Counting is off — each call
 * below is one null check — unless a test or benchmark installs a counter with
 * `countWorkInto`; it never changes what the counted code does. The engine itself never
 * installs one.
 */

/** Counts since a counter was installed. */
export interface WorkCounts {
  /** Deep copies of (parts of) a release: one per transition draft. */
  deep_copies: number;
  /** Objects and arrays those deep copies allocated. */
  copied_nodes: number;
  /** UTF-8 bytes of the JSON text the stores build to write (documents, rows, effects). */
  bytes_serialised: number;
}

let into: WorkCounts | null = null;
let encoder: TextEncoder | null = null;

/** A zeroed `WorkCounts`. */
export function emptyWorkCounts(): WorkCounts {
  return { deep_copies: 0, copied_nodes: 0, bytes_serialised: 0 };
}

/** Starts counting into `counts` (null stops counting). For tests and benchmarks only. */
export function countWorkInto(counts: WorkCounts | null): void {
  into = counts;
}

/** Counts one deep copy that allocated `nodes` objects and arrays. */
export function countDeepCopy(nodes: number): void {
  if (!into) return;
  into.deep_copies += 1;
  into.copied_nodes += nodes;
}

/** Counts JSON text built for a write; returns `text` (so a call can wrap the stringify). */
export function countSerialised(text: string): string {
  if (into) {
    encoder ??= new TextEncoder();
    into.bytes_serialised += encoder.encode(text).length;
  }
  return text;
}

/** True while a counter is installed (instrumentation that costs more than a check). */
export function countingWork(): boolean {
  return into !== null;
}
