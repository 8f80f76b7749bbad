/**
 * F18: the stop condition holds for the whole release (docs/gate.md "The stop condition"), on
 * both stores, with the embedded metrics source reading the reference router's traffic
 * generator over the control-plane double and a fake clock. The candidate turns bad (50% of its
 * requests fail) while the release is paused at an inconclusive gate, held for a manual
 * promotion, and baking after its last wave: each time the next evaluation, at most one
 * interval later, breaches the stop condition and the release compensates; asserted on the
 * control plane's weights (back to the baseline) and the lanes the router sends the candidate's
 * traffic to, not only on the engine's records. With `on_breach: hold` the release is held
 * instead, its weights unchanged.
 */
import { expect, it } from "vitest";
import { type RecordJson, releaseSummary } from "../../engine/src/cli/output.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  compensationReason,
  gatedRecipe,
  IMAGE_UNDER_TEST as IMAGE,
  MODEL,
  type Rig,
  run,
  start,
} from "../support/gate-rig.ts";
import { PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import { op, pumpOnce } from "./service-harness.ts";
import { describeEachRig } from "./store-suites.ts";

const INTERVAL_MS = 5000;
const BASELINE = { "lane-a": 34, "lane-b": 33, "lane-c": 33 };
/** Units the router draws per second of the fake clock (as the rig's `run` does). */
const UNITS_PER_S = 200;

/** The gated recipe with a stop condition on the candidate's error rate. */
function recipeWith(over: Partial<RecipeInput> = {}, stop: Record<string, unknown> = {}) {
  const r = gatedRecipe();
  return {
    ...r,
    ...over,
    stop_condition: {
      metrics: [
        {
          name: "error-rate",
          kind: "ratio",
          better: "lower",
          margin: { absolute: 0.02 },
          slo: 0.1,
        },
      ],
      ...stop,
    },
  } as RecipeInput;
}

/**
 * The candidate turns bad right after an evaluation of the stop condition; then the clock moves
 * on to each due outbox row (stop checks included) for `ms`, the router sending units in
 * proportion, every step passing. Returns when it turned bad. Bounded.
 */
async function turnBadAndWatch(g: Rig, ms: number): Promise<number> {
  // In step with the watch: its next evaluation runs first (no new traffic), then the candidate
  // turns bad, so the evaluation after it, one interval later, has one interval of bad traffic.
  const watch = (await g.h.store.pendingOutbox())
    .filter((r) => r.effect.type === "stop_check")
    .map((r) => r.due_at)
    .sort((a, b) => a - b)[0];
  if (watch === undefined) throw new Error("[test] the release is not watched");
  g.h.clock.t = Math.max(g.h.clock.t, watch);
  await pumpOnce(g.h, runner(g));
  const t0 = g.h.clock.now();
  g.traffic.setProfile(IMAGE, { errorRate: 0.5 });
  let last = t0;
  for (let round = 0; round < 200; round++) {
    const due = (await g.h.store.pendingOutbox())
      .filter((r) => r.effect.type !== "deadline")
      .map((r) => r.due_at)
      .sort((a, b) => a - b)[0];
    if (due === undefined || due > t0 + ms) break;
    g.h.clock.t = Math.max(g.h.clock.t, due);
    const units = Math.floor(((g.h.clock.now() - last) / 1000) * UNITS_PER_S);
    last = g.h.clock.now();
    if (units > 0) g.traffic.send(units);
    await pumpOnce(g.h, runner(g));
  }
  return t0;
}

/** The runner as the rig's `run` plays it: every step passes, a restore puts the old image back. */
const runner = (g: Rig) => (p: DispatchPayload) => {
  const lane = (p.args as { lane?: { id?: string } }).lane?.id;
  if (lane && p.tool === "restore-queue-lane") g.traffic.setLaneImage(lane, PREVIOUS_IMAGE);
  return "pass" as const;
};

/** The stop condition's breach in the history: its time and message. */
async function breach(g: Rig, id: string) {
  const line = (await g.h.store.getHistory(id)).find((x) =>
    /stop condition breached at|held by its stop condition/.test(x.message),
  );
  return line ? { at: line.at, message: line.message } : null;
}

/** Units the router sent the candidate image on each lane so far. */
const candidateUnits = (g: Rig) =>
  Object.fromEntries(
    g.traffic
      .snapshot()
      .filter((c) => c.image === IMAGE)
      .map((c) => [c.lane, c.units]),
  );

async function expectCompensatedWithinOneInterval(g: Rig, id: string, t0: number) {
  const b = await breach(g, id);
  expect(b, "a stop-condition breach in the history").not.toBeNull();
  expect(b!.at).toBeLessThanOrEqual(t0 + INTERVAL_MS);
  // The reason names the metric, the value and the bound.
  expect(b!.message).toMatch(
    /stop condition breached: error-rate: candidate \d+\.\d+%(, SLO ≤ 10\.00%: breached| vs control \d+\.\d+%, allowed \+2\.0 points: worse)/,
  );
  expect(await compensationReason(g.h, id)).toMatch(/stop condition breached: error-rate/);
  await run(g);
  const release = await g.h.store.getRelease(id);
  expect(release?.state).toBe("rolled_back");
  expect(release?.stop ?? null).toBeNull();
  // The environment: the baseline's weights at the control plane, and after them the router
  // sends the candidate nothing more.
  expect(g.h.cp.weights(MODEL)).toEqual(BASELINE);
  const before = candidateUnits(g);
  g.traffic.send(2000);
  expect(candidateUnits(g)).toEqual(before);
  // The record keeps the decision with its reason.
  const rec = (await (await op(g.h, "GET", `/v1/releases/${id}/record`)).json()) as {
    decisions: { kind: string; why: string; automatic: boolean }[];
  };
  expect(
    rec.decisions.some(
      (d) => d.kind === "stop_check" && d.automatic && /error-rate: candidate/.test(d.why),
    ),
  ).toBe(true);
}

describeEachRig("the stop condition on %s", ({ skip, open }) => {
  it.skipIf(skip)(
    "paused at an inconclusive gate: a breach compensates within one interval",
    async () => {
      const g = await open();
      const id = await start(g.h, recipeWith());
      await run(g, { send: false }); // no traffic: the gate ends inconclusive, paused
      let release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("paused");
      expect(release?.gate?.decision).toBe("inconclusive");
      expect(release?.stop).toMatchObject({ wave: 0 });
      expect(g.h.cp.weights(MODEL)).toEqual({ "lane-a": 20, "lane-b": 40, "lane-c": 40 });
      const t0 = await turnBadAndWatch(g, INTERVAL_MS);
      release = await g.h.store.getRelease(id);
      expect(["compensating", "rolled_back"]).toContain(release?.state);
      await expectCompensatedWithinOneInterval(g, id, t0);
    },
  );

  it.skipIf(skip)(
    "held for a manual promotion: a breach compensates within one interval",
    async () => {
      const g = await open();
      const r = recipeWith();
      r.rollout.waves[0] = { ...r.rollout.waves[0]!, promotion: "manual" };
      const id = await start(g.h, r);
      await run(g);
      let release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("paused");
      expect(release?.hold?.kind).toBe("promotion");
      expect(g.h.cp.weights(MODEL)).toEqual({ "lane-a": 20, "lane-b": 40, "lane-c": 40 });
      const t0 = await turnBadAndWatch(g, INTERVAL_MS);
      release = await g.h.store.getRelease(id);
      expect(["compensating", "rolled_back"]).toContain(release?.state);
      await expectCompensatedWithinOneInterval(g, id, t0);
    },
  );

  it.skipIf(skip)(
    "baking after the last wave: a breach of the SLO compensates within one interval",
    async () => {
      const g = await open();
      const id = await start(g.h, recipeWith({}, { bake_ms: 60_000, interval_ms: INTERVAL_MS }));
      // Every step done and the candidate on every lane: the release bakes, running.
      await run(g, { until: async () => (await g.h.store.getRelease(id))?.stop?.final_bake });
      let release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("running");
      expect(release?.stop?.final_bake?.done).toBe(false);
      expect(g.h.cp.weights(MODEL)).toEqual({ "lane-a": 34, "lane-b": 33, "lane-c": 33 });
      expect(Object.keys(candidateUnits(g)).sort()).toEqual(["lane-a", "lane-b", "lane-c"]);
      const t0 = await turnBadAndWatch(g, INTERVAL_MS);
      release = await g.h.store.getRelease(id);
      expect(["compensating", "rolled_back"]).toContain(release?.state);
      const b = await breach(g, id);
      // No control serves beside a 100% candidate: the SLO decides.
      expect(b?.message).toMatch(/error-rate: candidate \d+\.\d+%, SLO ≤ 10\.00%: breached/);
      await expectCompensatedWithinOneInterval(g, id, t0);
    },
  );

  it.skipIf(skip)("a bake after the last wave with no breach ends succeeded", async () => {
    const g = await open();
    const id = await start(g.h, recipeWith({}, { bake_ms: 30_000 }));
    await run(g);
    const release = await g.h.store.getRelease(id);
    expect(release?.state).toBe("succeeded");
    const history = (await g.h.store.getHistory(id)).map((x) => x.message);
    const begun = history.findIndex((m) => /baking 30 s after the last wave/.test(m));
    const baked = history.findIndex((m) => /baked 30 s after the last wave with no breach/.test(m));
    expect(begun).toBeGreaterThan(-1);
    expect(baked).toBeGreaterThan(begun);
  });

  it.skipIf(skip)(
    "on_breach: hold pauses the release for an operator; the weights stay",
    async () => {
      const g = await open();
      const r = recipeWith({}, { on_breach: "hold" });
      r.rollout.waves[0] = { ...r.rollout.waves[0]!, promotion: "manual" };
      const id = await start(g.h, r);
      await run(g);
      const t0 = await turnBadAndWatch(g, INTERVAL_MS);
      const release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("paused");
      expect(release?.hold).toMatchObject({ kind: "pause", actor: "stop condition" });
      expect(release?.reason).toMatch(
        /^paused by stop condition: stop condition breached: error-rate: .*; resume \(baton resume r\d+\) once it is understood, or abort/,
      );
      const b = await breach(g, id);
      expect(b!.at).toBeLessThanOrEqual(t0 + INTERVAL_MS);
      expect(g.h.cp.weights(MODEL)).toEqual({ "lane-a": 20, "lane-b": 40, "lane-c": 40 });
      // baton status says where the watch stands.
      const status = (await (await op(g.h, "GET", `/v1/releases/${id}`)).json()) as RecordJson;
      expect(releaseSummary(status, g.h.clock.now()).join("\n")).toMatch(
        /stop condition \(counting from wave 1 \(20%\)'s exposure\): BREACHED after \d+ evaluations: stop condition breached: error-rate: candidate/,
      );
    },
  );
});
