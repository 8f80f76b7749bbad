/**
 * Drill records (docs/recovery-actions.md "Drills"): recorded per model in the engine's drill
 * book (one engine-state document, changed with compare-and-set), listed newest first, and
 * judged at a release's start against its recipe's drill policy.
 */
import {
  type DrillBody,
  type DrillBook,
  type DrillRecord,
  type DrillVerdict,
  drillBookOf,
  drillsOf,
  drillVerdict,
  withDrill,
} from "../../domain/drills.ts";
import type { Manifest } from "../../domain/types.ts";
import type { Clock } from "../../ports/clock.ts";
import type { Store } from "../../ports/store.ts";
import { StateDocument } from "../state-document.ts";

/** Name of the engine state that keeps the drill book (`Store.getState`). */
export const DRILL_BOOK_STATE = "drill_book";

export class Drills {
  private readonly doc: StateDocument<DrillBook>;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {
    this.doc = new StateDocument(store, clock, DRILL_BOOK_STATE, drillBookOf, "drill book");
  }

  /** Records one drill of `model` by `actor` (now); answers the stored record. */
  record(model: string, body: DrillBody, actor: string): Promise<DrillRecord> {
    return this.doc.change((book, now) => {
      const { actor: _given, ...rest } = body;
      const rec: DrillRecord = { ...rest, model, by: actor, at: now };
      return { doc: withDrill(book, rec), out: rec };
    });
  }

  /** `model`'s drills, newest first. */
  async list(model: string): Promise<DrillRecord[]> {
    return drillsOf((await this.doc.read()).doc, model);
  }

  /** What the drill policy of `manifest` says about a start now (null: nothing). */
  async verdict(manifest: Manifest): Promise<DrillVerdict | null> {
    if (!manifest.drill_policy) return null;
    const s = await this.store.getState(DRILL_BOOK_STATE);
    return drillVerdict(manifest, drillBookOf(s?.value), this.clock.now());
  }
}
