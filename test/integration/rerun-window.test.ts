/**
 * The re-run window through the HTTP app on both stores, with a fake clock
 * (docs/state-machine.md "The re-run window"): a failed runner step pauses the release until a
 * deadline (UTC) shown in the API; the runner's callback answer says what to print; a re-run
 * (same run, attempt 2) inside the window continues forward; at the end of the window the
 * durable deadline compensates and a re-run is declined with the reason.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  callbackBody,
  callbackUrl,
  createRelease,
  getRecord,
  type Harness,
  makeHarness,
  op,
  preflightBody,
  preflightUrl,
  pumpOnce,
  recipe,
  STORE_KINDS,
  signedPost,
  skipStore,
  skipToNextDue,
} from "./service-harness.ts";

const MINUTE = 60_000;

describe.each(STORE_KINDS)("re-run window on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  /** Runs every step until the first runner step, which fails as run 7001 attempt 1. */
  async function failFirstRunner(window?: number) {
    h = await makeHarness({ kind });
    const r = recipe(2, window === undefined ? {} : { policy: { rerun_window_minutes: window } });
    const id = await createRelease(h, r);
    let failed: DispatchPayload | null = null;
    let answer: Record<string, unknown> = {};
    for (let i = 0; i < 50 && !failed; i++) {
      const { fresh } = await pumpOnce(h, () => "skip");
      for (const p of fresh) {
        const run = { run_id: "7001", run_attempt: 1 };
        expect(
          (await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run))).status,
        ).toBe(200);
        const cb = await signedPost(
          h,
          callbackUrl(p.step_run_id),
          callbackBody(p.step_run_id, run, "fail"),
        );
        expect(cb.status).toBe(200);
        answer = (await cb.json()) as Record<string, unknown>;
        failed = p;
      }
    }
    if (!failed) throw new Error("no runner step was dispatched");
    return { h, id, p: failed, answer };
  }

  it.skipIf(skip)(
    "default 30 minutes: paused with the deadline; a re-run inside it continues forward",
    async () => {
      const { h, id, p, answer } = await failFirstRunner();
      const deadline = h.clock.now() + 30 * MINUTE;
      const hhmm = new Date(deadline).toISOString().slice(11, 16);
      expect(answer.advice).toBe(
        `re-run this job before ${hhmm} UTC, or release ${id} compensates`,
      );
      expect(answer.rerun_deadline).toBe(deadline);
      const rec = (await (await op(h, "GET", `/v1/releases/${id}`)).json()) as {
        state: string;
        rerun_deadline: number;
        reason: string;
        available_actions: { action: string }[];
      };
      expect(rec.state).toBe("paused");
      expect(rec.rerun_deadline).toBe(deadline);
      expect(rec.reason).toContain(`before ${hhmm} UTC, or the release compensates`);
      expect(rec.available_actions.map((a) => a.action)).toEqual(["resume", "retry", "abort"]);
      // "Re-run failed jobs" 29 minutes later: the same run, attempt 2.
      h.clock.advance(29 * MINUTE);
      const run2 = { run_id: "7001", run_attempt: 2 };
      const pre = await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run2));
      expect(pre.status).toBe(200);
      expect(((await pre.json()) as { attempt: number }).attempt).toBe(2);
      const cb = await signedPost(h, callbackUrl(p.step_run_id), callbackBody(p.step_run_id, run2));
      expect(cb.status).toBe(200);
      // Past the old deadline: the window's deadline fires and changes nothing.
      h.clock.advance(2 * MINUTE);
      for (let i = 0; i < 400; i++) {
        const { t, fresh } = await pumpOnce(h);
        if (t.performed === 0 && fresh.length === 0 && !(await skipToNextDue(h, id))) break;
      }
      const done = await getRecord(h, id);
      expect(done.state).toBe("succeeded");
      expect(done.generation).toBe(1);
    },
  );

  it.skipIf(skip)(
    "a re-run from the Actions UI records who re-ran it (github.triggering_actor); github.actor stays the run's starter",
    async () => {
      const { h, id, p } = await failFirstRunner();
      const run2 = { run_id: "7001", run_attempt: 2 };
      expect(
        (await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run2))).status,
      ).toBe(200);
      const cb = await signedPost(
        h,
        callbackUrl(p.step_run_id),
        callbackBody(p.step_run_id, run2, "pass", { actor: "maria", triggering_actor: "lee" }),
      );
      expect(cb.status).toBe(200);
      const rec = (await (await op(h, "GET", `/v1/releases/${id}`)).json()) as {
        history: { kind: string; outcome: string; message: string; data: unknown }[];
      };
      const line = rec.history.find(
        (e) => e.kind === "callback" && e.outcome === "accepted" && /attempt 2/.test(e.message),
      );
      expect(line?.message).toContain(
        "(re-run by lee from the Actions UI; the run was started by maria)",
      );
      expect(line?.data).toMatchObject({ run_by: { actor: "maria", triggering_actor: "lee" } });
      const record = (await (await op(h, "GET", `/v1/releases/${id}/record`)).json()) as {
        ran: { step_runs: { id: string; attempts: { n: number; run_by: unknown }[] }[] };
      };
      const attempts = record.ran.step_runs.find((s) => s.id === p.step_run_id)?.attempts;
      expect(attempts?.find((a) => a.n === 2)?.run_by).toEqual({
        actor: "maria",
        triggering_actor: "lee",
      });
      // The first attempt's callback named nobody: the record says so (null).
      expect(attempts?.find((a) => a.n === 1)?.run_by).toBeNull();
    },
  );

  it.skipIf(skip)(
    "at the end of the window the release compensates; a re-run is then declined, saying why",
    async () => {
      const { h, id, p } = await failFirstRunner(5);
      h.clock.advance(5 * MINUTE);
      await h.engine.tick();
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("compensating");
      expect(rec.generation).toBe(2);
      const pre = await signedPost(
        h,
        preflightUrl(p.step_run_id),
        preflightBody(p, { run_id: "7001", run_attempt: 2 }),
      );
      expect(pre.status).toBe(409);
      const body = (await pre.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("rerun_declined");
      expect(body.error.message).toContain(
        `re-run 2 of run 7001 is declined: release ${id} is compensating`,
      );
      expect(body.error.message).toContain("was not re-run before the window closed");
    },
  );

  it.skipIf(skip)(
    "window 0: compensates at once and the runner is told a re-run will be declined",
    async () => {
      const { id, answer } = await failFirstRunner(0);
      expect(answer.advice).toBe(
        `release ${id} is compensating; a re-run of this job will be declined`,
      );
      expect(answer.release_state).toBe("compensating");
    },
  );
});
