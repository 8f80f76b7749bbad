/**
 * An operator's pause taken while a wave's gate is still deciding (docs/lifecycle.md "Pause
 * and resume"), on both stores, with the embedded metrics source and a fake clock: the pause
 * survives the gate's decision of any kind. Inconclusive: the release stays paused with the
 * operator's hold AND the inconclusive gate, its reason naming both; `promote` accepts the
 * gate's risk but starts nothing until `resume`, and `resume` lifts only the pause (the
 * release then waits at the inconclusive gate for promote). Fail: compensates as without the
 * pause. Pass: stays paused until resume. Asserted on the control plane's weights and the
 * runner's dispatches, not only on Baton's tables.
 */
import { expect, it } from "vitest";
import {
  gatedRecipe,
  IMAGE_UNDER_TEST as IMAGE,
  MODEL,
  type Rig,
  run,
  start,
} from "../support/gate-rig.ts";
import { type Harness, op, pumpOnce } from "./service-harness.ts";
import { describeEachRig } from "./store-suites.ts";

type Full = {
  state: string;
  reason: string | null;
  hold: { kind: string; actor: string; reason: string } | null;
  gate: { wave: number; decision: string } | null;
  available_actions: { action: string; effect: string }[];
  history: { kind: string; outcome: string; message: string }[];
};
const full = async (h: Harness, id: string) =>
  (await (await op(h, "GET", `/v1/releases/${id}`)).json()) as Full;
const errorOf = async (res: Response) =>
  ((await res.json()) as { error: { code: string; message: string } }).error;

/** Pumps (bounded, clock still) until the release is held at the gate of `wave`, deciding. */
async function untilGate(g: Rig, id: string, wave: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const r = await g.h.store.getRelease(id);
    if (r?.gate?.wave === wave && r.gate.decision !== "inconclusive") return;
    // As `run` does: a lane's image becomes the candidate when its attach step runs.
    await pumpOnce(g.h, (p) => {
      const lane = (p.args as { lane?: { id?: string } }).lane?.id;
      if (lane && p.tool === "attach-queue-lane") g.traffic.setLaneImage(lane, IMAGE);
      return "pass";
    });
  }
  throw new Error(`release ${id} never reached the gate of wave ${wave + 1}`);
}

/** Lanes the runner was asked to touch (dispatches so far). */
const lanesTouched = (g: Rig) =>
  new Set(
    g.h.dispatcher.accepted
      .map((p) => (p.args as { lane?: { id?: string } }).lane?.id)
      .filter((l): l is string => typeof l === "string"),
  );

const PAUSE = { reason: "error budget burn on lane-a, investigating", actor: "mallory" };

describeEachRig("operator pause at a deciding gate on %s", ({ skip, open }) => {
  it.skipIf(skip)(
    "inconclusive keeps the operator's pause: promote starts nothing until resume",
    async () => {
      const g = await open();
      const id = await start(g.h, gatedRecipe());
      await untilGate(g, id, 0);
      const paused = await op(g.h, "POST", `/v1/releases/${id}/pause`, PAUSE);
      expect(paused.status, await paused.clone().text()).toBe(200);
      await run(g, { send: false }); // no traffic: the gate ends inconclusive at max_wait_ms
      let rec = await full(g.h, id);
      expect(rec.state).toBe("paused");
      expect(rec.gate).toMatchObject({ wave: 0, decision: "inconclusive" });
      expect(rec.hold).toMatchObject({ kind: "pause", actor: "operator:mallory" });
      expect(rec.reason).toMatch(/paused by operator:mallory: error budget burn on lane-a/);
      expect(rec.reason).toMatch(/gate of wave 1 \(20%\) is inconclusive/);
      expect(rec.available_actions.map((a) => a.action).sort()).toEqual([
        "abort",
        "promote",
        "resume",
      ]);
      const promoteEffect = rec.available_actions.find((a) => a.action === "promote")?.effect;
      expect(promoteEffect).toMatch(/stays paused .*until resume/);
      const weights = g.h.cp.weights(MODEL);
      expect([...lanesTouched(g)]).toEqual(["lane-a"]);

      // promote accepts the gate's risk; the operator's pause still holds: nothing starts.
      const promoted = await op(g.h, "POST", `/v1/releases/${id}/promote`, {
        reason: "traffic dashboard shows no regression",
        actor: "alice",
      });
      expect(promoted.status, await promoted.clone().text()).toBe(200);
      await run(g);
      rec = await full(g.h, id);
      expect(rec.state).toBe("paused");
      expect(rec.hold).toMatchObject({ kind: "pause", actor: "operator:mallory" });
      expect(rec.gate).toBeNull();
      expect(rec.reason).toMatch(/paused by operator:mallory: .*nothing new starts until resume/);
      expect(rec.available_actions.map((a) => a.action).sort()).toEqual(["abort", "resume"]);
      // The environment: wave 1's weights, and lane-b was never touched.
      expect(g.h.cp.weights(MODEL)).toEqual(weights);
      expect([...lanesTouched(g)]).toEqual(["lane-a"]);
      expect(
        rec.history.some(
          (e) =>
            e.kind === "promote" &&
            /promoted by operator:alice.*stays paused \(paused by operator:mallory/.test(e.message),
        ),
      ).toBe(true);

      const resumed = await op(g.h, "POST", `/v1/releases/${id}/resume`, { actor: "mallory" });
      expect(resumed.status, await resumed.clone().text()).toBe(200);
      await run(g);
      expect((await full(g.h, id)).state).toBe("succeeded");
      expect(lanesTouched(g)).toEqual(new Set(["lane-a", "lane-b", "lane-c"]));
    },
  );

  it.skipIf(skip)(
    "inconclusive under a pause: resume first lifts only the pause, the gate still waits for promote",
    async () => {
      const g = await open();
      const id = await start(g.h, gatedRecipe());
      await untilGate(g, id, 0);
      expect((await op(g.h, "POST", `/v1/releases/${id}/pause`, PAUSE)).status).toBe(200);
      await run(g, { send: false });
      const resumed = await op(g.h, "POST", `/v1/releases/${id}/resume`, { actor: "mallory" });
      expect(resumed.status, await resumed.clone().text()).toBe(200);
      await run(g, { send: false });
      let rec = await full(g.h, id);
      expect(rec.state).toBe("paused");
      expect(rec.hold).toBeNull();
      expect(rec.gate).toMatchObject({ wave: 0, decision: "inconclusive" });
      expect(rec.reason).toMatch(/^gate of wave 1 \(20%\) is inconclusive/);
      expect(rec.available_actions.map((a) => a.action).sort()).toEqual(["abort", "promote"]);
      expect([...lanesTouched(g)]).toEqual(["lane-a"]);
      const again = await op(g.h, "POST", `/v1/releases/${id}/resume`, {});
      expect(again.status).toBe(409);
      expect((await errorOf(again)).message).toMatch(/inconclusive; promote it/);
      const promoted = await op(g.h, "POST", `/v1/releases/${id}/promote`, {
        reason: "ok",
        actor: "alice",
      });
      expect(promoted.status).toBe(200);
      await run(g);
      rec = await full(g.h, id);
      expect(rec.state).toBe("succeeded");
    },
  );

  it.skipIf(skip)("a failing gate under a pause still compensates", async () => {
    const g = await open(0.1);
    const id = await start(g.h, gatedRecipe());
    await untilGate(g, id, 0);
    expect((await op(g.h, "POST", `/v1/releases/${id}/pause`, PAUSE)).status).toBe(200);
    await run(g);
    const rec = await full(g.h, id);
    expect(rec.state).toBe("rolled_back");
    expect(rec.hold).toBeNull();
    expect(rec.history.some((e) => /gate of wave 1 \(20%\) failed/.test(e.message))).toBe(true);
    expect(g.h.cp.weights(MODEL)).toEqual({ "lane-a": 34, "lane-b": 33, "lane-c": 33 });
  });

  it.skipIf(skip)("a passing gate under a pause stays paused until resume", async () => {
    const g = await open();
    const id = await start(g.h, gatedRecipe());
    await untilGate(g, id, 0);
    expect((await op(g.h, "POST", `/v1/releases/${id}/pause`, PAUSE)).status).toBe(200);
    await run(g);
    const rec = await full(g.h, id);
    expect(rec.state).toBe("paused");
    expect(rec.gate).toBeNull();
    expect(rec.hold).toMatchObject({ kind: "pause", actor: "operator:mallory" });
    expect([...lanesTouched(g)]).toEqual(["lane-a"]);
    const promote = await op(g.h, "POST", `/v1/releases/${id}/promote`, { reason: "x" });
    expect(promote.status).toBe(409);
    expect((await errorOf(promote)).message).toMatch(/waits for resume \(baton resume/);
  });
});
