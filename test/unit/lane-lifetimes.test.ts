/**
 * The many-engines scenario's one-release-per-lane judges (test/support/lane-lifetimes.ts):
 * two accepted starts for one lane pass only when one release had ended before the other's
 * start was answered; a lane's writers at the control plane must not interleave. Each judge is
 * shown to fail on the case it exists for.
 */
import { describe, expect, it } from "vitest";
import type { ChangeRecord } from "../../engine/src/control-plane/model.ts";
import {
  checkOverlapRound,
  interleavedHolders,
  type Lifetime,
  lifetimeOf,
} from "../support/lane-lifetimes.ts";

const T0 = 1_000_000;
const round = { round: 3, shared: "ov3-shared" };

function life(id: string, created: number, answeredAt: number, ended: number | null): Lifetime {
  return {
    id,
    name: `ov-3-${id}`,
    created: T0 + created,
    answeredAt: T0 + answeredAt,
    state: ended === null ? "running" : "rolled_back",
    ended: ended === null ? null : T0 + ended,
  };
}

let nextId = 1;
function change(release: string, c: Partial<ChangeRecord>): ChangeRecord {
  return {
    id: nextId++,
    at: T0,
    operation_key: `${release}:0:fwd:x`,
    release_id: release,
    generation: 1,
    kind: "set_lane",
    lane: null,
    model: null,
    before: null,
    after: null,
    ...c,
  } as ChangeRecord;
}

describe("overlapping starts: lifetimes", () => {
  it("a second start accepted after the first release ended is not a violation", () => {
    const v = checkOverlapRound(
      round,
      [life("r2", 0, 900, 4_000), life("r7", 50, 6_000, null)],
      T0,
    );
    expect(v.problem).toBeNull();
    expect(v.note).toContain("one after another");
    expect(v.note).toContain(
      "r2 (ov-3-r2) start handled +0 ms, answered 201 +900 ms, ended rolled_back +4000 ms",
    );
  });

  it("two starts answered 201 while the other was still in flight are a violation, with both timelines", () => {
    const v = checkOverlapRound(
      round,
      [life("r7", 50, 1_200, null), life("r2", 0, 900, 20_000)],
      T0,
    );
    expect(v.problem).toContain("overlapping lifetimes");
    expect(v.problem).toContain("lane ov3-shared");
    expect(v.problem).toContain(
      "r2 (ov-3-r2) start handled +0 ms, answered 201 +900 ms, ended rolled_back +20000 ms",
    );
    expect(v.problem).toContain(
      "r7 (ov-3-r7) start handled +50 ms, answered 201 +1200 ms, ended running never",
    );
  });

  it("neither release ended: a violation", () => {
    const v = checkOverlapRound(
      round,
      [life("r2", 0, 900, null), life("r7", 10, 30_000, null)],
      T0,
    );
    expect(v.problem).not.toBeNull();
  });

  it("the lifetime ends at the last accepted history entry of a terminal release only", () => {
    const w = { id: "r2", name: "a", answeredAt: T0 + 5 };
    const history = [
      { at: T0 + 1, outcome: "accepted" },
      { at: T0 + 40, outcome: "accepted" },
      { at: T0 + 90, outcome: "refused" },
    ];
    expect(lifetimeOf(w, { created_at: T0, state: "rolled_back" }, history).ended).toBe(T0 + 40);
    expect(lifetimeOf(w, { created_at: T0, state: "running" }, history).ended).toBeNull();
    expect(lifetimeOf(w, null, []).state).toBe("missing");
  });
});

describe("overlapping starts: lane holders at the control plane", () => {
  it("a lane handed from one release to the next passes; A, B, A fails naming the writes", () => {
    const handed = interleavedHolders([
      change("r1", { lane: "l1" }),
      change("r1", { lane: "l1" }),
      change("r4", { lane: "l1" }),
    ]);
    expect(handed).toEqual({ lanes: 1, handovers: 1, problems: [] });
    const both = interleavedHolders([
      change("r1", { lane: "l1" }),
      change("r4", { lane: "l1" }),
      change("r1", { lane: "l1" }),
    ]);
    expect(both.problems).toHaveLength(1);
    expect(both.problems[0]).toMatch(
      /lane l1 held by two releases at once.*r1 .*then r4 .*then r1/,
    );
  });

  it("a traffic write holds the lanes it weights or changes, not the model's idle lanes at 0", () => {
    const v = interleavedHolders([
      change("r1", { kind: "set_traffic", before: { a: 100, b: 0 }, after: { a: 100, b: 0 } }),
      change("r4", { lane: "b" }),
      change("r1", { kind: "set_traffic", before: { a: 100, b: 0 }, after: { a: 100, b: 0 } }),
    ]);
    expect(v.problems).toEqual([]);
    const moved = interleavedHolders([
      change("r1", { kind: "set_traffic", before: { a: 100, b: 0 }, after: { a: 50, b: 50 } }),
      change("r4", { lane: "b" }),
      change("r1", { kind: "set_traffic", before: { a: 50, b: 50 }, after: { a: 100, b: 0 } }),
    ]);
    expect(moved.problems).toHaveLength(1);
  });
});
