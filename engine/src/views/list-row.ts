/**
 * One release of a list (the dashboard's releases page, `baton status` without an id), in a
 * few words: how far it got, counted in steps from 1, and, for a release that waits, what
 * holds it. Pure.
 */
import type { Release } from "../domain/types.ts";
import type { ReleaseSummary } from "../ports/store.ts";
import { holdHeadline } from "./where.ts";

/** The fields of a list row the progress is read from. */
export type ProgressRow = Pick<
  ReleaseSummary,
  "state" | "cursor" | "step_count" | "high_water_mark"
>;

/**
 * How far a release got: `step 9 of 24`, `all 24 done`, `undoing step 7 of 24`, and for an
 * ended release what took effect: `undone: steps 1–9 of 24`, `nothing took effect (24 steps)`.
 */
export function stepProgress(r: ProgressRow): string {
  const n = r.step_count;
  const hwm = r.high_water_mark + 1;
  const reached = hwm <= 0 ? null : hwm === 1 ? "step 1" : `steps 1–${hwm}`;
  switch (r.state) {
    case "succeeded":
      return `all ${n} done`;
    case "pending":
      return `not started (${n} steps)`;
    case "rolled_back":
      return reached ? `undone: ${reached} of ${n}` : `nothing took effect (${n} steps)`;
    case "aborted":
      return reached
        ? `aborted after ${reached} of ${n} (left as they are)`
        : `nothing took effect (${n} steps)`;
    case "abandoned":
      return reached ? `abandoned after ${reached} of ${n}` : `abandoned (${n} steps)`;
    case "compensating":
    case "needs_operator":
      return r.cursor >= 0
        ? `undoing step ${r.cursor + 1} of ${n}`
        : `undone: ${reached ?? "nothing"}`;
    default:
      return r.cursor >= n ? `all ${n} done` : `step ${r.cursor + 1} of ${n}`;
  }
}

/**
 * What a list shows of where `row` is: what holds it (`Held at wave 1 gate (10%): baking 20 s of
 * 30 s`) when its release was read and something holds it, else its step progress.
 */
export function whereInList(row: ProgressRow, release: Release | null): string {
  return (release && holdHeadline(release)) ?? stepProgress(row);
}
