/**
 * A kill switch outranks what releases write (docs/recovery-actions.md "Kill switches and
 * releases"), on both stores: while one is in force, a release's capability writes leave the
 * withdrawn capability out (forward and undo, which restores a baseline observed before the
 * withdraw), its recovery verification expects it absent, and the fleet's desired state (what
 * drift compares) leaves it out too. A switch in force whose capability a lane advertises again
 * (written by something else) is withdrawn again, not refused. Read at the control plane.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { loadFleet } from "../../engine/src/service/fleet-load.ts";
import {
  createRelease,
  drive,
  FakeClock,
  type Harness,
  makeHarness,
  op,
  recipe,
  runStep,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const MODEL = "summarizer-v7";

/** Two lanes advertising chat and summarize; the recipe advertises both as well. */
async function open(
  kind: "sqlite" | "postgres",
): Promise<{ h: Harness; r: ReturnType<typeof recipe> }> {
  const base = recipe(2, { policy: { rerun_window_minutes: 0 } });
  const r = {
    ...base,
    lanes: (base.lanes ?? []).map((l) => ({ ...l, capabilities: ["chat", "summarize"] })),
  };
  const clock = new FakeClock();
  const cp = new MemoryControlPlane({ model: MODEL, now: () => clock.now() });
  cp.seed(
    (r.lanes ?? []).map((l, i) => ({
      id: l.id,
      weight: i === 0 ? 100 : 0,
      capabilities: ["chat", "summarize"],
      advertised: true,
      excluded: false,
    })),
  );
  return { h: await makeHarness({ kind, clock, cp }), r };
}

const caps = (h: Harness) =>
  Object.fromEntries(["lane-a", "lane-b"].map((id) => [id, h.cp.lane(id)?.capabilities ?? null]));

async function withdrawChat(h: Harness) {
  const res = await op(h, "POST", `/v1/models/${MODEL}/kill-switch`, {
    capability: "chat",
    reason: "chat answers leak PII",
    actor: "dana",
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { kill_switch: { actions: { verified: boolean }[] } };
  expect(body.kill_switch.actions.at(-1)?.verified).toBe(true);
}

describe.each(STORE_KINDS)("kill switches and releases on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it.skipIf(skip)(
    "a release started after a withdraw never advertises the withdrawn capability, and succeeds",
    async () => {
      const o = await open(kind);
      h = o.h;
      await withdrawChat(h);
      expect(caps(h)).toEqual({ "lane-a": ["summarize"], "lane-b": ["summarize"] });
      const id = await createRelease(h, o.r);
      const seen = new Set<string>();
      await drive(
        h,
        () => "pass",
        400,
        () => {
          for (const c of Object.values(caps(h as Harness))) for (const x of c ?? []) seen.add(x);
        },
      );
      expect((await h.store.getRelease(id))?.state).toBe("succeeded");
      expect(seen.has("chat")).toBe(false);
      expect(caps(h)).toEqual({ "lane-a": ["summarize"], "lane-b": ["summarize"] });
      // The fleet (what drift compares) desires the lanes without chat: no difference.
      const fleet = await loadFleet(h.engine.service, h.cp, MODEL);
      const lanes = fleet.models.find((m) => m.model === MODEL)?.lanes ?? [];
      expect(lanes.map((l) => [l.id, l.desired?.capabilities, l.differs])).toEqual([
        ["lane-a", ["summarize"], []],
        ["lane-b", ["summarize"], []],
      ]);
    },
  );

  it.skipIf(skip)(
    "an undo of a release started before the withdraw restores its baseline without the withdrawn capability, and its verification passes",
    async () => {
      const o = await open(kind);
      h = o.h;
      const id = await createRelease(h, o.r);
      // Lane a is deployed and advertised; lane b's deploy is held while chat is withdrawn.
      const isB = (p: DispatchPayload) =>
        p.tool === "attach-queue-lane" &&
        (p.args as { lane?: { id?: string } }).lane?.id === "lane-b";
      let held: DispatchPayload | null = null;
      await drive(
        h,
        (p) => {
          if (!isB(p)) return "pass";
          held = p;
          return "skip";
        },
        400,
        undefined,
        () => held !== null,
      );
      expect(held).not.toBeNull();
      expect(caps(h)["lane-b"]).toEqual(["chat", "summarize"]);
      await withdrawChat(h);
      await runStep(h, held as unknown as DispatchPayload, "fail");
      await drive(h);
      const release = await h.store.getRelease(id);
      expect(release?.state).toBe("rolled_back");
      expect(caps(h)).toEqual({ "lane-a": ["summarize"], "lane-b": ["summarize"] });
    },
  );

  it.skipIf(skip)(
    "a withdraw of a switch in force whose capability a lane advertises again writes it off again",
    async () => {
      const o = await open(kind);
      h = o.h;
      await withdrawChat(h);
      // Something outside Baton gives lane-a chat back.
      h.cp.core.seed([
        {
          id: "lane-a",
          model: MODEL,
          weight: 100,
          capabilities: ["chat", "summarize"],
          advertised: true,
        },
        { id: "lane-b", model: MODEL, weight: 0, capabilities: ["summarize"], advertised: true },
      ]);
      const again = await op(h, "POST", `/v1/models/${MODEL}/kill-switch`, {
        capability: "chat",
        reason: "advertised again",
        actor: "dana",
      });
      expect(again.status).toBe(200);
      const body = (await again.json()) as {
        kill_switch: { id: string; actions: { generation: number; verified: boolean }[] };
      };
      expect(body.kill_switch.id).toBe("ks1");
      expect(body.kill_switch.actions.map((a) => [a.generation, a.verified])).toEqual([
        [1, true],
        [2, true],
      ]);
      expect(caps(h)).toEqual({ "lane-a": ["summarize"], "lane-b": ["summarize"] });
      // With nothing left to withdraw, a third is refused naming the restore.
      const third = await op(h, "POST", `/v1/models/${MODEL}/kill-switch`, {
        capability: "chat",
        reason: "again",
        actor: "dana",
      });
      expect(third.status).toBe(409);
      expect(await third.text()).toContain("--restore");
    },
  );
});
