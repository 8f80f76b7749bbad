/**
 * Requests a stranger (or a repeating runner) sends must not grow a
 * release's history per request. Refused preflights and callbacks (bad credential, duplicate,
 * late) are recorded at most once per (step run, kind, reason) per minute per engine process;
 * the requests in between are counted and the count rides on the next recorded row
 * (docs/guarantees.md "What is bounded"). Both stores.
 */
import { expect, it } from "vitest";
import { signBody } from "../../engine/src/protocol/credential.ts";
import {
  callbackBody,
  callbackUrl,
  getRecord,
  op,
  preflightBody,
  preflightUrl,
  recipe,
  signedPost,
} from "./service-harness.ts";
import { describeEachStore, preflightOk, startedRelease } from "./store-suites.ts";

describeEachStore("forged and repeated requests on %s", ({ skip, open }) => {
  if (skip) {
    it.skip("Postgres: BATON_TEST_DATABASE_URL is not set", () => {});
    return;
  }

  it("10,000 forged preflights and callbacks over 10 minutes add at most 2 rows a minute", async () => {
    const h = await open({ seed: recipe(2) });
    const { id, p } = await startedRelease(h);
    const before = await getRecord(h, id);
    const sizeBefore = JSON.stringify(before).length;
    const run = { run_id: "7001", run_attempt: 1 };
    const pre = preflightBody(p, run);
    const cb = callbackBody(p.step_run_id, run);
    const x = h;
    for (let minute = 0; minute < 10; minute++) {
      for (let i = 0; i < 1000; i += 50) {
        await Promise.all(
          Array.from({ length: 50 }, (_, j) => {
            const isPre = (i + j) % 2 === 0;
            const body = isPre ? pre : cb;
            return x.engine.app.request(
              isPre ? preflightUrl(p.step_run_id) : callbackUrl(p.step_run_id),
              {
                method: "POST",
                headers: {
                  "content-type": "application/json",
                  ...signBody("forged-secret-0123456789abcdef", body, x.clock.now()),
                },
                body,
              },
            );
          }),
        ).then((rs) => {
          for (const r of rs) expect(r.status).toBe(401);
        });
      }
      x.clock.advance(60_000);
    }
    const after = await getRecord(h, id);
    const added = after.history.length - before.history.length;
    expect(added).toBeGreaterThan(0);
    expect(added).toBeLessThanOrEqual(2 * 10);
    // Bounded size: each row is well under 1 KB.
    expect(JSON.stringify(after).length - sizeBefore).toBeLessThan(20 * 1024);
    // The count of what was not written rides on the rows: nothing is hidden.
    const counted = after.history
      .slice(before.history.length)
      .reduce((n, e) => n + Number((e.data as { requests?: number }).requests ?? 0), 0);
    expect(counted).toBeGreaterThanOrEqual(10_000 - 2 * 1000);
    expect(after.state).toBe(before.state);
    expect(after.generation).toBe(before.generation);
  }, 120_000);

  it("repeated duplicate callbacks add at most one refused row; the reply stays 200 replay", async () => {
    const h = await open({ seed: recipe(2) });
    const { id, p } = await startedRelease(h);
    const run = { run_id: "7002", run_attempt: 1 };
    await preflightOk(h, p, run);
    const body = callbackBody(p.step_run_id, run);
    expect((await signedPost(h, callbackUrl(p.step_run_id), body)).status).toBe(200);
    const before = (await getRecord(h, id)).history.length;
    for (let i = 0; i < 50; i++) {
      const r = await signedPost(h, callbackUrl(p.step_run_id), body);
      expect(r.status).toBe(200);
      expect(((await r.json()) as { replay: boolean }).replay).toBe(true);
    }
    const after = (await getRecord(h, id)).history.length;
    expect(after - before).toBeLessThanOrEqual(1);
  });

  it("a conflicting second callback for an attempt already reported is 409, the first result stands", async () => {
    const h = await open({ seed: recipe(2) });
    const { id, p } = await startedRelease(h);
    const run = { run_id: "7003", run_attempt: 1 };
    await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run));
    expect(
      (await signedPost(h, callbackUrl(p.step_run_id), callbackBody(p.step_run_id, run))).status,
    ).toBe(200);
    const res = await signedPost(
      h,
      callbackUrl(p.step_run_id),
      callbackBody(p.step_run_id, run, "fail"),
    );
    expect(res.status).toBe(409);
    const b = (await res.json()) as { error: { code: string; message: string } };
    expect(b.error.code).toBe("conflicting_callback");
    expect(b.error.message).toMatch(/already reported succeeded \(pass\)/);
    const rec = await getRecord(h, id);
    expect(rec.step_runs.find((s) => s.id === p.step_run_id)?.state).toBe("succeeded");
    expect((await h.store.getAttemptResult(p.step_run_id, 1))?.overall).toBe("pass");
  });

  it("the viewer token on retry and tick is 403 naming the operator token", async () => {
    const h = await open({ seed: recipe(2) });
    const { p } = await startedRelease(h);
    const viewer = { authorization: "Bearer viewer-token-0123456789abcdefgh" };
    for (const url of [`/v1/releases/step-runs/${p.step_run_id}/retry`, "/v1/tick"]) {
      const res = await h.engine.app.request(url, { method: "POST", headers: viewer });
      expect(res.status, url).toBe(403);
      expect(await res.text()).toMatch(/BATON_OPERATOR_TOKEN/);
    }
    expect((await op(h, "POST", "/v1/tick")).status).toBe(200);
  });
});
