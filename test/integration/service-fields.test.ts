/**
 * Failure cases at the service level (docs/failure-cases.md), through the HTTP app on a
 * real SQLite store with the in-memory doubles and a fake clock. Step table of `recipe(2)`:
 * lane-a 0 exclude (cp), 1 attach (runner), 2 smoke (runner), 3 advertise (cp), 4 include (cp),
 * 5 set_traffic 25 (cp), 6 assert_traffic_observed (cp); lane-b 7..13 the same, traffic 100.
 */
import { afterEach, describe, expect, it } from "vitest";
import { transition } from "../../engine/src/domain/transition.ts";
import { signBody } from "../../engine/src/protocol/credential.ts";
import type { Domain } from "../../engine/src/service/domain.ts";
import { defaultDomain } from "../../engine/src/service/domain.ts";
import { PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import {
  callbackBody,
  callbackUrl,
  createRelease,
  drive,
  getRecord,
  type Harness,
  makeHarness,
  op,
  preflightBody,
  preflightUrl,
  pump,
  recipe,
  STORE_KINDS,
  signedPost,
  skipStore,
  stepRun,
} from "./service-harness.ts";

let h: Harness | null = null;
afterEach(async () => {
  await h?.close();
  h = null;
});

/** Ticks until the dispatcher accepted `n` dispatches in total (bounded). */
async function untilDispatched(x: Harness, n: number) {
  for (let i = 0; i < 50 && x.dispatcher.accepted.length < n; i++) await x.engine.tick();
  expect(x.dispatcher.accepted.length).toBe(n);
  return x.dispatcher.accepted[n - 1]!;
}

describe.each(STORE_KINDS)("on %s", (kind) => {
  if (skipStore(kind)) {
    it.skip("Postgres: BATON_TEST_DATABASE_URL is not set", () => {});
    return;
  }
  describe("F01 dispatch payload over GitHub's limits", () => {
    it("a 4xx dispatch leaves the step run dispatch_failed with GitHub's message, hwm unmoved", async () => {
      h = await makeHarness({ kind, seed: recipe(2) });
      const msg = "Invalid request. No more than 10 properties are allowed; 11 were supplied.";
      h.dispatcher.failNext({ kind: "status", status: 422, message: msg }, 1);
      const id = await createRelease(
        h,
        recipe(2, { policy: { steps: { attach_queue_lane: { retries: 0 } } } }),
      );
      for (let i = 0; i < 3; i++) await h.engine.tick();
      const rec = await getRecord(h, id);
      const sr = stepRun(rec, 2)!;
      expect(sr.state).toBe("dispatch_failed");
      expect(sr.last_error).toContain(msg);
      expect(rec.high_water_mark).toBe(1); // steps 0, 1 (cp) applied; the refused dispatch never counts
      expect(sr.attempts).toEqual([]);
      expect(rec.step_runs.some((s) => s.state === "running")).toBe(false);
      // Compensation skips the refused step (it cannot have taken effect) and undoes step 0.
      await drive(h);
      const end = await getRecord(h, id);
      expect(end.state).toBe("rolled_back");
      expect(stepRun(end, 2, "bwd")).toBeUndefined();
      expect(stepRun(end, 1, "bwd")?.state).toBe("succeeded");
      expect(stepRun(end, 0, "bwd")?.state).toBe("succeeded");
    });

    it("an oversized args object is refused before sending, never sent", async () => {
      // Inflate the args of step 1's dispatch to 70 KB, as a recipe with huge lane data would.
      const domain: Domain = {
        ...defaultDomain,
        transition(r, e, now) {
          const res = transition(r, e, now);
          if (!res.ok) return res;
          const effects = res.effects.map((x) =>
            x.type === "dispatch" && x.step_run_id.endsWith("_2_f")
              ? { ...x, args: { ...x.args, notes: "x".repeat(70_000) } }
              : x,
          );
          return { ...res, effects };
        },
      };
      h = await makeHarness({ kind, seed: recipe(2), domain });
      const id = await createRelease(
        h,
        recipe(2, { policy: { steps: { attach_queue_lane: { retries: 0 } } } }),
      );
      for (let i = 0; i < 3; i++) await h.engine.tick();
      const rec = await getRecord(h, id);
      expect(h.dispatcher.calls.filter((c) => c.step_run_id === `sr_${id.slice(1)}_2_f`)).toEqual(
        [],
      );
      const sr = stepRun(rec, 2)!;
      expect(sr.state).toBe("dispatch_failed");
      expect(sr.last_error).toMatch(/bytes; GitHub allows less than 65536/);
      expect(rec.high_water_mark).toBe(1);
    });
  });

  describe("F03 an older attempt's callback after a re-run", () => {
    it("the late attempt-1 callback is refused 409 and state is as attempt 2 left it", async () => {
      h = await makeHarness({ kind, seed: recipe(2) });
      await createRelease(h, recipe(2));
      const p = await untilDispatched(h, 1);
      const run1 = { run_id: "5001", run_attempt: 1 };
      const run2 = { run_id: "5001", run_attempt: 2 };
      expect(
        (await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run1))).status,
      ).toBe(200);
      const pre2 = await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run2));
      expect(pre2.status).toBe(200);
      expect(((await pre2.json()) as { attempt: number }).attempt).toBe(2);
      const ok2 = await signedPost(
        h,
        callbackUrl(p.step_run_id),
        callbackBody(p.step_run_id, run2, "pass", { checks: [] }),
      );
      expect(ok2.status).toBe(200);
      const threeChecks = [1, 2, 3].map((i) => ({ name: `c${i}`, status: "failed", exit_code: 1 }));
      const late = await signedPost(
        h,
        callbackUrl(p.step_run_id),
        callbackBody(p.step_run_id, run1, "fail", { checks: threeChecks }),
      );
      expect(late.status).toBe(409);
      const rec = await getRecord(h, p.release.id);
      const sr = rec.step_runs.find((s) => s.id === p.step_run_id)!;
      expect(sr.state).toBe("succeeded");
      expect(sr.attempts.map((a) => a.state)).toEqual(["fenced", "succeeded"]);
      expect(rec.attempt_results.map((a) => [a.attempt, a.checks])).toEqual([[2, []]]);
      expect(
        rec.history.some(
          (x) =>
            x.kind === "callback" && x.outcome === "refused" && x.step_run_id === p.step_run_id,
        ),
      ).toBe(true);
      expect(rec.state).toBe("running");
    });

    it("attempt 1 failed, a re-run reports its own result without attempt 1's checks", async () => {
      h = await makeHarness({ kind, seed: recipe(2) });
      await createRelease(
        h,
        recipe(2, {
          policy: {
            on_failure: "pause",
            steps: { attach_queue_lane: { retries: 0, on_failure: "pause" } },
          },
        }),
      );
      const p = await untilDispatched(h, 1);
      const run1 = { run_id: "6001", run_attempt: 1 };
      const run2 = { run_id: "6001", run_attempt: 2 };
      const three = [1, 2, 3].map((i) => ({ name: `c${i}`, status: "failed", exit_code: 1 }));
      await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run1));
      const cb1 = callbackBody(p.step_run_id, run1, "fail", { checks: three });
      expect((await signedPost(h, callbackUrl(p.step_run_id), cb1)).status).toBe(200);
      expect((await getRecord(h, p.release.id)).state).toBe("paused");
      expect(
        (await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run2))).status,
      ).toBe(200);
      expect((await getRecord(h, p.release.id)).state).toBe("running");
      const crashed = callbackBody(p.step_run_id, run2, "fail", { status: "failed", checks: null });
      expect((await signedPost(h, callbackUrl(p.step_run_id), crashed)).status).toBe(200);
      // Attempt 1's callback delivered again after the re-run: fenced.
      expect((await signedPost(h, callbackUrl(p.step_run_id), cb1)).status).toBe(409);
      const rec = await getRecord(h, p.release.id);
      expect(rec.attempt_results.map((a) => [a.attempt, a.checks])).toEqual([
        [1, three],
        [2, null],
      ]);
    });
  });

  describe("F12 signature over the raw bytes", () => {
    it("accepts the exact signed bytes (spaces, \\u00e9 escape); one changed byte is 401", async () => {
      h = await makeHarness({ kind, seed: recipe(2) });
      await createRelease(h, recipe(2));
      const p = await untilDispatched(h, 1);
      const run = { run_id: "7001", run_attempt: 1 };
      await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run));
      const bytes = `{"step_run_id": "${p.step_run_id}", "run_id": "7001", "run_attempt": 1, "status": "succeeded", "overall": "pass", "checks": [], "log": "", "note": "caf\\u00e9"}`;
      // A re-serialising verifier would check other bytes than were signed.
      expect(JSON.stringify(JSON.parse(bytes))).not.toBe(bytes);
      const headers = signBody("callback-secret-0123456789abcdef", bytes, h.clock.now());
      const send = (body: string) =>
        h!.engine.app.request(callbackUrl(p.step_run_id), {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body,
        });
      const changed = bytes.replace("caf\\u00e9", "caf\\u00e8");
      expect(changed.length).toBe(bytes.length);
      const bad = await send(changed);
      expect(bad.status).toBe(401);
      const good = await send(bytes);
      expect(good.status).toBe(200);
      const rec = await getRecord(h, p.release.id);
      expect(rec.attempt_results[0]?.raw_callback).toBe(bytes);
      expect(
        rec.history.some(
          (x) =>
            x.kind === "callback" && x.outcome === "refused" && /bad credential/.test(x.message),
        ),
      ).toBe(true);
    });

    it("the case file's exact bytes pass authentication (then 400 for the incomplete body)", async () => {
      h = await makeHarness({ kind, seed: recipe(2) });
      const bytes = '{"step_run_id": "sr_1", "overall": "pass", "note": "caf\\u00e9"}';
      const res = await signedPost(h, callbackUrl("sr_1_1_f"), bytes);
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { problems: { path: string }[] } };
      expect(body.error.problems.map((x) => x.path)).toContain("body.step_run_id");
      const flipped = `${bytes.slice(0, -2)}E"}`;
      const headers = signBody("callback-secret-0123456789abcdef", bytes, h.clock.now());
      const res2 = await h.engine.app.request(callbackUrl("sr_1_1_f"), {
        method: "POST",
        headers,
        body: flipped,
      });
      expect(res2.status).toBe(401);
    });
  });

  describe("F13 the same callback twice", () => {
    it("1 s apart and concurrently: one transition, one next dispatch, hwm advances once", async () => {
      h = await makeHarness({ kind, seed: recipe(2) });
      await createRelease(h, recipe(2));
      const p1 = await untilDispatched(h, 1);
      const run = { run_id: "8001", run_attempt: 1 };
      await signedPost(h, preflightUrl(p1.step_run_id), preflightBody(p1, run));
      const body = callbackBody(p1.step_run_id, run);
      const headers = signBody("callback-secret-0123456789abcdef", body, h.clock.now());
      const send = (sr: string, b: string, hd: Record<string, string>) =>
        h!.engine.app.request(callbackUrl(sr), { method: "POST", headers: hd, body: b });
      const first = await send(p1.step_run_id, body, headers);
      expect(first.status).toBe(200);
      h.clock.advance(1000);
      const second = await send(p1.step_run_id, body, headers);
      expect([200, 409]).toContain(second.status);
      if (second.status === 200)
        expect(((await second.json()) as { replay: boolean }).replay).toBe(true);

      const p2 = await untilDispatched(h, 2);
      for (let i = 0; i < 3; i++) await h.engine.tick();
      expect(h.dispatcher.accepted.filter((x) => x.step_run_id === p2.step_run_id)).toHaveLength(1);
      let rec = await getRecord(h, p1.release.id);
      expect(rec.high_water_mark).toBe(3);

      // Concurrently: both at the same moment.
      const run2 = { run_id: "8002", run_attempt: 1 };
      await signedPost(h, preflightUrl(p2.step_run_id), preflightBody(p2, run2));
      const body2 = callbackBody(p2.step_run_id, run2);
      const hd2 = signBody("callback-secret-0123456789abcdef", body2, h.clock.now());
      const answers = await Promise.all([
        send(p2.step_run_id, body2, hd2),
        send(p2.step_run_id, body2, hd2),
      ]);
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses[0]).toBe(200);
      expect([200, 409]).toContain(statuses[1]);
      const replays = await Promise.all(
        answers
          .filter((a) => a.status === 200)
          .map(async (a) => ((await a.json()) as { replay: boolean }).replay),
      );
      expect(replays.filter((x) => !x)).toHaveLength(1);
      // Steps 4..9 are control-plane steps: tick until the next runner step is dispatched.
      for (
        let i = 0;
        i < 50 && !h.dispatcher.accepted.some((x) => x.step_run_id.endsWith("_10_f"));
        i++
      )
        await h.engine.tick();
      rec = await getRecord(h, p1.release.id);
      for (const sr of [p1.step_run_id, p2.step_run_id]) {
        const accepted = rec.history.filter(
          (x) => x.kind === "callback" && x.step_run_id === sr && x.outcome === "accepted",
        );
        expect(accepted, sr).toHaveLength(1);
      }
      // The next runner step (10) was dispatched exactly once.
      const next = h.dispatcher.accepted.filter((x) => x.step_run_id.endsWith("_10_f"));
      expect(next).toHaveLength(1);
      expect(rec.high_water_mark).toBe(10);
      expect(rec.attempt_results.filter((a) => a.step_run_id === p2.step_run_id)).toHaveLength(1);
    });
  });

  describe("F14 abort with nothing in flight; abort after completion", () => {
    it("(a) a release created and not started aborts with no effects at all", async () => {
      h = await makeHarness({ kind, seed: recipe(2) });
      const res = await op(h, "POST", "/v1/releases?start=false", recipe(2));
      expect(res.status).toBe(201);
      const { id, state } = (await res.json()) as { id: string; state: string };
      expect(state).toBe("pending");
      const ab = await op(h, "POST", `/v1/releases/${id}/abort`, { reason: "changed my mind" });
      expect(ab.status).toBe(200);
      await drive(h);
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("aborted");
      expect(h.cp.calls).toEqual([]);
      expect(h.dispatcher.calls).toEqual([]);
      expect(rec.step_runs).toEqual([]);
    });

    it("(b) aborting a succeeded release is refused 409 and changes nothing", async () => {
      h = await makeHarness({ kind, seed: recipe(2) });
      const id = await createRelease(h, recipe(2));
      await drive(h);
      const before = await getRecord(h, id);
      expect(before.state).toBe("succeeded");
      const calls = [h.cp.calls.length, h.dispatcher.calls.length];
      const ab = await op(h, "POST", `/v1/releases/${id}/abort`);
      expect(ab.status).toBe(409);
      await drive(h);
      const after = await getRecord(h, id);
      expect(after.state).toBe("succeeded");
      expect(after.generation).toBe(before.generation);
      expect([h.cp.calls.length, h.dispatcher.calls.length]).toEqual(calls);
      expect(h.cp.lane("lane-a")?.excluded).toBe(false);
    });
  });

  describe("F15 compensation undoes every step up to the high-water mark", () => {
    it("traffic check fails after the traffic call succeeded: backward 6,5,4,2,1,0, traffic absolute baseline", async () => {
      h = await makeHarness({ kind, seed: recipe(2) });
      const id = await createRelease(
        h,
        recipe(2, { policy: { steps: { assert_traffic_observed: { retries: 0 } } } }),
      );
      let tampered = false;
      await drive(
        h,
        () => "pass",
        400,
        async () => {
          // Someone else moves traffic between set_traffic (6) and its check (7).
          if (!tampered && h!.cp.applications(`${id}:6:fwd:traffic=25`) === 1) {
            tampered = true;
            await h!.cp.apply(
              { op: "set_traffic", weights: { "lane-a": 0, "lane-b": 100 }, percent: 0 },
              {
                operation_key: "someone-else:1",
                release_id: "r999",
                generation: 1,
                model: "summarizer-v7",
              },
            );
          }
        },
      );
      expect(tampered).toBe(true);
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("rolled_back");
      expect(stepRun(rec, 7)?.state).toBe("failed");
      const backward = rec.step_runs.filter((s) => s.direction === "bwd");
      expect(backward.map((s) => s.step_index)).toEqual([6, 5, 4, 2, 1, 0]);
      expect(backward.every((s) => s.state === "succeeded")).toBe(true);
      // Order in history: each backward step run appears, highest first.
      const firstSeen = backward.map((s) => rec.history.findIndex((x) => x.step_run_id === s.id));
      expect(firstSeen.every((i) => i >= 0)).toBe(true);
      expect([...firstSeen].sort((a, b) => a - b)).toEqual(firstSeen);
      expect(h.cp.weights()).toEqual({ "lane-a": 50, "lane-b": 50 });
      expect(h.cp.lane("lane-a")?.advertised).toBe(false);
      const restore = h.dispatcher.accepted.find((x) => x.step_run_id === `sr_${id.slice(1)}_2_b`);
      expect(restore?.tool).toBe("restore-queue-lane");
      expect((restore?.args as { image: string } | undefined)?.image).toBe(PREVIOUS_IMAGE);
    });
  });

  describe("F16 a failing gate does not restart the sequence", () => {
    it("control plane answering 500: only the failing call retried, bounded, with backoff; then compensation", async () => {
      h = await makeHarness({ kind, seed: recipe(2) });
      const id = await createRelease(
        h,
        recipe(2, { policy: { steps: { advertise_capabilities: { retries: 0 } } } }),
      );
      h.cp.faults.arm({ mode: "error", count: 1000, match: `${id}:4:fwd:` });
      // Runner steps 2 and 3 pass; then step 4 keeps failing while the reconciler runs 5 times.
      await pump(h, 6);
      expect(h.cp.calls.some((c) => c.ctx.operation_key.startsWith(`${id}:4:fwd:`))).toBe(true);
      for (let run = 0; run < 5; run++) {
        h.clock.advance(30_000); // past the longest backoff (30 s cap)
        await pump(h, 2);
      }
      await drive(h);
      const rec = await getRecord(h, id);
      for (const i of [2, 3]) {
        expect(
          h.dispatcher.accepted.filter((x) => x.step_run_id === `sr_${id.slice(1)}_${i}_f`),
        ).toHaveLength(1);
      }
      const applies = h.cp.calls.filter(
        (c) => c.method === "apply" && c.ctx.operation_key.startsWith(`${id}:4:fwd:`),
      );
      expect(applies.length).toBeGreaterThan(1);
      expect(applies.length).toBeLessThanOrEqual(5);
      const gaps = applies.slice(1).map((c, i) => c.at - applies[i]!.at);
      expect(gaps.every((g) => g >= 1000)).toBe(true);
      // Steps 0 (cp) was applied once and never re-sent forward.
      expect(
        h.cp.calls.filter(
          (c) => c.method === "apply" && c.ctx.operation_key.startsWith(`${id}:0:fwd:`),
        ),
      ).toHaveLength(1);
      expect(rec.state).toBe("rolled_back");
      expect(stepRun(rec, 4)?.state).toBe("failed");
      expect(stepRun(rec, 2, "bwd")?.state).toBe("succeeded");
    });
  });
});
