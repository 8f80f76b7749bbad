/**
 * Notifications end to end (docs/engine.md "Notifications"): a real engine on each store, the
 * in-memory dispatcher and control plane, and the webhook notifier POSTing to a loopback
 * receiver. One delivery per notice, retried on 5xx with the same delivery id, signed so the
 * receiver verifies it, given up on a 4xx, never holding a release up.
 */
import { afterEach, describe, expect, it } from "vitest";
import { EmbeddedMetricsSource } from "../../engine/src/adapters/embedded-metrics/index.ts";
import { WebhookNotifier } from "../../engine/src/adapters/notifier/webhook.ts";
import { TrafficGenerator } from "../../engine/src/control-plane/traffic.ts";
import { NOTICE_KINDS, type Notice } from "../../engine/src/domain/notifications.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { verifyBody } from "../../engine/src/protocol/credential.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.ts";
import { IMAGE, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import {
  createRelease,
  drive,
  FakeClock,
  getRecord,
  type Harness,
  makeHarness,
  op,
  pumpOnce,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

/** Failed runner steps compensate at once here (no re-run window): these tests follow notices. */
const noWindow = { policy: { rerun_window_minutes: 0 } };

const HOOK_SECRET = "hook-secret-0123456789abcdef";
const RETRY = { retryBaseMs: 1_000, maxTries: 4 };

function notifyConfig(maxTries = RETRY.maxTries) {
  return {
    webhook: null,
    slack: null,
    github: false,
    events: [...NOTICE_KINDS],
    retryBaseMs: RETRY.retryBaseMs,
    maxTries,
  };
}

function bodies(rx: WebhookReceiver): Notice[] {
  return rx.received
    .filter((r) => r.status < 300)
    .map((r) => JSON.parse(r.raw.toString()) as Notice);
}

describe.each(STORE_KINDS)("notifications on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  let rx: WebhookReceiver | null = null;
  let traffic: TrafficGenerator | null = null;
  afterEach(async () => {
    traffic?.stop();
    traffic = null;
    await h?.close();
    await rx?.close();
    h = null;
    rx = null;
  });

  async function setUp(
    script: number[] = [],
    maxTries?: number,
    template: "baton" | "slack" = "baton",
    gate?: { seed: RecipeInput },
  ) {
    rx = await startWebhookReceiver(script);
    let source: EmbeddedMetricsSource | null = null;
    const notifier = new WebhookNotifier({
      channel: template === "slack" ? "slack" : "webhook",
      url: rx.url,
      secret: HOOK_SECRET,
      template,
      timeoutMs: 5_000,
    });
    h = await makeHarness({
      kind,
      notifiers: [notifier],
      config: { notify: notifyConfig(maxTries) },
      ...(gate
        ? {
            seed: gate.seed,
            clock: new FakeClock(),
            // The gate reads the reference router over the control-plane double (built below).
            metrics: { observe: (q) => (source as EmbeddedMetricsSource).observe(q) },
          }
        : {}),
    });
    if (gate) {
      traffic = new TrafficGenerator(h.cp.core, { model: "summarizer-v7", seed: 11 });
      source = new EmbeddedMetricsSource(traffic);
      for (const l of gate.seed.lanes ?? []) traffic.setLaneImage(String(l.id), PREVIOUS_IMAGE);
      traffic.setCandidate(IMAGE);
    }
    return { h, rx };
  }

  /** Index of the first runner step of a 2-lane recipe (fails on every try in these tests). */
  async function firstRunnerStep(hh: Harness, id: string): Promise<number> {
    const rec = await getRecord(hh, id);
    const s = rec.manifest.steps.find((x) => x.kind === "runner");
    if (!s) throw new Error("no runner step");
    return s.index;
  }

  it.skipIf(skip)(
    "a failed release: one signed delivery for failed, one for rolled back",
    async () => {
      const { h, rx } = await setUp();
      const id = await createRelease(h, recipe(2, noWindow));
      const bad = await firstRunnerStep(h, id);
      await drive(h, (p) => (p.step_run_id.endsWith(`_${bad}_f`) ? "fail" : "pass"));
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("rolled_back");
      // What the receiver got, not what the engine wrote.
      const got = bodies(rx);
      expect(got.map((n) => n.kind)).toEqual(["failed", "rolled_back"]);
      expect(rx.received).toHaveLength(2);
      for (const r of rx.received) {
        const v = verifyBody(
          [HOOK_SECRET],
          r.raw,
          r.headers["x-baton-signature"] as string,
          r.headers["x-baton-timestamp"] as string,
        );
        expect(v).toEqual({ ok: true });
        expect(
          verifyBody(
            ["another-secret-0123456789"],
            r.raw,
            r.headers["x-baton-signature"] as string,
            r.headers["x-baton-timestamp"] as string,
          ).ok,
        ).toBe(false);
        expect(r.headers["x-baton-event"]).toBe(JSON.parse(r.raw.toString()).kind);
      }
      const ids = rx.received.map((r) => r.headers["x-baton-delivery"]);
      expect(new Set(ids).size).toBe(2);
      const failed = got[0]!;
      expect(failed.release_id).toBe(id);
      expect(failed.state).toBe("compensating");
      expect(failed.cause).toBe("failure");
      expect(failed.step?.number).toBe(bad + 1);
      expect(failed.step?.direction).toBe("forward");
      expect(failed.url).toBe(`http://127.0.0.1:8787/releases/${id}`);
      expect(failed.summary).toContain(`step ${bad + 1}`);
      // The failing check's cause, as the runner's checks.json recorded it.
      expect(failed.summary).toMatch(
        /health check on lane-\w+ answered 503: model not loaded: CUDA OOM \(exit code 1\)/,
      );
      expect(got[1]!.reason).toMatch(/answered 503: model not loaded: CUDA OOM/);
      expect(got[1]!.cause).toBe("failure");
      expect(got[1]!.step?.number).toBe(bad + 1);
      // Each delivery is one history line; nothing is left in the outbox but stale deadlines.
      const notes = rec.history.filter((x) => x.kind === "notice");
      expect(notes.map((x) => x.outcome)).toEqual(["accepted", "accepted"]);
      const left = await h.store.pendingOutbox(id);
      expect(left.filter((r) => r.effect.type === "notify")).toEqual([]);
    },
  );

  it.skipIf(skip)("a succeeded release: exactly one delivery", async () => {
    const { h, rx } = await setUp();
    const id = await createRelease(h, recipe(2, noWindow));
    await drive(h);
    expect((await getRecord(h, id)).state).toBe("succeeded");
    expect(bodies(rx).map((n) => [n.kind, n.step])).toEqual([["succeeded", null]]);
    expect(rx.received).toHaveLength(1);
  });

  it.skipIf(skip)("retries on 5xx with the same delivery id, then delivers once", async () => {
    const { h, rx } = await setUp([503, 502]);
    const id = await createRelease(h, recipe(2, noWindow));
    await drive(h);
    expect((await getRecord(h, id)).state).toBe("succeeded");
    expect(rx.received.map((r) => r.status)).toEqual([503, 502, 200]);
    expect(new Set(rx.received.map((r) => r.headers["x-baton-delivery"])).size).toBe(1);
    const note = (await getRecord(h, id)).history.filter((x) => x.kind === "notice");
    expect(note).toHaveLength(1);
    expect(note[0]!.message).toContain("on try 3");
  });

  it.skipIf(skip)(
    "gives up on a 4xx after one try, and on 5xx after maxTries; the release is never held",
    async () => {
      const { h, rx } = await setUp([404]);
      const id = await createRelease(h, recipe(2, noWindow));
      await drive(h);
      expect(rx.received.map((r) => r.status)).toEqual([404]);
      const notes = (await getRecord(h, id)).history.filter((x) => x.kind === "notice");
      expect(notes.map((n) => n.outcome)).toEqual(["refused"]);
      expect(notes[0]!.message).toMatch(/given up after 1 try: .*HTTP 404/);

      rx.fallback = 500;
      await op(h, "POST", `/v1/releases/${id}/abort`, { reason: "x" });
      const id2 = await createRelease(h, recipe(2, noWindow));
      await drive(h);
      expect((await getRecord(h, id2)).state).toBe("succeeded");
      const tries = rx.received.filter((r) =>
        r.headers["x-baton-delivery"]?.toString().startsWith(`${id2}.`),
      );
      expect(tries.map((r) => r.status)).toEqual([500, 500, 500, 500]);
      const n2 = (await getRecord(h, id2)).history.filter((x) => x.kind === "notice");
      expect(n2[0]!.message).toContain("given up after 4 tries");
    },
  );

  it.skipIf(skip)(
    "a release moves on while the receiver is down (the notice waits in the outbox)",
    async () => {
      const { h, rx } = await setUp([], 10);
      rx.fallback = 503;
      const id = await createRelease(h, recipe(2, noWindow));
      const bad = await firstRunnerStep(h, id);
      // Drive the release, moving the clock only for its own rows (never to a notice's retry).
      const decide = (p: { step_run_id: string }) =>
        (p.step_run_id.endsWith(`_${bad}_f`) ? "fail" : "pass") as "fail" | "pass";
      for (let round = 0; round < 400; round++) {
        const { t, fresh } = await pumpOnce(h, decide);
        if (t.performed > 0 || t.failed > 0 || fresh.length > 0) continue;
        const next = (await h.store.pendingOutbox())
          .filter((r) => r.effect.type !== "deadline" && r.effect.type !== "notify")
          .map((r) => r.due_at)
          .sort((a, b) => a - b)[0];
        if (next === undefined) break;
        h.clock.t = Math.max(h.clock.t, next);
      }
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("rolled_back");
      const waiting = (await h.store.pendingOutbox(id)).filter((r) => r.effect.type === "notify");
      expect(waiting.length).toBeGreaterThanOrEqual(1);
      expect(rx.received.every((r) => r.status === 503)).toBe(true);
    },
  );

  it.skipIf(skip)("a recipe's notify.on narrows what is sent", async () => {
    const { h, rx } = await setUp();
    const id = await createRelease(h, recipe(2, { ...noWindow, notify: { on: ["rolled_back"] } }));
    const bad = await firstRunnerStep(h, id);
    await drive(h, (p) => (p.step_run_id.endsWith(`_${bad}_f`) ? "fail" : "pass"));
    expect(bodies(rx).map((n) => n.kind)).toEqual(["rolled_back"]);
  });

  it.skipIf(skip)("an operator abort is told apart from a failure", async () => {
    const { h, rx } = await setUp();
    const res = await op(h, "POST", "/v1/releases?start=false", recipe(2, noWindow));
    const id = ((await res.json()) as { id: string }).id;
    await op(h, "POST", `/v1/releases/${id}/abort`, { reason: "wrong image" });
    await drive(h);
    const got = bodies(rx);
    expect(got.map((n) => [n.kind, n.cause])).toEqual([["aborted", "operator_abort"]]);
    expect(got[0]!.summary).toContain("aborted by");
  });

  it.skipIf(skip)("a step whose policy is pause: one delivery, paused", async () => {
    const { h, rx } = await setUp();
    const id = await createRelease(
      h,
      recipe(2, { policy: { rerun_window_minutes: 0, on_failure: "pause" } }),
    );
    const bad = await firstRunnerStep(h, id);
    await drive(h, (p) => (p.step_run_id.endsWith(`_${bad}_f`) ? "fail" : "pass"));
    expect((await getRecord(h, id)).state).toBe("paused");
    const got = bodies(rx);
    expect(got.map((n) => n.kind)).toEqual(["paused"]);
    expect(got[0]!.step?.number).toBe(bad + 1);
    expect(rx.received.map((r) => r.headers["x-baton-event"])).toEqual(["paused"]);
  });

  it.skipIf(skip)(
    "a failed runner step in its re-run window: waiting_for_rerun (with the time), then failed and rolled back when the window closes",
    async () => {
      const { h, rx } = await setUp();
      const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 30 } }));
      const bad = await firstRunnerStep(h, id);
      const decide = (p: DispatchPayload) =>
        p.step_run_id.endsWith(`_${bad}_f`) ? "fail" : "pass";
      await drive(h, decide);
      const paused = (await getRecord(h, id)) as unknown as {
        state: string;
        rerun_deadline: number | null;
      };
      expect(paused.state).toBe("paused");
      expect(paused.rerun_deadline).toBeTypeOf("number");
      const first = bodies(rx);
      expect(first.map((n) => n.kind)).toEqual(["waiting_for_rerun"]);
      const hhmm = new Date(paused.rerun_deadline!).toISOString().slice(11, 16);
      expect(first[0]!.summary).toContain(`waiting for a re-run until`);
      expect(first[0]!.summary).toContain(`${hhmm} UTC`);
      // Nobody re-ran the job: the window closes and the release compensates.
      h.clock.t = paused.rerun_deadline! + 1;
      await drive(h, decide);
      expect((await getRecord(h, id)).state).toBe("rolled_back");
      expect(bodies(rx).map((n) => n.kind)).toEqual(["waiting_for_rerun", "failed", "rolled_back"]);
    },
  );

  it.skipIf(skip)(
    "an undo that fails: needs_operator naming the undo step; abandoning it: abandoned with what the operator confirmed",
    async () => {
      const { h, rx } = await setUp();
      const id = await createRelease(h, recipe(2, noWindow));
      // Every runner step fails, forward and backward (smoke passes): the undo fails too.
      await drive(h, (p) => (p.tool.includes("smoke") ? "pass" : "fail"));
      const stuck = (await getRecord(h, id)) as unknown as {
        state: string;
        manifest: { lanes: { id: string }[] };
      };
      expect(stuck.state).toBe("needs_operator");
      const got = bodies(rx);
      expect(got.map((n) => n.kind)).toEqual(["failed", "needs_operator"]);
      expect(got[1]!.step?.direction).toBe("backward");
      const lanes = Object.fromEntries(stuck.manifest.lanes.map((l) => [l.id, "none"]));
      const res = await op(h, "POST", `/v1/releases/${id}/abandon`, {
        reason: "fixed lane-0 by hand",
        lanes,
      });
      expect(res.status).toBe(200);
      await drive(h);
      const all = bodies(rx);
      expect(all.map((n) => n.kind)).toEqual(["failed", "needs_operator", "abandoned"]);
      expect(all[2]!.state).toBe("abandoned");
      expect(all[2]!.summary).toContain("fixed lane-0 by hand");
      expect(all[2]!.summary).toContain(`${stuck.manifest.lanes[0]!.id} runs none`);
      expect(rx.received.at(-1)!.headers["x-baton-event"]).toBe("abandoned");
    },
  );

  it.skipIf(skip)(
    "a gated release held for manual promotion: one signed waiting_for_promotion delivery",
    async () => {
      // No unit reaches the candidate: the gate of wave 1 is inconclusive at max_wait_ms, and
      // the release pauses until an operator promotes or aborts it.
      const base = recipe(2, noWindow);
      const seed = {
        ...base,
        analysis: {
          min_samples: 400,
          bake_ms: 2_000,
          interval_ms: 1_000,
          max_wait_ms: 5_000,
          metrics: [
            { name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.03 } },
          ],
        },
      } as RecipeInput;
      const { h, rx } = await setUp([], undefined, "baton", { seed });
      const id = await createRelease(h, seed);
      await drive(h, undefined, 400, () => h.clock.advance(1_000));
      const rec = await h.store.getRelease(id);
      expect(rec?.state).toBe("paused");
      expect(rec?.gate?.decision).toBe("inconclusive");
      const got = bodies(rx);
      expect(got.map((n) => n.kind)).toEqual(["waiting_for_promotion"]);
      expect(got[0]!.summary).toContain("waits for an operator to promote or abort");
      expect(got[0]!.summary).toContain(`baton promote ${id}`);
      expect(rx.received).toHaveLength(1);
      const r = rx.received[0]!;
      expect(r.headers["x-baton-event"]).toBe("waiting_for_promotion");
      expect(
        verifyBody(
          [HOOK_SECRET],
          r.raw,
          r.headers["x-baton-signature"] as string,
          r.headers["x-baton-timestamp"] as string,
        ),
      ).toEqual({ ok: true });
    },
  );

  it.skipIf(skip)("the slack template sends text and blocks", async () => {
    const { h, rx } = await setUp([], undefined, "slack");
    const id = await createRelease(h, recipe(2, noWindow));
    await drive(h);
    const body = JSON.parse(rx.received[0]!.raw.toString()) as { text: string; blocks: unknown[] };
    expect(body.text).toContain(`${id} succeeded`);
    expect(body.blocks.length).toBeGreaterThan(1);
    expect(JSON.stringify(body.blocks)).toContain(`/releases/${id}`);
  });
});
