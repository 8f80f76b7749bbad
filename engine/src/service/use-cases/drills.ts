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

/** A drill recorded: its stored record, and whether this request recorded it (false: it was already). */
export interface RecordedDrill {
  drill: DrillRecord;
  fresh: boolean;
}

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
   * again is answered with the stored one, unchanged (`fresh: false`). Errors: 400 `model` not
   * the path's, `release` not a release of `model`, `at` later than the engine's clock; 409 `conflict` the drill's id is recorded already with other results.
   */
  async record(model: string, body: DrillBody, actor: string): Promise<RecordedDrill> {
    if (body.model !== undefined && body.model !== model)
      throw new BatonError(
        "bad_request",
        `[engine] the drill is of model ${body.model}, but it is being recorded for ${model}`,
        [
          {
            path: "body.model",
            message: `is ${body.model}, not ${model}, the model of the path`,
            fix: `record it for its own model (POST /v1/models/${body.model}/drills; baton drill ${body.model} --record FILE)`,
          },
        ],
      );
    if (body.release !== undefined) {
      const r = await this.store.getRelease(body.release);
      if (r?.manifest.model !== model)
        throw new BatonError(
          "bad_request",
          `[engine] release ${body.release} is ${r ? `a release of ${r.manifest.model}` : "not a release this engine knows"}, not of ${model}`,
          [
            {
              path: "body.release",
              message: `is ${body.release}, ${r ? `a release of ${r.manifest.model}` : "which does not exist"}, not a release of ${model}`,
              fix: `give the id of the release of ${model} the drill rehearsed (baton list), or leave release out`,
            },
          ],
        );
    }
    return this.doc.change((book, now) => {
      const r = drillToRecord(book, model, body, actor, now);
      if ("problem" in r)
        throw new BatonError(
          r.problem.path === "body.at" ? "bad_request" : "conflict",
          `[engine] ${r.problem.message}`,
          [r.problem],
        );
      return {
        doc: r.fresh ? withDrill(book, r.record) : book,
        out: { drill: r.record, fresh: r.fresh },
      };
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
