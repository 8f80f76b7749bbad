/**
 * One release per lane (Bug: two releases of one recipe ran at once and one's compensation
 * undid the other's success), and the release uid that keeps operation keys of two engine
 * databases apart at one control plane.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { lane } from "../unit/recipe-fixture.ts";
import {
  createRelease,
  getRecord,
  type Harness,
  makeHarness,
  op,
  pump,
  recipe,
  STORE_KINDS,
  skipStore,
  stepRun,
} from "./service-harness.ts";

const open: Harness[] = [];
async function harness(o: Parameters<typeof makeHarness>[0] = {}): Promise<Harness> {
  const h = await makeHarness(o);
  open.push(h);
  return h;
}
afterEach(async () => {
  for (const h of open.splice(0).reverse()) await h.close();
});

/** Two lanes 2 and 3 (ids and hosts disjoint from `recipe(2)`'s lanes 0 and 1). */
function otherLanes(extra: Partial<RecipeInput> = {}): RecipeInput {
  return {
    ...recipe(2),
    lanes: [lane(2), lane(3)],
    rollout: {
      waves: [
        { lanes: [lane(2).id], traffic: 25 },
        { lanes: [lane(3).id], traffic: 100 },
      ],
    },
    ...extra,
  };
}

async function post(h: Harness, r: RecipeInput, hold = false) {
  const res = await op(h, "POST", `/v1/releases${hold ? "?start=false" : ""}`, r);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("start refuses a release whose lanes a release in flight owns", () => {
  it("409 naming the release in flight while it runs; nothing written for the second", async () => {
    const h = await harness();
    const first = await createRelease(h, recipe(2));
    await pump(h, 2);
    expect((await getRecord(h, first)).state).toBe("running");
    const before = await h.store.listReleases({ limit: 100 });

    const r = await post(h, recipe(2));
    expect(r.status).toBe(409);
    const err = r.body.error as { code: string; message: string };
    expect(err.code).toBe("conflict");
    expect(err.message).toBe(
      `[engine] release ${first} (model summarizer-v7, state running) still owns lanes ${lane(0).id}, ${lane(1).id}; wait for it to finish or abort it, then start again`,
    );
    // No release row, no history, no outbox row for a second release.
    expect(await h.store.listReleases({ limit: 100 })).toEqual(before);
    const next = `r${Number(first.slice(1)) + 1}`;
    expect(await h.store.getRelease(next)).toBeNull();
    expect(await h.store.getHistory(next)).toEqual([]);
    const rows = await h.store.claimDue({
      now: h.clock.now() + 86_400_000,
      limit: 1000,
      leaseMs: 1,
      owner: "test",
    });
    expect(rows.every((row) => row.release_id === first)).toBe(true);
  });

  it("refuses a lane id owned in another model too; lanes sharing a machine are allowed", async () => {
    const h = await harness();
    const first = await createRelease(h, recipe(2));
    // Another model naming lane 1's id: the control plane knows one lane by that id: refused.
    const sameId = otherLanes({ model: "other-model" });
    sameId.lanes = [lane(2), { ...lane(3), id: lane(1).id }];
    sameId.rollout = { waves: [{ lanes: [lane(2).id, lane(1).id], traffic: 100 }] };
    const refused = await post(h, sameId);
    expect(refused.status).toBe(409);
    expect((refused.body.error as { message: string }).message).toContain(
      `release ${first} (model summarizer-v7, state running) still owns lanes ${lane(1).id};`,
    );
    // Other lane ids on the same machine (host and port) as lane 1: allowed while the first runs.
    // Lanes the control plane serves for the other model (the start reads them first).
    h.cp.seed([
      { id: lane(2).id, model: "other-model", weight: 50 },
      { id: lane(3).id, model: "other-model", weight: 50 },
    ]);
    const sameHost = otherLanes({ model: "other-model" });
    sameHost.lanes = [lane(2), { ...lane(3), host: lane(1).host, port: lane(1).port }];
    const ok = await post(h, sameHost, true);
    expect(ok.status).toBe(201);
  });

  it("a held (pending) release owns its lanes; once it is aborted (terminal) the next starts", async () => {
    const h = await harness();
    const held = await post(h, recipe(2), true);
    expect(held.status).toBe(201);
    const id = held.body.id as string;
    const refused = await post(h, recipe(2));
    expect(refused.status).toBe(409);
    expect((refused.body.error as { message: string }).message).toContain(`state pending`);
    const abort = await op(h, "POST", `/v1/releases/${id}/abort`, { reason: "test" });
    expect(abort.status).toBeLessThan(300);
    expect((await getRecord(h, id)).state).toBe("aborted");
    expect((await post(h, recipe(2))).status).toBe(201);
  });
});

describe.each(STORE_KINDS)(
  "two engines on one %s database start overlapping releases at once",
  (kind) => {
    it.skipIf(skipStore(kind))(
      "exactly one is accepted; the other is 409 naming the owner and its lanes, nothing written",
      async () => {
        const a = await harness({ kind });
        // A second engine on the same store (its own service, its own start serialisation).
        const b = await makeHarness({ store: a.store, cp: a.cp, clock: a.clock });
        open.unshift({ ...b, close: () => b.close(true) });
        for (let round = 0; round < 4; round++) {
          // Held (pending) releases in the first rounds, so an abort frees the lanes at once;
          // started (running) ones in the last.
          const hold = round < 3;
          const [x, y] = await Promise.all([post(a, recipe(2), hold), post(b, recipe(2), hold)]);
          const results = [x, y];
          const won = results.filter((r) => r.status === 201);
          const lost = results.filter((r) => r.status !== 201);
          expect(won, JSON.stringify(results)).toHaveLength(1);
          expect(lost[0]?.status).toBe(409);
          const owner = won[0]?.body.id as string;
          expect((lost[0]?.body.error as { message: string } | undefined)?.message).toMatch(
            new RegExp(
              `^\\[engine\\] release ${owner} \\(model summarizer-v7, state (running|pending)\\) still owns lanes ${lane(0).id}, ${lane(1).id}; wait for it to finish or abort it, then start again$`,
            ),
          );
          const inFlight = (await a.store.listReleases({ limit: 100 })).filter(
            (r) => r.state !== "aborted",
          );
          expect(inFlight.map((r) => r.id)).toEqual([owner]);
          expect(await a.store.laneClaims([lane(0).id, lane(1).id])).toEqual([
            { lane_id: lane(0).id, release_id: owner },
            { lane_id: lane(1).id, release_id: owner },
          ]);
          if (!hold) break;
          const abort = await op(a, "POST", `/v1/releases/${owner}/abort`, {
            reason: "next round",
          });
          expect(abort.status).toBeLessThan(300);
        }
      },
    );
  },
);

describe("two engine databases at one control plane", () => {
  it("the second database's r1 reusing a key of the first's r1 fails its step, never succeeds", async () => {
    const a = await harness();
    const b = await harness({ cp: a.cp });
    const ra = await createRelease(a, recipe(2));
    await pump(a, 1);
    const recA = await getRecord(a, ra);
    expect(stepRun(recA, 0)?.state).toBe("succeeded");
    const key = a.cp.calls.find((c) => c.method === "apply")?.ctx.operation_key as string;
    expect(key).toMatch(/^r1:0:fwd:/);
    // Put the lane back by hand so the second release's write would matter.
    a.cp.seed([{ id: lane(0).id, excluded: false, weight: a.cp.weights()[lane(0).id] ?? 0 }]);

    const rb = await createRelease(b, recipe(2));
    expect(rb).toBe(ra); // both databases number from r1
    // Policy retries re-send the same key (refused each time); bounded rounds with time moving.
    for (let i = 0; i < 20 && stepRun(await getRecord(b, rb), 0)?.state !== "failed"; i++) {
      b.clock.advance(60_000);
      await pump(b, 1);
    }
    const recB = await getRecord(b, rb);
    const sr = stepRun(recB, 0);
    expect(sr?.state).toBe("failed");
    const second = a.cp.calls.filter((c) => c.method === "apply" && c.ctx.operation_key === key);
    expect(second.length).toBeGreaterThanOrEqual(2);
    expect(second[1]?.ctx.release_uid).not.toBe(second[0]?.ctx.release_uid);
    expect(second[1]?.result).toMatchObject({ outcome: "failed", status: 422 });
    expect(JSON.stringify(recB.history)).toContain(
      "two engine databases are writing to one control plane",
    );
    expect(a.cp.applications(key)).toBe(1);
    expect(a.cp.lane(lane(0).id)?.excluded).toBe(false);
  });
});
