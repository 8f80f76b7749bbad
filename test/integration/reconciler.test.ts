/**
 * The reconciler and the commit protocol: a crash between commit and effect (and at the other
 * fault points) is finished by a new engine on the same SQLite file with each operation key
 * applied once at the receivers; a stale claim's outcome is dropped; rule 6 (callbacks keyed
 * by step run, run id and attempt) and rule 7 (every effect carries release id + generation).
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import { FaultCrash, setFault, setFaultAction } from "../../engine/src/faults.ts";
import {
  callbackBody,
  callbackUrl,
  createRelease,
  drive,
  FakeClock,
  firstDispatch,
  getRecord,
  type Harness,
  makeHarness,
  op,
  preflightBody,
  preflightUrl,
  pump,
  recipe,
  seedControlPlane,
  signedPost,
} from "./service-harness.ts";

const open: Harness[] = [];
afterEach(async () => {
  setFault(undefined);
  setFaultAction("kill");
  for (const x of open.splice(0)) await x.close().catch(() => {});
});

async function harness(o: Parameters<typeof makeHarness>[0] = {}) {
  const x = await makeHarness(o);
  open.push(x);
  return x;
}

describe("crash between commit and effect", () => {
  const points = [
    "after_commit_before_effect@effect=dispatch",
    "after_commit_before_effect@effect=control_plane",
    "after_effect_before_outcome@effect=dispatch",
    "after_effect_before_outcome@effect=control_plane",
  ];
  it.each(points)(
    "%s: a new engine on the same SQLite file finishes the release",
    async (point) => {
      const clock = new FakeClock();
      const dispatcher = new MemoryDispatcher();
      const cp = new MemoryControlPlane({ model: "summarizer-v7", now: () => clock.now() });
      seedControlPlane(cp, recipe(2));
      const first = await makeHarness({ clock, dispatcher, cp });
      const id = await createRelease(first, recipe(2));
      setFaultAction("throw");
      setFault(point);
      let crashed = false;
      for (let i = 0; i < 20 && !crashed; i++) {
        try {
          await pump(first, 1);
        } catch (e) {
          expect(e).toBeInstanceOf(FaultCrash);
          crashed = true;
        }
      }
      expect(crashed).toBe(true);
      setFault(null);
      // The crashed process's store handle is simply dropped (no clean shutdown of the engine).
      await first.store.close();
      const second = await harness({ dir: first.dir, clock, dispatcher, cp });
      clock.advance(61_000); // the dead engine's claim lease (60 s) runs out
      await drive(second);
      const rec = await getRecord(second, id);
      expect(rec.state).toBe("succeeded");
      for (const [key, n] of Object.entries(cp.applicationCounts())) expect(n, key).toBe(1);
      // A dispatch re-sent after a crash is a duplicate delivery: the same key, and only one
      // workflow run was let through (the second got 409 at preflight).
      for (const sr of rec.step_runs.filter((s) => s.direction === "fwd")) {
        expect(sr.attempts.length, sr.id).toBeLessThanOrEqual(1);
      }
      const dup = [...dispatcher.acceptedByKey.values()].filter((n) => n > 1).length;
      expect(dup).toBe(point === "after_effect_before_outcome@effect=dispatch" ? 1 : 0);
    },
  );

  it.each(["in_callback_before_commit", "after_callback_commit"])(
    "%s: the runner's retried callback is applied once",
    async (point) => {
      const h = await harness({ seed: recipe(2) });
      const id = await createRelease(h, recipe(2));
      const p = await firstDispatch(h);
      const run = { run_id: "31337", run_attempt: 1 };
      expect((await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run))).status).toBe(
        200,
      );
      setFaultAction("throw");
      setFault(`${point}@step_run_id=${p.step_run_id}`);
      const body = callbackBody(p.step_run_id, run);
      const crashedAnswer = await signedPost(h, callbackUrl(p.step_run_id), body);
      expect(crashedAnswer.status).toBe(500);
      setFault(null);
      const retried = await signedPost(h, callbackUrl(p.step_run_id), body);
      expect(retried.status).toBe(200);
      const replay = ((await retried.json()) as { replay: boolean }).replay;
      expect(replay).toBe(point === "after_callback_commit");
      const rec = await getRecord(h, id);
      const accepted = rec.history.filter(
        (x) => x.kind === "callback" && x.step_run_id === p.step_run_id && x.outcome === "accepted",
      );
      expect(accepted).toHaveLength(1);
      expect(rec.attempt_results.filter((a) => a.step_run_id === p.step_run_id)).toHaveLength(1);
    },
  );
});

describe("outbox claims", () => {
  it("a stale claim's outcome is dropped when its completion conflicts", async () => {
    const h = await harness({ seed: recipe(2) });
    const id = await createRelease(h, recipe(2));
    const [old] = await h.store.claimDue({
      now: h.clock.now(),
      limit: 10,
      leaseMs: 1000,
      owner: "old",
    });
    expect(old?.effect.type).toBe("control_plane");
    h.clock.advance(2000);
    const [taken] = await h.store.claimDue({
      now: h.clock.now(),
      limit: 10,
      leaseMs: 60_000,
      owner: "new",
    });
    expect(taken?.id).toBe(old!.id);
    const sr = (old!.effect as { step_run_id: string }).step_run_id;
    const stale = await h.engine.service.apply(
      id,
      { type: "applied", step_run_id: sr, outcome: "failed", message: "stale holder" },
      { complete_outbox: { id: old!.id, claim_token: old!.claim_token! } },
    );
    expect(stale).toMatchObject({ ok: false, code: "stale_claim" });
    let rec = await getRecord(h, id);
    expect(rec.step_runs.find((s) => s.id === sr)?.state).toBe("applying");
    const fresh = await h.engine.service.apply(
      id,
      { type: "applied", step_run_id: sr, outcome: "ok", message: "new holder" },
      { complete_outbox: { id: taken!.id, claim_token: taken!.claim_token! } },
    );
    expect(fresh.ok).toBe(true);
    rec = await getRecord(h, id);
    expect(rec.step_runs.find((s) => s.id === sr)?.state).toBe("succeeded");
  });

  it("the reconciler gives a row back with backoff when a port throws, and retries it", async () => {
    const h = await harness({ seed: recipe(2) });
    const id = await createRelease(h, recipe(2));
    // Control-plane steps 0 and 1, until the first runner step (2) is planned.
    for (let i = 0; i < 50; i++) {
      const r = await getRecord(h, id);
      if (r.step_runs.some((s) => s.step_index === 2)) break;
      await pump(h, 1);
    }
    h.dispatcher.failNext({ kind: "throw", message: "socket hang up" }, 2);
    await pump(h, 1);
    let rec = await getRecord(h, id);
    // A thrown dispatch is retryable: same step run, same key, later (backoff), not a new one.
    expect(rec.step_runs.find((s) => s.step_index === 2)?.state).toBe("dispatching");
    await drive(h);
    rec = await getRecord(h, id);
    expect(rec.state).toBe("succeeded");
    const keys = h.dispatcher.calls
      .filter((c) => c.step_run_id.endsWith("_2_f"))
      .map((c) => c.release.operation_key);
    expect(new Set(keys).size).toBe(1);
    expect(keys.length).toBe(3);
  });
});

describe("rules 6 and 7", () => {
  it("rule 6: a callback or preflight from another run id is refused (duplicate delivery)", async () => {
    const h = await harness({ seed: recipe(2) });
    await createRelease(h, recipe(2));
    for (let i = 0; i < 3; i++) await h.engine.tick();
    const p = h.dispatcher.accepted[0]!;
    const runA = { run_id: "100", run_attempt: 1 };
    const runB = { run_id: "200", run_attempt: 1 };
    expect((await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, runA))).status).toBe(
      200,
    );
    expect((await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, runB))).status).toBe(
      409,
    );
    expect(
      (await signedPost(h, callbackUrl(p.step_run_id), callbackBody(p.step_run_id, runB))).status,
    ).toBe(409);
    // Same (run id, run attempt) again: the same answer.
    const again = await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, runA));
    expect(again.status).toBe(200);
    expect(((await again.json()) as { attempt: number }).attempt).toBe(1);
  });

  it("rule 7: every effect carries release id and generation; an old generation's preflight is stale", async () => {
    const h = await harness({ seed: recipe(2) });
    const id = await createRelease(h, recipe(2));
    for (let i = 0; i < 3; i++) await h.engine.tick();
    const p = h.dispatcher.accepted[0]!;
    const run = { run_id: "300", run_attempt: 1 };
    expect((await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run))).status).toBe(
      200,
    );
    expect(
      (await signedPost(h, callbackUrl(p.step_run_id), callbackBody(p.step_run_id, run))).status,
    ).toBe(200);
    for (let i = 0; i < 3; i++) await h.engine.tick();
    expect(h.dispatcher.accepted).toHaveLength(2);
    const before = await getRecord(h, id);
    expect((await op(h, "POST", `/v1/releases/${id}/abort`, { reason: "test" })).status).toBe(200);
    const after = await getRecord(h, id);
    expect(after.generation).toBe(before.generation + 1);
    // The step run dispatched before the abort: its preflight echoes the old generation.
    const p2 = h.dispatcher.accepted[1]!;
    expect(p2.release.generation).toBe(before.generation);
    const stale = await signedPost(
      h,
      preflightUrl(p2.step_run_id),
      preflightBody(p2, { run_id: "301", run_attempt: 1 }),
    );
    expect(stale.status).toBe(409);
    await drive(h);
    for (const d of h.dispatcher.calls) {
      expect(d.release.id).toBe(id);
      expect(typeof d.release.generation).toBe("number");
    }
    for (const c of h.cp.calls) expect(c.ctx.release_id).toBe(id);
    const backward = h.cp.calls.filter((c) => c.ctx.operation_key.includes(":bwd:"));
    expect(backward.length).toBeGreaterThan(0);
    for (const c of backward) expect(c.ctx.generation).toBe(after.generation);
    const bwdDispatch = h.dispatcher.accepted.filter((d) => d.step_run_id.endsWith("_b"));
    for (const d of bwdDispatch) expect(d.release.generation).toBe(after.generation);
    expect((await getRecord(h, id)).state).toBe("rolled_back");
  });
});

describe("two engines share one database", () => {
  it("each decides on fresh state when its cached copy is stale; every key applied once", async () => {
    const clock = new FakeClock();
    const dispatcher = new MemoryDispatcher();
    const cp = new MemoryControlPlane({ model: "summarizer-v7", now: () => clock.now() });
    seedControlPlane(cp, recipe(2));
    const a = await harness({ clock, dispatcher, cp });
    const b = await harness({ clock, dispatcher, cp, dir: a.dir }); // second connection, same file
    const id = await createRelease(a, recipe(2));
    const engines = [a, b];
    let handled = 0;
    for (let round = 0; round < 200; round++) {
      const x = engines[round % 2]!;
      const y = engines[(round + 1) % 2]!;
      await x.engine.tick();
      for (const p of dispatcher.accepted.slice(handled)) {
        handled++;
        const run = { run_id: String(900 + handled), run_attempt: 1 };
        // Preflight through one engine, callback through the other: each holds a stale copy.
        expect(
          (await signedPost(y, preflightUrl(p.step_run_id), preflightBody(p, run))).status,
        ).toBe(200);
        expect(
          (await signedPost(x, callbackUrl(p.step_run_id), callbackBody(p.step_run_id, run)))
            .status,
        ).toBe(200);
      }
      if ((await a.store.getRelease(id))?.state === "succeeded") break;
    }
    const rec = await getRecord(b, id);
    expect(rec.state).toBe("succeeded");
    for (const [key, n] of Object.entries(cp.applicationCounts())) expect(n, key).toBe(1);
    for (const [key, n] of dispatcher.acceptedByKey) expect(n, key).toBe(1);
  });
});
