// Merge order is release order (engine/src/domain/source-order.ts): the engine's judgement of a
// start's commit against the model's source mark, the CLI's order by ancestry or time, what the
// recipe workflow does with one recipe, and which release stands for a model.
import { describe, expect, it } from "vitest";
import {
  type ComparedRelease,
  definesLanes,
  pendingDecision,
  type SourceMark,
  sourceOrder,
  sourceRefusal,
  sourceRefusalWords,
  standingRelease,
} from "../../engine/src/domain/source-order.ts";

const T = Date.UTC(2026, 11, 1, 12, 0, 0);
const C1 = "1".repeat(40);
const C2 = "2".repeat(40);
const C3 = "3".repeat(40);
const mark: SourceMark = { model: "m", commit: C2, committed_at: T, release_id: "r4", at: T + 9 };

describe("sourceRefusal (what the engine checks)", () => {
  it.each([
    ["no mark yet", null, { commit: C1, committed_at: T - 1, after: null }, null],
    [
      "the mark's own commit (a re-run, a second recipe)",
      mark,
      { commit: C2, committed_at: T, after: null },
      null,
    ],
    ["newer, checked against the mark", mark, { commit: C3, committed_at: T + 1, after: C2 }, null],
    [
      "same second, checked against the mark",
      mark,
      { commit: C3, committed_at: T, after: C2 },
      null,
    ],
    ["older commit time", mark, { commit: C1, committed_at: T - 1000, after: C2 }, "older"],
    [
      "checked against another commit",
      mark,
      { commit: C3, committed_at: T + 1, after: C1 },
      "moved",
    ],
    ["never looked at the mark", mark, { commit: C3, committed_at: T + 1, after: null }, "moved"],
  ] as const)("%s", (_, m, claim, want) => {
    expect(sourceRefusal(m, claim)).toBe(want);
  });

  it("names the release that stands: id, commit, image", () => {
    const words = sourceRefusalWords(
      "older",
      { commit: C1, committed_at: T - 60_000, after: C2 },
      mark,
      { id: "r4", state: "succeeded", image: "ghcr.io/acme/s@sha256:d3" },
    );
    expect(words).toContain(
      "commit 1111111 (committed 2026-12-01T11:59:00Z) is older than commit 2222222",
    );
    expect(words).toContain(
      "release r4 (succeeded, image ghcr.io/acme/s@sha256:d3) stands for model m",
    );
    expect(words).toContain("nothing was started");
    expect(
      sourceRefusalWords("moved", { commit: C3, committed_at: T, after: C1 }, mark, null),
    ).toMatch(
      /checked against commit 1111111, but the newest is commit 2222222 .*release r4 stands/,
    );
  });
});

describe("sourceOrder (what the CLI concludes from git)", () => {
  const ours = { commit: C3, committed_at: T };
  it("follows ancestry, whatever the times say", () => {
    expect(sourceOrder("same", ours, mark)).toBe("same");
    expect(sourceOrder("descends", { ...ours, committed_at: T - 5 }, mark)).toBe("newer");
    expect(sourceOrder("precedes", { ...ours, committed_at: T + 5 }, mark)).toBe("older");
  });
  it("falls back to commit time when the histories are unrelated (a force-push)", () => {
    expect(sourceOrder("unrelated", { ...ours, committed_at: T + 1 }, mark)).toBe("newer");
    expect(sourceOrder("unrelated", { ...ours, committed_at: T }, mark)).toBe("newer");
    expect(sourceOrder("unrelated", { ...ours, committed_at: T - 1000 }, mark)).toBe("older");
  });
});

describe("pendingDecision (what the recipe workflow does with one recipe)", () => {
  const rel = (id: string, state: ComparedRelease["state"], ...digests: string[]) => ({
    id,
    state,
    digests,
  });
  it("a true repeat of the mark's release, in any state, starts nothing", () => {
    for (const state of ["succeeded", "rolled_back", "running"] as const) {
      expect(
        pendingDecision({
          digest: "d2",
          order: "newer",
          head: rel("r2", state, "x", "d2"),
          standing: null,
        }),
      ).toEqual({ kind: "repeat", release: "r2", of: "head" });
    }
  });
  it("an older commit with other content is superseded by the mark's release", () => {
    // The case: the run of d2's commit re-run after d3's release r3.
    expect(
      pendingDecision({
        digest: "d2",
        order: "older",
        head: rel("r3", "succeeded", "d3"),
        standing: rel("r3", "succeeded", "d3"),
      }),
    ).toEqual({ kind: "superseded", release: "r3" });
  });
  it("a revert to earlier content starts it when the fleet runs something else", () => {
    // The case: main back to d1 while r2 (d2) stands; r1 had d1.
    expect(
      pendingDecision({
        digest: "d1",
        order: "newer",
        head: rel("r2", "succeeded", "d2"),
        standing: rel("r2", "succeeded", "d2"),
      }),
    ).toEqual({ kind: "start" });
  });
  it("a revert to what the fleet runs already is a repeat of the standing release", () => {
    // r2 (d2) rolled back, so r1 (d1) stands again.
    expect(
      pendingDecision({
        digest: "d1",
        order: "newer",
        head: rel("r2", "rolled_back", "d2"),
        standing: rel("r1", "succeeded", "d1"),
      }),
    ).toEqual({ kind: "repeat", release: "r1", of: "standing" });
    // In flight counts (the fleet is going there); abandoned does not (lanes are mixed).
    expect(
      pendingDecision({
        digest: "d1",
        order: "none",
        head: null,
        standing: rel("r1", "paused", "d1"),
      }),
    ).toEqual({ kind: "repeat", release: "r1", of: "standing" });
    expect(
      pendingDecision({
        digest: "d1",
        order: "none",
        head: null,
        standing: rel("r1", "abandoned", "d1"),
      }),
    ).toEqual({ kind: "start" });
  });
  it("the first recipe of a model starts", () => {
    expect(pendingDecision({ digest: "d1", order: "none", head: null, standing: null })).toEqual({
      kind: "start",
    });
  });
});

describe("standingRelease", () => {
  const s = (
    id: string,
    model: string,
    state: ComparedRelease["state"],
    created_at: number,
    hwm = 3,
  ) => ({
    id,
    model,
    state,
    created_at,
    high_water_mark: hwm,
  });
  it("is the newest release of the model that defines its lanes", () => {
    const all = [
      s("r1", "m", "succeeded", 1),
      s("r2", "m", "rolled_back", 2),
      s("r3", "other", "succeeded", 3),
      s("r4", "m", "aborted", 4, -1),
    ];
    expect(standingRelease(all, "m")?.id).toBe("r1");
    expect(standingRelease([...all, s("r5", "m", "running", 5)], "m")?.id).toBe("r5");
    expect(standingRelease(all, "none")).toBeNull();
    // One millisecond, two releases: the higher number is the newer.
    expect(
      standingRelease([s("r10", "m", "succeeded", 7), s("r9", "m", "succeeded", 7)], "m")?.id,
    ).toBe("r10");
  });
  it("definesLanes: in flight, succeeded, abandoned, or aborted past a step", () => {
    expect(definesLanes({ state: "compensating", high_water_mark: 2 })).toBe(true);
    expect(definesLanes({ state: "abandoned", high_water_mark: 2 })).toBe(true);
    expect(definesLanes({ state: "aborted", high_water_mark: 0 })).toBe(true);
    expect(definesLanes({ state: "aborted", high_water_mark: -1 })).toBe(false);
    expect(definesLanes({ state: "rolled_back", high_water_mark: 5 })).toBe(false);
  });
});
