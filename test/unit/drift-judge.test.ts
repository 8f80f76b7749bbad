/**
 * Drift judged from fleet facts (domain/drift.ts), pure: which models are judged, what differs
 * lane by lane, the entries that record a drift and its end, the release it is recorded on,
 * and the print a restarted engine compares with. No store, no observer.
 */
import { describe, expect, it } from "vitest";
import {
  currentDrift,
  DRIFT_CLEARED_KIND,
  DRIFT_KIND,
  type DriftFacts,
  type DriftLaneFacts,
  driftClearedEntry,
  driftEntry,
  drifted,
  driftedValues,
  driftMessage,
  driftPrint,
  driftRelease,
  modelDrift,
  observedModel,
  recordedPrint,
} from "../../engine/src/domain/drift.ts";

const desired = (over: Partial<NonNullable<DriftLaneFacts["desired"]>> = {}) => ({
  release_id: "r4",
  release_ended_at: 1_000,
  wave: 1,
  image: "img@sha256:new",
  weight: 50,
  excluded: false,
  capabilities: ["chat"],
  advertised: true,
  ...over,
});
const observed = (over: Partial<NonNullable<DriftLaneFacts["observed"]>> = {}) => ({
  weight: 50,
  excluded: false,
  capabilities: ["chat"],
  advertised: true,
  image: { ref: "img@sha256:new" },
  ...over,
});
const model = (lanes: DriftLaneFacts[], over: Partial<DriftFacts> = {}): DriftFacts => ({
  model: "m",
  lanes,
  readError: null,
  images: [{ ref: "img@sha256:new", lanes: lanes.map((l) => l.id), weight: 100 }],
  mixed: false,
  active: null,
  ...over,
});

describe("drift judgement", () => {
  it("a model with a release in flight, an unreadable control plane or a settling lane is not judged", () => {
    const lane = { id: "a", desired: desired(), observed: observed(), differs: [] };
    expect(modelDrift(model([lane], { active: "r5" }), 10_000)).toBeNull();
    expect(modelDrift(model([lane], { readError: "down" }), 10_000)).toBeNull();
    expect(modelDrift(model([lane]), 1_500, 1_000)).toBeNull(); // ended 500 ms ago
    expect(modelDrift(model([lane]), 2_000, 1_000)).not.toBeNull();
  });

  it("names each differing field with its desired and observed values", () => {
    const m = model([
      {
        id: "a",
        desired: desired(),
        observed: observed({ weight: 0, image: { ref: "img@sha256:old" } }),
        differs: ["image", "weight"],
      },
      {
        id: "b",
        desired: desired({ release_id: "r3" }),
        observed: observed({ capabilities: [], advertised: false, excluded: true }),
        differs: ["excluded", "capabilities"],
      },
      { id: "c", desired: desired(), observed: observed(), differs: [] },
    ]);
    const d = modelDrift(m, 5_000);
    expect(d?.lanes).toEqual([
      {
        id: "a",
        fields: ["image", "weight"],
        desired: { image: "img@sha256:new", weight: 50 },
        observed: { image: "img@sha256:old", weight: 0 },
      },
      {
        id: "b",
        fields: ["excluded", "capabilities"],
        desired: { excluded: false, capabilities: ["chat"], advertised: true },
        observed: { excluded: true, capabilities: [], advertised: false },
      },
    ]);
    if (!d) throw new Error("judged");
    expect(drifted(d)).toBe(true);
    expect(driftRelease(m, d)).toBe("r4");
    expect(driftMessage(d)).toBe(
      '[drift] model m: a image desired "img@sha256:new" observed "img@sha256:old", weight desired 50 observed 0; b excluded desired false observed true, capabilities desired ["chat"] observed [], advertised desired true observed false',
    );
    const e = driftEntry("r4", d, 5_000);
    expect(e).toMatchObject({ release_id: "r4", at: 5_000, kind: DRIFT_KIND, outcome: "accepted" });
    expect(e.message).toBe(driftMessage(d));
    expect(observedModel(m, d).weights).toEqual([
      { lane: "a", desired: 50, observed: 0 },
      { lane: "b", desired: 50, observed: 50 },
      { lane: "c", desired: 50, observed: 50 },
    ]);
    expect(observedModel(m, d).waves).toEqual([{ wave: 1, images: 2 }]);
  });

  it("a lane whose capabilities match but are no longer advertised names advertised, not two equal lists", () => {
    const m = model([
      {
        id: "b",
        desired: desired(),
        observed: observed({ advertised: false }),
        differs: ["capabilities"],
      },
    ]);
    const d = modelDrift(m, 5_000);
    if (!d) throw new Error("judged");
    expect(driftMessage(d)).toBe("[drift] model m: b advertised desired true observed false");
    expect(driftedValues(d.lanes[0]!)).toEqual([
      { field: "advertised", desired: true, observed: false },
    ]);
  });

  it("mixed versions outside a release are a drift even when every lane matches", () => {
    const lane = { id: "a", desired: desired(), observed: observed(), differs: [] };
    const images = [
      { ref: "img@sha256:new", lanes: ["a"], weight: 60 },
      { ref: "img@sha256:old", lanes: ["b"], weight: 40 },
    ];
    const d = modelDrift(model([lane], { mixed: true, images }), 5_000);
    if (!d) throw new Error("judged");
    expect(drifted(d)).toBe(true);
    expect(driftMessage(d)).toBe(
      "[drift] model m: mixed versions outside a release: img@sha256:new on a; img@sha256:old on b",
    );
    const clean = modelDrift(model([lane]), 5_000);
    if (!clean) throw new Error("judged");
    expect(drifted(clean)).toBe(false);
  });

  it("the recorded print ignores key order, ends at a clear, and a cleared drift shows none", () => {
    const d = {
      model: "m",
      lanes: [{ id: "a", fields: ["weight"], desired: { weight: 5 }, observed: { weight: 0 } }],
      mixed: false,
      images: [],
      observed_at: 1,
    };
    const reordered = { observed_at: 9, images: [], mixed: false, model: "m", lanes: d.lanes };
    const entry = driftEntry("r4", reordered, 9);
    expect(recordedPrint([entry])).toBe(driftPrint(d));
    expect(currentDrift([entry])).toEqual(reordered);
    const cleared = driftClearedEntry("r4", "m", 10);
    expect(cleared).toMatchObject({
      kind: DRIFT_CLEARED_KIND,
      message: "[drift] model m: every lane is again as its last release left it",
      data: { model: "m", observed_at: 10 },
    });
    expect(recordedPrint([entry, cleared])).toBe("");
    expect(currentDrift([entry, cleared])).toBeNull();
    expect(recordedPrint([])).toBe("");
  });
});
