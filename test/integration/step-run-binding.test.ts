/**
 * A credential is bound to the step run it is for (HMAC mode, both stores): a validly signed
 * preflight or callback body of one step run, sent to another step run's URL, is 401 with the
 * same body as any bad credential and changes nothing on either step run.
 */
import { describe, expect, it } from "vitest";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  callbackBody,
  callbackUrl,
  createRelease,
  firstDispatch,
  type Harness,
  makeHarness,
  preflightBody,
  preflightUrl,
  runStep,
  STORE_KINDS,
  signedPost,
  skipStore,
} from "./service-harness.ts";

async function snapshot(h: Harness, id: string) {
  const r = await h.store.getRelease(id);
  return {
    state: r?.state,
    resource_version: r?.resource_version,
    attempts: r?.step_runs.map((s) => [s.id, s.state, s.attempts.length]),
    results: (await h.store.listAttemptResults(id)).length,
  };
}

for (const kind of STORE_KINDS) {
  describe.skipIf(skipStore(kind))(`a credential is bound to its step run (${kind})`, () => {
    it("another step run's signed body at this step run's URL is 401 and changes nothing", async () => {
      const h = await makeHarness({ kind });
      try {
        const id = await createRelease(h);
        const a = await firstDispatch(h);
        const done = await runStep(h, a);
        expect(done.callback?.status).toBe(200);
        let b: DispatchPayload | undefined;
        for (let i = 0; i < 50 && !b; i++) {
          await h.engine.tick();
          b = h.dispatcher.accepted.find((d) => d.step_run_id !== a.step_run_id);
        }
        expect(b, "a second runner dispatch").toBeDefined();
        const before = await snapshot(h, id);

        // What any bad credential gets: a body signed with a wrong secret.
        const run = { run_id: "7001", run_attempt: 1 };
        const forged = await signedPost(
          h,
          preflightUrl(b!.step_run_id),
          preflightBody(b!, run),
          "not-the-secret-0123456789abcdef",
        );
        expect(forged.status).toBe(401);
        const bad = await forged.text();

        // Validly signed, but for step run a.
        const pre = await signedPost(h, preflightUrl(b!.step_run_id), preflightBody(a, run));
        expect(pre.status).toBe(401);
        expect(await pre.text()).toBe(bad);
        const cb = await signedPost(
          h,
          callbackUrl(b!.step_run_id),
          callbackBody(a.step_run_id, run, "fail"),
        );
        expect(cb.status).toBe(401);
        expect(await cb.text()).toBe(bad);
        expect(await snapshot(h, id)).toEqual(before);

        // The precise reason is kept for the operator.
        const refused = (await h.store.getHistory(id))
          .filter((x) => x.outcome === "refused")
          .map((x) => x.message)
          .join("\n");
        expect(refused).toContain(a.step_run_id);
      } finally {
        await h.close();
      }
    });
  });
}
