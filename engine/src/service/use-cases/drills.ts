/**
 * Drill records (docs/recovery-actions.md "Drills"): recorded per model in the engine's drill
 * book (one engine-state document, changed with compare-and-set), listed newest first, and
 * judged at a release's start against its recipe's drill policy.
 */
import {
  type DrillBody,
  type DrillBook,
  type DrillLanes,
  type DrillRecord,
  type DrillVerdict,
  drillBookOf,
  drillLanesOf,
  drillsOf,
  drillToRecord,
  drillVerdict,
  withDrill,
} from "../../domain/drills.ts";
import { BatonError } from "../../domain/errors.ts";
import type { Manifest } from "../../domain/types.ts";
import type { Clock } from "../../ports/clock.ts";
import type { Store } from "../../ports/store.ts";
import { StateDocument } from "../state-document.ts";

/** Succeeded releases (newest first, every model) looked through for a model's last known good. */
const LANES_SCAN = 200;

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

  /**
   * Records one drill of `model` by `actor`; answers the stored record. The same drill sent
   * again is answered with the stored one, unchanged. Errors: 400 `at` later than the engine's
   * clock; 409 `conflict` the drill's id is recorded already with other results.
   */
  record(model: string, body: DrillBody, actor: string): Promise<DrillRecord> {
    return this.doc.change((book, now) => {
      const r = drillToRecord(book, model, body, actor, now);
      if ("problem" in r)
        throw new BatonError(
          r.problem.path === "body.at" ? "bad_request" : "conflict",
          `[engine] ${r.problem.message}`,
          [r.problem],
        );
      return { doc: r.fresh ? withDrill(book, r.record) : book, out: r.record };
    });
  }

  /** `model`'s drills, newest first. */
  async list(model: string): Promise<DrillRecord[]> {
    return drillsOf((await this.doc.read()).doc, model);
  }

  /**
   * `model`'s lanes marked for drills in its newest succeeded release (among the newest
   * `LANES_SCAN` succeeded ones), or null when it has none there.
   */
  async lanes(model: string): Promise<DrillLanes | null> {
    const found = (await this.store.listReleases({ state: "succeeded", limit: LANES_SCAN })).find(
      (s) => s.model === model,
    );
    const release = found ? await this.store.getRelease(found.id) : null;
    return release ? { release: release.id, lanes: drillLanesOf(release.manifest) } : null;
  }

  /** What the drill policy of `manifest` says about a start now (null: nothing). */
  async verdict(manifest: Manifest): Promise<DrillVerdict | null> {
    if (!manifest.drill_policy) return null;
    const s = await this.store.getState(DRILL_BOOK_STATE);
    return drillVerdict(manifest, drillBookOf(s?.value), this.clock.now());
  }
}
