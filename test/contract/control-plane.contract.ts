/**
 * One contract suite for the `ControlPlane` port, run against the reference server
 * through the HTTP adapter and against the in-memory double. docs/state-machine.md rules 4, 5, 7.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LaneState, RouteResult } from "../../engine/src/control-plane/model.ts";
import type { ControlPlaneOp } from "../../engine/src/domain/types.ts";
import type { ControlPlane, WriteContext } from "../../engine/src/ports/control-plane.ts";

/** What the suite needs from a subject besides the port: reads of the truth, and setup. */
export interface ContractSubject {
  cp: ControlPlane;
  /** Applied changes recorded for `key` (replays excluded). */
  applications(key: string): Promise<number>;
  /** Weights of the default model's lanes ({} if none). */
  weights(): Promise<Record<string, number>>;
  lane(id: string): Promise<LaneState | undefined>;
  route(requests: number): Promise<RouteResult>;
  /** Starting state of lanes in the default model, no history. */
  seed(lanes: (Partial<LaneState> & { id: string })[]): Promise<void>;
  close(): Promise<void>;
}

const ctx = (operation_key: string, generation = 1, release_id = "r17"): WriteContext => ({
  operation_key,
  release_id,
  generation,
  model: "default",
});
const traffic = (weights: Record<string, number>, percent = 0): ControlPlaneOp => ({
  op: "set_traffic",
  weights,
  percent,
});
const exclude = (lane: string, present: boolean): ControlPlaneOp => ({
  op: "set_marker",
  lane,
  marker: "excluded",
  present,
});

/** Registers the suite; `make` builds a fresh subject per test. */
export function controlPlaneContract(name: string, make: () => Promise<ContractSubject>): void {
  describe(`control-plane contract: ${name}`, () => {
    let s: ContractSubject;
    beforeEach(async () => {
      s = await make();
      await s.seed([
        { id: "lane-a", weight: 50 },
        { id: "lane-b", weight: 50 },
        { id: "lane-c", weight: 0 },
      ]);
    });
    afterEach(async () => {
      await s.close();
    });

    it("sets traffic absolutely and reads it back", async () => {
      const op = traffic({ "lane-a": 45, "lane-b": 45, "lane-c": 10 }, 10);
      expect(await s.cp.apply(op, ctx("r17:6:fwd:traffic=10"))).toEqual({
        outcome: "ok",
        replayed: false,
      });
      expect(await s.weights()).toEqual({ "lane-a": 45, "lane-b": 45, "lane-c": 10 });
      // A second absolute write under another key sets, never adds: 10 stays 10.
      expect((await s.cp.apply(op, ctx("r17:7:fwd:traffic=10"))).outcome).toBe("ok");
      expect(await s.weights()).toEqual({ "lane-a": 45, "lane-b": 45, "lane-c": 10 });
      expect(await s.cp.observe(op, ctx("r17:6:fwd:traffic=10"))).toMatchObject({
        ok: true,
        matches: true,
      });
    });

    it("gives lanes of the model that a traffic write does not name weight 0", async () => {
      const op = traffic({ "lane-a": 100 }, 100);
      expect((await s.cp.apply(op, ctx("k1"))).outcome).toBe("ok");
      expect(await s.weights()).toEqual({ "lane-a": 100, "lane-b": 0, "lane-c": 0 });
      expect(await s.cp.observe(op, ctx("k1"))).toMatchObject({ ok: true, matches: true });
      // A lane unknown to the control plane takes no traffic: it matches a target of 0 only.
      const zero = traffic({ "lane-a": 100, "lane-zz": 0 });
      expect(await s.cp.observe(zero, ctx("k1"))).toMatchObject({ ok: true, matches: true });
      const some = traffic({ "lane-a": 90, "lane-zz": 10 });
      expect(await s.cp.observe(some, ctx("k1"))).toMatchObject({ ok: true, matches: false });
    });

    it("replays the same key with the same body: one application, replayed=true", async () => {
      const op = traffic({ "lane-a": 45, "lane-b": 45, "lane-c": 10 }, 10);
      await s.cp.apply(op, ctx("r17:6:fwd:traffic=10"));
      // Meanwhile another key moved traffic on; the replay must not re-apply 10%.
      await s.cp.apply(
        traffic({ "lane-a": 25, "lane-b": 25, "lane-c": 50 }, 50),
        ctx("r17:9:fwd:traffic=50"),
      );
      for (let i = 0; i < 3; i++) {
        expect(await s.cp.apply(op, ctx("r17:6:fwd:traffic=10"))).toEqual({
          outcome: "ok",
          replayed: true,
        });
      }
      expect(await s.applications("r17:6:fwd:traffic=10")).toBe(1);
      expect(await s.weights()).toEqual({ "lane-a": 25, "lane-b": 25, "lane-c": 50 });
    });

    it("handles lane ids that are names of Object properties", async () => {
      await s.seed([
        { id: "lane-a", weight: 0 },
        { id: "lane-b", weight: 0 },
        { id: "lane-c", weight: 0 },
        { id: "constructor", weight: 60 },
        { id: "toString", weight: 40 },
      ]);
      await s.cp.apply(traffic({ constructor: 60, toString: 40 }), ctx("p1"));
      const op = traffic({ "lane-a": 100 });
      expect((await s.cp.apply(op, ctx("p2"))).outcome).toBe("ok");
      expect(await s.weights()).toMatchObject({ constructor: 0, toString: 0, "lane-a": 100 });
      expect(await s.cp.observe(op, ctx("p2"))).toMatchObject({ ok: true, matches: true });
      expect((await s.route(10)).counts).toMatchObject({
        constructor: 0,
        toString: 0,
        "lane-a": 10,
      });
    });

    it("treats a replay as the same request whatever the key order of the weights", async () => {
      await s.cp.apply(traffic({ "lane-a": 45, "lane-b": 45, "lane-c": 10 }), ctx("k"));
      const again = await s.cp.apply(
        traffic({ "lane-c": 10, "lane-b": 45, "lane-a": 45 }),
        ctx("k"),
      );
      expect(again).toEqual({ outcome: "ok", replayed: true });
    });

    it("refuses a reused key with another body (422) and changes nothing", async () => {
      await s.cp.apply(
        traffic({ "lane-a": 45, "lane-b": 45, "lane-c": 10 }),
        ctx("r17:6:fwd:traffic=10"),
      );
      const r = await s.cp.apply(
        traffic({ "lane-a": 40, "lane-b": 40, "lane-c": 20 }),
        ctx("r17:6:fwd:traffic=10"),
      );
      expect(r).toMatchObject({ outcome: "failed", status: 422 });
      expect(r.outcome === "failed" && r.message).toMatch(
        /^\[control-plane\].*operation key r17:6:fwd:traffic=10/,
      );
      expect(await s.weights()).toEqual({ "lane-a": 45, "lane-b": 45, "lane-c": 10 });
      expect(await s.applications("r17:6:fwd:traffic=10")).toBe(1);
    });

    it("refuses a key reused on another lane or by another release (422)", async () => {
      await s.cp.apply(exclude("lane-a", true), ctx("k"));
      expect(await s.cp.apply(exclude("lane-b", true), ctx("k"))).toMatchObject({ status: 422 });
      expect(await s.cp.apply(exclude("lane-a", true), ctx("k", 1, "r18"))).toMatchObject({
        status: 422,
      });
      expect((await s.lane("lane-b"))?.excluded).toBe(false);
    });

    it("refuses the same key and body from another release uid (422), applying nothing", async () => {
      // Two engine databases number releases alike: r16 of the second is not r16 of the first.
      const key = "r16:0:fwd:lane=lane-c:excluded=true";
      const first = { ...ctx(key, 1, "r16"), release_uid: "aaaaaaaaaaaaaaaa" };
      const other = { ...ctx(key, 1, "r16"), release_uid: "bbbbbbbbbbbbbbbb" };
      expect((await s.cp.apply(exclude("lane-c", true), first)).outcome).toBe("ok");
      expect((await s.cp.apply(exclude("lane-c", false), ctx("undo", 1, "r99"))).outcome).toBe(
        "ok",
      );
      const r = await s.cp.apply(exclude("lane-c", true), other);
      expect(r).toMatchObject({ outcome: "failed", status: 422 });
      const message = (r as { message: string }).message;
      expect(message).toContain("was already used by another release r16 (uid aaaaaaaaaaaaaaaa)");
      expect(message).toContain("two engine databases are writing to one control plane");
      expect(await s.applications(key)).toBe(1);
      expect((await s.lane("lane-c"))?.excluded).toBe(false);
      // The same uid is a replay; a write without a uid keeps the old rule (body only).
      expect(await s.cp.apply(exclude("lane-c", true), first)).toEqual({
        outcome: "ok",
        replayed: true,
      });
      expect(await s.cp.apply(exclude("lane-c", true), ctx(key, 1, "r16"))).toEqual({
        outcome: "ok",
        replayed: true,
      });
      expect(await s.applications(key)).toBe(1);
    });

    it("refuses a stale generation (409) and changes nothing; equal and higher pass", async () => {
      expect((await s.cp.apply(exclude("lane-a", true), ctx("g2", 2))).outcome).toBe("ok");
      const stale = await s.cp.apply(exclude("lane-a", false), ctx("g1", 1));
      expect(stale).toMatchObject({ outcome: "failed", status: 409 });
      expect(stale.outcome === "failed" && stale.message).toMatch(
        /stale writer: release r17 generation 1 < 2/,
      );
      expect((await s.lane("lane-a"))?.excluded).toBe(true);
      expect(await s.applications("g1")).toBe(0);
      expect((await s.cp.apply(exclude("lane-b", true), ctx("g2b", 2))).outcome).toBe("ok");
      expect((await s.cp.apply(exclude("lane-a", false), ctx("g3", 3))).outcome).toBe("ok");
      // Generations are per release: another release at generation 1 is not stale.
      expect((await s.cp.apply(exclude("lane-c", true), ctx("other", 1, "r18"))).outcome).toBe(
        "ok",
      );
    });

    it("answers a replay of an applied key even after a newer generation (rule 5 beats 409)", async () => {
      await s.cp.apply(exclude("lane-a", true), ctx("old", 1));
      await s.cp.apply(exclude("lane-b", true), ctx("new", 2));
      expect(await s.cp.apply(exclude("lane-a", true), ctx("old", 1))).toEqual({
        outcome: "ok",
        replayed: true,
      });
      expect(await s.applications("old")).toBe(1);
    });

    it("sets markers absolutely and reads them back", async () => {
      await s.cp.apply(exclude("lane-a", true), ctx("m1"));
      await s.cp.apply(exclude("lane-a", true), ctx("m2"));
      expect((await s.lane("lane-a"))?.excluded).toBe(true);
      expect(await s.cp.observe(exclude("lane-a", true), ctx("m2"))).toMatchObject({
        ok: true,
        matches: true,
      });
      expect(await s.cp.observe(exclude("lane-a", false), ctx("m2"))).toMatchObject({
        ok: true,
        matches: false,
      });
      await s.cp.apply(exclude("lane-a", false), ctx("m3"));
      expect((await s.lane("lane-a"))?.excluded).toBe(false);
      expect(await s.applications("m1")).toBe(1);
      expect(await s.applications("m2")).toBe(1);
    });

    it("sets capabilities absolutely (order-insensitive, de-duplicated) and reads them back", async () => {
      const advertise: ControlPlaneOp = {
        op: "set_capabilities",
        lane: "lane-a",
        capabilities: ["vision", "chat", "chat"],
        advertised: true,
      };
      await s.cp.apply(advertise, ctx("c1"));
      expect(await s.lane("lane-a")).toMatchObject({
        capabilities: ["chat", "vision"],
        advertised: true,
      });
      expect(
        await s.cp.observe({ ...advertise, capabilities: ["chat", "vision"] }, ctx("c1")),
      ).toMatchObject({
        ok: true,
        matches: true,
      });
      expect(
        await s.cp.apply({ ...advertise, capabilities: ["chat", "vision"] }, ctx("c1")),
      ).toEqual({
        outcome: "ok",
        replayed: true,
      });
      const withdraw = { ...advertise, advertised: false };
      await s.cp.apply(withdraw, ctx("c2"));
      expect(await s.lane("lane-a")).toMatchObject({ advertised: false });
      expect(await s.cp.observe(advertise, ctx("c2"))).toMatchObject({ ok: true, matches: false });
    });

    it("never creates a lane on a write (404); observing an unknown lane does not match", async () => {
      expect(await s.lane("lane-new")).toBeUndefined();
      expect(await s.cp.observe(exclude("lane-new", false), ctx("x"))).toEqual({
        ok: true,
        matches: false,
        observed: null,
      });
      const marker = await s.cp.apply(exclude("lane-new", true), ctx("x"));
      expect(marker).toMatchObject({ outcome: "failed", status: 404 });
      if (marker.outcome === "failed") expect(marker.message).toContain("declare it first");
      const weights = await s.cp.apply(traffic({ "lane-a": 50, "lane-new": 50 }), ctx("y"));
      expect(weights).toMatchObject({ outcome: "failed", status: 404 });
      expect(await s.lane("lane-new")).toBeUndefined();
      expect(await s.weights()).toEqual({ "lane-a": 50, "lane-b": 50, "lane-c": 0 });
    });

    it("answers assert_traffic by reading: ok when the weights match, failed when not", async () => {
      const want: ControlPlaneOp = {
        op: "assert_traffic",
        weights: { "lane-a": 50, "lane-b": 50, "lane-c": 0 },
        percent: 0,
      };
      expect(await s.cp.apply(want, ctx("a1"))).toEqual({ outcome: "ok", replayed: false });
      const wrong: ControlPlaneOp = {
        op: "assert_traffic",
        weights: { "lane-a": 90, "lane-b": 0, "lane-c": 10 },
        percent: 10,
      };
      expect(await s.cp.apply(wrong, ctx("a2"))).toMatchObject({ outcome: "failed", status: 409 });
      expect(await s.applications("a1")).toBe(0);
    });

    it("refuses bad input with 400 naming the field, applying nothing", async () => {
      const bad: [ControlPlaneOp, RegExp][] = [
        [traffic({ "lane-a": 50, "lane-b": 40 }), /weights.*sum to 100/],
        [traffic({ "lane-a": 150, "lane-b": -50 }), /weight must be/],
        [traffic({ "lane-a": 50.5, "lane-b": 49.5 }), /integer/],
        [traffic({}), /at least one lane/],
        [exclude("bad lane/id", true), /lane/],
        [
          { op: "set_capabilities", lane: "lane-a", capabilities: [""], advertised: true },
          /capabilit/,
        ],
      ];
      for (const [i, [op, message]] of bad.entries()) {
        const r = await s.cp.apply(op, ctx(`bad-${i}`));
        expect(r, JSON.stringify(op)).toMatchObject({ outcome: "failed", status: 400 });
        expect(r.outcome === "failed" && r.message).toMatch(message);
        expect(await s.applications(`bad-${i}`)).toBe(0);
      }
      expect(await s.cp.apply(exclude("lane-a", true), ctx("neg", -1))).toMatchObject({
        status: 400,
      });
      expect(await s.cp.apply(exclude("lane-a", true), ctx(""))).toMatchObject({ status: 400 });
      expect(await s.weights()).toEqual({ "lane-a": 50, "lane-b": 50, "lane-c": 0 });
    });

    it("routes exactly each lane's share: 10% of 10,000 is 1,000", async () => {
      await s.cp.apply(traffic({ "lane-a": 45, "lane-b": 45, "lane-c": 10 }, 10), ctx("t10"));
      // The replay after a crash must not double the candidate's share.
      await s.cp.apply(traffic({ "lane-a": 45, "lane-b": 45, "lane-c": 10 }, 10), ctx("t10"));
      expect(await s.route(10_000)).toMatchObject({
        requests: 10_000,
        counts: { "lane-a": 4500, "lane-b": 4500, "lane-c": 1000 },
        unrouted: 0,
      });
    });

    it("routes nothing to an excluded lane and redistributes its share by weight", async () => {
      await s.cp.apply(traffic({ "lane-a": 60, "lane-b": 30, "lane-c": 10 }), ctx("t"));
      await s.cp.apply(exclude("lane-a", true), ctx("x"));
      // lane-a's 60% goes to b and c in proportion 30:10 -> 7,500 / 2,500.
      expect((await s.route(10_000)).counts).toEqual({
        "lane-a": 0,
        "lane-b": 7500,
        "lane-c": 2500,
      });
      const odd = await s.route(7);
      expect(odd.counts["lane-a"]).toBe(0);
      expect(Object.values(odd.counts).reduce((a, b) => a + b, 0)).toBe(7);
    });
  });
}
