/**
 * `pause` and `resume` end to end on the embedded stack, on both stores (docs/lifecycle.md
 * "Pause and resume"), where a pause is hardest:
 * - during a gate's wait (wave 1 baking, the router serving its traffic): the gate keeps
 *   deciding and passes, but the release stays paused: no new step run starts, the control
 *   plane gets no new write and lane-b keeps the previous image; resume runs on to success;
 * - inside a parallel wave (`max_unavailable: 2`, two lanes out of service at once): the step
 *   runs in flight settle, the lanes out of service do not grow, no new step run starts and
 *   the wave's third lane is untouched; resume runs on to success. Replayed from the control
 *   plane's own history, no more than two lanes were ever out of service at once.
 */
import { afterEach, expect, it } from "vitest";
import { loadRecipe } from "../../engine/src/demo/stack.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import {
  type CpChange,
  cpHistory,
  cpTraffic,
  describeStore,
  type InProcess,
  postJson as post,
  type RecordJson,
  reconcilerRounds,
  type StoreKind,
  servedImage,
  settled,
  startInProcess,
  summarize,
  twoLaneRecipe,
  waitUntil,
} from "../support/e2e-harness.ts";

const T = 300_000;

/** Most lanes the control plane held out of service at once, replayed from its history. */
function maxExcluded(h: CpChange[]): number {
  const out = new Set<string>();
  let max = 0;
  for (const c of h) {
    if (c.kind !== "set_marker" || !c.lane) continue;
    if ((c.after as { excluded?: boolean }).excluded) out.add(c.lane);
    else out.delete(c.lane);
    max = Math.max(max, out.size);
  }
  return max;
}

/**
 * While paused and settled: nothing moves over `rounds` reconciler passes, on the engine or the
 * control plane.
 */
async function nothingMoves(e: InProcess, id: string, rounds: number): Promise<RecordJson> {
  const r0 = await e.record(id);
  const writes = (await cpHistory(e, id)).length;
  const cp = await cpTraffic(e, e.manifest.model);
  await reconcilerRounds(e, rounds);
  const r1 = await e.record(id);
  expect(r1.state, summarize(r1)).toBe("paused");
  expect(r1.step_runs.length).toBe(r0.step_runs.length);
  expect((await cpHistory(e, id)).length).toBe(writes);
  expect(await cpTraffic(e, e.manifest.model)).toEqual(cp);
  return r1;
}

async function pause(e: InProcess, id: string, reason: string) {
  const res = await post(e, `/v1/releases/${id}/pause`, { reason, actor: "alice" });
  expect(res.status, await res.clone().text()).toBe(200);
}

async function resumeToEnd(e: InProcess, id: string): Promise<RecordJson> {
  const res = await post(e, `/v1/releases/${id}/resume`, {});
  expect(res.status, await res.clone().text()).toBe(200);
  return e.waitFor(id, (x) => !["running", "paused", "pending"].includes(x.state), `${id} ends`, T);
}

/** The example's three lanes plus lane-d; lane-a alone, then b, c, d together, two at a time. */
function parallelRecipe(): RecipeInput {
  const r = loadRecipe();
  const lanes = r.lanes ?? [];
  const { policy: _drop, ...rest } = r;
  return {
    ...rest,
    lanes: [...lanes, { ...(lanes[2] as (typeof lanes)[number]), id: "lane-d" }],
    rollout: {
      waves: [
        { lanes: ["lane-a"], traffic: 10 },
        { lanes: ["lane-b", "lane-c", "lane-d"], traffic: 100, max_unavailable: 2 },
      ],
    },
  };
}

for (const kind of ["sqlite", "postgres"] as StoreKind[]) {
  describeStore(kind, `pause and resume on the embedded stack on ${kind}`, () => {
    let env: InProcess | null = null;
    afterEach(async () => {
      env?.stack.traffic.stop();
      await env?.close();
      env = null;
    });

    it(
      "paused while wave 1's gate bakes: the gate passes, nothing new starts until resume",
      async () => {
        const recipe: RecipeInput = {
          ...twoLaneRecipe(),
          analysis: {
            assignment_unit: "request",
            min_samples: 200,
            bake_ms: 8000,
            interval_ms: 1000,
            max_wait_ms: 120_000,
            metrics: [
              { name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.05 } },
            ],
          },
        } as RecipeInput;
        const e = await startInProcess(kind, { recipe });
        env = e;
        const m = e.manifest;
        const [, b] = m.lanes.map((l) => l.id) as [string, string];
        e.stack.traffic.start(200, 100);
        const id = await e.startRelease();
        const svc = e.stack.engine.service;
        await waitUntil(
          async () => (await svc.get(id)).release,
          (r) => (r.gate?.wave === 0 && r.gate.decision !== "pass") || r.state !== "running",
          `${id} to wait at wave 1's gate`,
          T,
          (r) => `${r.state} cursor ${r.cursor} gate ${JSON.stringify(r.gate)}`,
        );
        await pause(e, id, "checking an alert during the bake");
        let r = await e.record(id);
        expect(r.state, summarize(r)).toBe("paused");
        expect(r.history.at(-1)?.message).toMatch(/the gate of wave 1 keeps deciding/);
        // The gate keeps deciding while paused, and passes; the release stays paused.
        r = await e.waitFor(
          id,
          (x) =>
            x.history.some((h) => /gate of wave 1 \(50%\) passed/.test(h.message)) ||
            x.state !== "paused",
          `${id}'s gate to pass while paused`,
          T,
        );
        expect(r.state, summarize(r)).toBe("paused");
        expect(r.history.some((h) => /stays paused .*resume \(baton resume/.test(h.message))).toBe(
          true,
        );
        expect(settled(r)).toBe(true);
        await nothingMoves(e, id, 10);
        // Wave 2 never began: lane-b was never taken out of service and runs the previous image.
        const writes = await cpHistory(e, id);
        expect(writes.some((c) => c.kind === "set_marker" && c.lane === b)).toBe(false);
        expect(await servedImage(e, b)).toBe(m.previous_image);

        const end = await resumeToEnd(e, id);
        expect(end.state, summarize(end)).toBe("succeeded");
        expect(await servedImage(e, b)).toBe(m.image);
      },
      3 * T,
    );

    it(
      "paused with two lanes of a parallel wave in flight: they settle, nothing new starts, max_unavailable holds",
      async () => {
        // Four lanes' containers start at once on a loaded machine: 10 s for each health URL.
        const e = await startInProcess(kind, { recipe: parallelRecipe(), healthTimeoutS: 10 });
        env = e;
        const m = e.manifest;
        expect(m.waves[1]?.max_unavailable).toBe(2);
        const wave2 = ["lane-b", "lane-c", "lane-d"];
        const id = await e.startRelease();
        const out = await waitUntil(
          async () => (await cpTraffic(e, m.model)).excluded,
          (x) => x.filter((l) => wave2.includes(l)).length >= 2,
          "two lanes of wave 2 out of service at once",
          T,
        );
        await pause(e, id, "change freeze");
        const pausedAt = await e.record(id);
        const flying = (
          pausedAt.history.findLast((h) => h.kind === "pause")?.data as { in_flight?: string[] }
        )?.in_flight;
        expect(flying?.length, JSON.stringify(pausedAt.history.at(-1))).toBeGreaterThan(0);
        // The step runs in flight settle; then nothing moves.
        const r = await e.waitFor(
          id,
          (x) => settled(x) || x.state !== "paused",
          `${id}'s step runs in flight to settle`,
          T,
        );
        expect(r.state, summarize(r)).toBe("paused");
        for (const sr of flying ?? []) {
          expect(r.step_runs.find((s) => s.id === sr)?.state).toBe("succeeded");
        }
        const held = await nothingMoves(e, id, 10);
        const cp = await cpTraffic(e, m.model);
        expect(cp.excluded.length).toBeLessThanOrEqual(2);
        // The lane of wave 2 that had not begun when the pause came is still untouched.
        const untouched = wave2.filter((l) => !out.includes(l));
        expect(untouched.length).toBe(1);
        const writes = await cpHistory(e, id);
        for (const l of untouched) {
          expect(writes.some((c) => c.kind === "set_marker" && c.lane === l)).toBe(false);
          expect(await servedImage(e, l)).toBe(m.previous_image);
        }
        expect(held.step_runs.some((s) => s.state === "failed")).toBe(false);

        const end = await resumeToEnd(e, id);
        expect(end.state, summarize(end)).toBe("succeeded");
        for (const l of m.lanes) expect(await servedImage(e, l.id)).toBe(m.image);
        const all = await cpHistory(e, id);
        expect(maxExcluded(all)).toBe(2);
        expect((await cpTraffic(e, m.model)).excluded).toEqual([]);
      },
      3 * T,
    );
  });
}
