/**
 * Drill records (docs/recovery-actions.md "Drills"): recorded per model in the engine's drill
 * book (one engine-state document, changed with compare-and-set), listed newest first, and
 * judged at a release's start against its recipe's drill policy.
 */

import {
  evacuationOp,
  type LaneRouting,
  rehearsalProblems,
  rehearsalRefusal,
  routingOf,
} from "../../domain/drill-rehearsal.ts";
import {
  type DrillBody,
  type DrillBook,
  type DrillLanes,
  type DrillRecord,
  type DrillVerdict,
  drillBookOf,
  drillLanesOf,
  drillLine,
  drillsOf,
  drillToRecord,
  drillVerdict,
  noDrillLanesFix,
  rehearsalDrillId,
  withDrill,
} from "../../domain/drills.ts";
import { BatonError } from "../../domain/errors.ts";
import { TERMINAL_RELEASE_STATES } from "../../domain/states.ts";
import type { Manifest } from "../../domain/types.ts";
import type { Clock } from "../../ports/clock.ts";
import type { ApplyResult, ControlPlane } from "../../ports/control-plane.ts";
import type { Store } from "../../ports/store.ts";
import { randomHex } from "../../protocol/ids.ts";
import { StateDocument } from "../state-document.ts";
import type { Incidents } from "./incidents.ts";

/** A drill recorded: its stored record, and whether this request recorded it (false: it was already). */
export interface RecordedDrill {
  drill: DrillRecord;
  fresh: boolean;
}

/** One write of a rehearsal: the drill lane, taken out (`out`) or put back, and its outcome. */
export interface RehearsalWrite {
  lane: string;
  out: boolean;
  operation_key: string;
  outcome: ApplyResult["outcome"];
  message?: string;
}

/**
 * A rehearsal's evidence (`Drills.rehearse`): the drill lanes of the last known good release, the
 * control plane's lanes before, after the evacuation and after the put-back, every write, and
 * the times (epoch ms) of the decision, the verified evacuation and the verified put-back.
 */
export interface Rehearsal {
  drill: DrillRecord;
  release: string;
  lanes: string[];
  before: LaneRouting[];
  evacuated: LaneRouting[] | null;
  returned: LaneRouting[] | null;
  writes: RehearsalWrite[];
  decided_at: number;
  recovered_at: number | null;
  returned_at: number | null;
}

/** How long a rehearsal holds its lease at most (it gives it back when it ends), ms. */
const REHEARSAL_LEASE_MS = 5 * 60_000;

/** The store lease a rehearsal of `model` holds while it runs. */
export function rehearsalLease(model: string): string {
  return `drill-rehearsal:${model}`;
}

/** Releases (newest first, every model) looked through for one of the model in flight. */
const RUNNING_SCAN = 200;

/** Succeeded releases (newest first, every model) looked through for a model's last known good. */
const LANES_SCAN = 200;

/** Name of the engine state that keeps the drill book (`Store.getState`). */
export const DRILL_BOOK_STATE = "drill_book";

export class Drills {
  private readonly doc: StateDocument<DrillBook>;

  /**
   * `controlPlane`: where a rehearsal takes the drill lanes out and back (null: none is
   * configured); `incidents`: where a drill newly recorded (posted or rehearsed) is written in
   * the timeline of every open incident that names its model (null: nowhere).
   */
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly controlPlane: ControlPlane | null = null,
    private readonly incidents: Incidents | null = null,
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
    const recorded = await this.doc.change((book, now) => {
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
    // A retried request (not fresh) was written to the timelines the first time.
    if (recorded.fresh && this.incidents)
      await this.incidents.recordRecovery(model, drillLine(recorded.drill), actor);
    return recorded;
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

  /**
   * Rehearses `model`'s recovery on its lanes marked for drills (docs/recovery-actions.md
   * "Rehearsing on the drill lanes"): an evacuation. Reads the model's lanes at the control
   * plane, takes each drill lane out of routing (one keyed `set_marker excluded` per drill lane;
   * no other lane is written), reads back and judges (RTO: from the decision, this call, to that
   * verified read-back), puts each drill lane back, reads back and judges again, and records a
   * drill (`rpo_ms` 0 and `rows_lost` 0: no state is restored) that passed when every write and
   * both judgements passed. The drill lanes are put back even when a write out failed. Writes no
   * release: the last known good and the release that stands are unchanged.
   * @throws BatonError 409 `conflict` a release of the model is in flight (among the newest
   *   `RUNNING_SCAN`), there are no drill lanes (the `noDrillLanesFix` words), or the lanes
   *   cannot be evacuated (`rehearsalRefusal`), or another rehearsal of the model holds the
   *   store lease `rehearsalLease(model)`; 503 no control plane that lists lanes, or its
   *   first read failed (nothing was written).
   */
  async rehearse(model: string, reason: string, actor: string): Promise<Rehearsal> {
    const decided = this.clock.now();
    const running = (await this.store.listReleases({ limit: RUNNING_SCAN })).find(
      (r) => r.model === model && !TERMINAL_RELEASE_STATES.has(r.state),
    );
    if (running)
      throw new BatonError(
        "conflict",
        `[engine] a rehearsal of ${model} refused: release ${running.id} of ${model} is ${running.state}; a rehearsal takes lanes out of routing only while no release of the model runs: wait for ${running.id} to finish (baton watch ${running.id}) or abort it, then rehearse again`,
      );
    const found = await this.lanes(model);
    const fix = noDrillLanesFix(model, found);
    if (fix || !found)
      throw new BatonError(
        "conflict",
        `[engine] a rehearsal of ${model} refused: no drill lanes; ${fix}`,
        [{ path: "drill_lanes", message: "none", fix: fix ?? "" }],
      );
    if (!this.controlPlane?.lanes)
      throw new BatonError(
        "unavailable",
        "[engine] no control plane that lists lanes is configured (BATON_CONTROL_PLANE_URL); a rehearsal takes the drill lanes out of routing there",
      );
    // One rehearsal of a model at a time, across every engine on the store.
    const owner = randomHex(8);
    const lease = rehearsalLease(model);
    if (
      !(await this.store.takeLease({
        name: lease,
        owner,
        until: decided + REHEARSAL_LEASE_MS,
        now: decided,
      }))
    )
      throw new BatonError(
        "conflict",
        `[engine] a rehearsal of ${model} refused: another rehearsal of ${model} is under way; nothing was written: see its drill when it ends (baton drill ${model}), then rehearse again`,
      );
    try {
      return await this.evacuate(model, reason, actor, decided, found);
    } finally {
      await this.store
        .takeLease({ name: lease, owner, until: 0, now: this.clock.now() })
        .catch(() => false);
    }
  }

  /** The rehearsal itself, under its lease (`rehearse`). */
  private async evacuate(
    model: string,
    reason: string,
    actor: string,
    decided: number,
    found: DrillLanes,
  ): Promise<Rehearsal> {
    const cp = this.controlPlane as ControlPlane;
    const read = async (): Promise<LaneRouting[] | null> => {
      const r = cp.lanes ? await cp.lanes(model) : null;
      return r?.ok ? routingOf(r.lanes, model) : null;
    };
    const before = await read();
    if (!before)
      throw new BatonError(
        "unavailable",
        `[engine] the control plane did not answer the read of ${model}'s lanes; nothing was written: rehearse again when it answers`,
      );
    const refused = rehearsalRefusal(model, before, found.lanes);
    if (refused)
      throw new BatonError(
        "conflict",
        `[engine] a rehearsal of ${model} refused: ${refused.message}; fix: ${refused.fix}`,
        [refused],
      );

    const drill = rehearsalDrillId(decided);
    const uid = randomHex(8);
    const writes: RehearsalWrite[] = [];
    const write = async (lane: string, out: boolean): Promise<void> => {
      const key = `drill:${model}:${drill}:${lane}:${out ? "out" : "back"}`;
      const r = await cp.apply(evacuationOp(lane, out), {
        operation_key: key,
        release_id: drill,
        generation: out ? 1 : 2,
        model,
        release_uid: uid,
      });
      writes.push({
        lane,
        out,
        operation_key: key,
        outcome: r.outcome,
        ...(r.outcome === "ok" ? {} : { message: r.message }),
      });
    };
    for (const lane of found.lanes) await write(lane, true);
    const evacuated = await read();
    const outProblems = [
      ...writes.filter((w) => w.outcome !== "ok").map((w) => writeProblem(w)),
      ...rehearsalProblems(before, evacuated, found.lanes, true),
    ];
    const recovered = outProblems.length === 0 ? this.clock.now() : null;
    // Put back every drill lane, whatever happened above: each write is absolute.
    const backFrom = writes.length;
    for (const lane of found.lanes) await write(lane, false);
    const returned = await read();
    const backProblems = [
      ...writes
        .slice(backFrom)
        .filter((w) => w.outcome !== "ok")
        .map((w) => writeProblem(w)),
      ...rehearsalProblems(before, returned, found.lanes, false),
    ];
    const returnedAt = backProblems.length === 0 ? this.clock.now() : null;
    const problems = [...outProblems, ...backProblems].slice(0, 20).map((p) => p.slice(0, 500));
    const recorded = await this.record(
      model,
      {
        drill,
        passed: problems.length === 0,
        rto_ms: recovered === null ? null : recovered - decided,
        rpo_ms: 0,
        rows_lost: 0,
        restored: returnedAt !== null,
        verified: recovered !== null,
        release: found.release,
        problems,
        reason,
        at: decided,
      },
      actor,
    );
    return {
      drill: recorded.drill,
      release: found.release,
      lanes: found.lanes,
      before,
      evacuated,
      returned,
      writes,
      decided_at: decided,
      recovered_at: recovered,
      returned_at: returnedAt,
    };
  }
}

/** A write that did not apply, as a drill problem. */
function writeProblem(w: RehearsalWrite): string {
  return `the write ${w.out ? "taking" : "putting"} drill lane ${w.lane} ${w.out ? "out of" : "back in"} routing ${w.outcome === "failed" ? "was refused" : "was not observed"}: ${w.message ?? w.outcome}`;
}
