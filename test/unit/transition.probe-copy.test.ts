/**
 * `availableActions` asks `transition` about every exit on one deep-frozen copy of the release
 * (exits.ts `Probe`, transition.ts `wouldChange`): the answers are those of `transition` on a
 * copy, event by event, and the release is copied once per page, not once per question or per
 * offered action.
 */
import { describe, expect, it } from "vitest";
import { frozenProbeCopy } from "../../engine/src/domain/transition/draft.ts";
import { availableActions, verifyAction } from "../../engine/src/domain/transition/exits.ts";
import { LANE_RUNS_NOTHING } from "../../engine/src/domain/transition/operator.ts";
import { transition, wouldChange } from "../../engine/src/domain/transition.ts";
import type { Release, ReleaseEvent } from "../../engine/src/domain/types.ts";
import { countWorkInto, emptyWorkCounts } from "../../engine/src/domain/work-counts.ts";
import { offers } from "../../engine/src/views/offers.ts";
import {
  bigRecord,
  compensatedRecord,
  pausedRecord,
  runningRecord,
  succeededRecord,
} from "../support/dashboard-fixtures.ts";
import { waveSpecs } from "../support/manifest-fixture.ts";
import { advanceTo, finishCurrent, release } from "../support/sim/drive.ts";
import {
  boundAt0,
  compensating,
  needsOperator,
  pausedUnknown,
  runnerThenCp,
  started,
} from "../support/sim/scenes.ts";

/** Releases in every kind of state: scenes, a walk forward and back, dashboard fixtures. */
function releases(): [string, Release][] {
  const out: [string, Release][] = [
    ["pending", release(runnerThenCp())],
    ["started", started()],
    ["bound at 0", boundAt0()],
    ["paused unknown", pausedUnknown()],
    ["compensating", compensating()],
    ["needs_operator", needsOperator()],
    ["running record", runningRecord().release],
    ["paused record", pausedRecord().release],
    ["succeeded record", succeededRecord().release],
    ["rolled_back record", compensatedRecord().release],
    ["big record", bigRecord(20, 2, 10).release],
  ];
  let cur = advanceTo(release(waveSpecs(3)), 2);
  for (let i = 0; i < 12 && cur.state !== "rolled_back"; i++) {
    out.push([`walk ${i} (${cur.state})`, cur]);
    cur = finishCurrent(cur, i === 0 ? "fail" : "pass");
  }
  return out;
}

/** Every operator event, for every step run (not only the one at the cursor). */
function events(r: Release): ReleaseEvent[] {
  const actor = "probe";
  const reason = "probe";
  const lanes = Object.fromEntries(r.manifest.lanes.map((l) => [l.id, LANE_RUNS_NOTHING]));
  return [
    { type: "resume", actor },
    { type: "release", actor, reason },
    { type: "promote", actor, reason },
    { type: "pause", actor, reason },
    { type: "abort", actor, reason },
    { type: "confirm_restore", actor, reason },
    { type: "verify", actor },
    { type: "abandon", actor, reason, lanes },
    ...r.step_runs.flatMap((s): ReleaseEvent[] => [
      { type: "retry", actor, step_run_id: s.id },
      { type: "resolve", actor, step_run_id: s.id, reason },
    ]),
  ];
}

describe("probing on a frozen copy answers as transition does", () => {
  for (const [name, r] of releases()) {
    it(`${name}: each operator event accepted or refused alike`, () => {
      const frozen = frozenProbeCopy(r);
      const snapshot = JSON.stringify(r);
      for (const e of events(r)) {
        const res = transition(r, e, r.updated_at);
        expect(wouldChange(r, frozen, e, r.updated_at), `${e.type}`).toBe(res.ok && res.changed);
      }
      expect(JSON.stringify(r)).toBe(snapshot);
    });
  }

  it("the probe copy is frozen where handlers write, and shares the manifest", () => {
    const r = started();
    const frozen = frozenProbeCopy(r);
    expect(Object.isFrozen(frozen)).toBe(true);
    expect(Object.isFrozen(frozen.step_runs[0])).toBe(true);
    expect(frozen.manifest).toBe(r.manifest);
  });
});

describe("one copy per page, not one per question or offered action", () => {
  const copiesOf = (f: () => unknown) => {
    const counts = emptyWorkCounts();
    countWorkInto(counts);
    try {
      f();
    } finally {
      countWorkInto(null);
    }
    return counts.deep_copies;
  };

  it("a needs_operator release offers retry, resolve and abandon after one copy", () => {
    const r = needsOperator();
    expect(availableActions(r).map((a) => a.action)).toEqual(["retry", "resolve", "abandon"]);
    expect(copiesOf(() => availableActions(r))).toBe(1);
  });

  it("a running release's offers (pause, abort) and a closed one's (verify): one copy each", () => {
    const running = runningRecord().release;
    expect(offers(running).map((o) => o.action)).toEqual(
      expect.arrayContaining(["pause", "abort"]),
    );
    expect(copiesOf(() => offers(running))).toBe(1);
    const closed = compensatedRecord().release;
    expect(verifyAction(closed)).not.toBeNull();
    expect(copiesOf(() => offers(closed))).toBe(1);
  });
});
