/**
 * The kill switch's pure rules (engine/src/domain/kill-switch.ts): which lanes get which
 * absolute capability list, and how a read-back at the control plane is judged.
 */
import { describe, expect, it } from "vitest";
import {
  checkWithdraw,
  EMPTY_KILL_SWITCH_BOOK,
  plannedWrites,
  verify,
} from "../../engine/src/domain/kill-switch.ts";

const lanes = [
  { lane: "a", capabilities: ["chat", "search"], advertised: true },
  { lane: "b", capabilities: ["chat"], advertised: false },
  { lane: "c", capabilities: ["search"], advertised: true },
];
const ks = { model: "ranker", capability: "chat", lanes: ["a", "b"] };
const ok = (lane: string) => ({
  lane,
  operation_key: `k:${lane}`,
  capabilities: [],
  outcome: "ok" as const,
});

describe("kill switch rules", () => {
  it("a withdraw writes only the lanes that advertise it, keeping the rest of each lane", () => {
    expect(plannedWrites(ks, "withdraw", lanes)).toEqual([
      { lane: "a", capabilities: ["search"], advertised: true },
      { lane: "b", capabilities: [], advertised: false },
    ]);
  });

  it("a restore writes only the lanes it was taken from that lack it", () => {
    const now = [
      { lane: "a", capabilities: ["search"], advertised: true },
      { lane: "b", capabilities: ["chat"], advertised: false },
      { lane: "c", capabilities: ["search"], advertised: true },
    ];
    expect(plannedWrites(ks, "restore", now)).toEqual([
      { lane: "a", capabilities: ["chat", "search"], advertised: true },
    ]);
  });

  it("a withdraw verifies only when no lane of the model advertises it at the control plane", () => {
    expect(verify(ks, "withdraw", [ok("a"), ok("b")], lanes).verified).toBe(false);
    expect(verify(ks, "withdraw", [ok("a"), ok("b")], null)).toMatchObject({ verified: false });
    const after = [
      { lane: "a", capabilities: ["search"], advertised: true },
      { lane: "b", capabilities: [], advertised: false },
    ];
    expect(verify(ks, "withdraw", [ok("a"), ok("b")], after).verified).toBe(true);
    const failed = { ...ok("b"), outcome: "unknown" as const, message: "timed out" };
    expect(verify(ks, "withdraw", [ok("a"), failed], after)).toMatchObject({
      verified: false,
      verification: expect.stringContaining("the write to b was unknown: timed out"),
    });
  });

  it("a restore names and does not count a lane that no longer serves the model", () => {
    const after = [{ lane: "a", capabilities: ["chat", "search"], advertised: true }];
    const v = verify(ks, "restore", [ok("a")], after);
    expect(v.verified).toBe(true);
    expect(v.verification).toContain("b no longer serve ranker: not counted");
    const notBack = [{ lane: "a", capabilities: ["search"], advertised: true }];
    expect(verify(ks, "restore", [ok("a")], notBack).verified).toBe(false);
  });

  it("refuses a model with no lane and a capability no lane advertises, naming the field", () => {
    expect(() => checkWithdraw(EMPTY_KILL_SWITCH_BOOK, "x", "chat", [])).toThrow(
      /model x has no lane/,
    );
    try {
      checkWithdraw(EMPTY_KILL_SWITCH_BOOK, "ranker", "tts", lanes);
      expect.unreachable();
    } catch (e) {
      expect((e as { problems: { path: string }[] }).problems[0]?.path).toBe("capability");
    }
  });
});
