/**
 * Drift detection (docs/drift.md) on both stores: after a release succeeded, a lane's weight
 * and image changed by hand at the control plane appear within one observation interval as a
 * `drift` history entry (desired vs observed per field, mixed versions flagged) on the release
 * that decided the lanes, shown by GET /v1/releases/:id and exported by GET /metrics (checked
 * with `promtool check metrics`); recorded once while unchanged; a `drift_cleared` entry once
 * the lanes are back. The release's record digest does not move.
 */
import { execFileSync } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { WebhookNotifier } from "../../engine/src/adapters/notifier/webhook.ts";
import { NOTICE_KINDS, type Notice } from "../../engine/src/domain/notifications.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.ts";
import { IMAGE } from "../unit/recipe-fixture.ts";
import {
  createRelease,
  drive,
  type Harness,
  makeHarness,
  op,
  STORE_KINDS,
  skipStore,
  VIEWER,
} from "./service-harness.ts";

/** `GET /metrics` with the viewer token: the exposition's sample lines (promtool-checked). */
async function scrape(h: Harness): Promise<string[]> {
  const res = await h.engine.app.request("/metrics", {
    headers: { authorization: `Bearer ${VIEWER}` },
  });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  const text = await res.text();
  // Prometheus's own linter of the exposition format (Debian's prometheus package).
  execFileSync("promtool", ["check", "metrics"], { input: text, timeout: 30_000 });
  return text.split("\n").filter((l) => l !== "" && !l.startsWith("#"));
}

const INTERVAL = 30_000;
const HAND = `ghcr.io/acme/summarizer@sha256:${"9e".repeat(32)}`;

describe.each(STORE_KINDS)("drift detection on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  let rx: WebhookReceiver | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
    await rx?.close();
    rx = null;
  });

  const release = async (hh: Harness, id: string) =>
    (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as {
      state: string;
      drift: {
        model: string;
        mixed: boolean;
        lanes: {
          id: string;
          fields: string[];
          desired: Record<string, unknown>;
          observed: Record<string, unknown>;
        }[];
      } | null;
      history: { kind: string; message: string }[];
    };
  const digest = async (hh: Harness, id: string) =>
    ((await (await op(hh, "GET", `/v1/releases/${id}/record`)).json()) as { digest: string })
      .digest;

  it.skipIf(skip)(
    "a weight and an image changed by hand appear within one interval, desired vs observed",
    async () => {
      h = await makeHarness({ kind, config: { driftIntervalMs: INTERVAL } });
      const id = await createRelease(h);
      await drive(h);
      const done = await release(h, id);
      expect(done.state).toBe("succeeded");
      const closedDigest = await digest(h, id);
      // The lanes as the release left them: no drift.
      h.clock.advance(INTERVAL);
      await h.engine.tick();
      expect((await release(h, id)).drift).toBeNull();
      const clean = await scrape(h);
      expect(clean).toContain('baton_drift_lanes{model="summarizer-v7"} 0');
      expect(clean).toContain('baton_releases{state="succeeded"} 1');
      expect(clean).toContain(
        `baton_drift_last_observed_timestamp_seconds ${h.clock.now() / 1000}`,
      );
      expect(clean.filter((l) => l.startsWith("baton_lane_drift{"))).toEqual([]);

      const a = h.cp.lane("lane-a")!;
      const b = h.cp.lane("lane-b")!;
      const before = { a: a.weight, b: b.weight };
      expect(before.a + before.b).toBe(100);
      const moved = before.a >= 10 ? 10 : -10;
      h.cp.seed([
        { ...a, model: "summarizer-v7", weight: before.a - moved, image: HAND },
        { ...b, model: "summarizer-v7", weight: before.b + moved, image: IMAGE },
      ]);
      // Not before the interval has passed: bounded observation.
      h.clock.advance(1000);
      await h.engine.tick();
      expect((await release(h, id)).drift).toBeNull();
      h.clock.advance(INTERVAL);
      await h.engine.tick();
      const seen = await release(h, id);
      expect(seen.drift).not.toBeNull();
      const laneA = seen.drift?.lanes.find((l) => l.id === "lane-a");
      expect(laneA?.fields.sort()).toEqual(["image", "weight"]);
      expect(laneA?.desired).toMatchObject({ weight: before.a, image: IMAGE });
      expect(laneA?.observed).toMatchObject({ weight: before.a - moved, image: HAND });
      const laneB = seen.drift?.lanes.find((l) => l.id === "lane-b");
      expect(laneB?.fields).toEqual(["weight"]);
      expect(seen.drift?.mixed).toBe(true);
      const entries = () =>
        release(h as Harness, id).then((r) => r.history.filter((e) => e.kind === "drift"));
      expect((await entries())[0]?.message).toMatch(
        /^\[drift\] model summarizer-v7: lane-a .*weight desired \d+ observed \d+.*mixed versions/,
      );
      // The same drift as metrics: per lane and field, desired vs observed.
      const m = 'model="summarizer-v7"';
      const drifted = await scrape(h);
      for (const line of [
        `baton_drift_lanes{${m}} 2`,
        `baton_lane_drift{${m},lane="lane-a",field="image"} 1`,
        `baton_lane_drift{${m},lane="lane-a",field="weight"} 1`,
        `baton_lane_drift{${m},lane="lane-b",field="weight"} 1`,
        `baton_lane_weight_percent{${m},lane="lane-a",state="desired"} ${before.a}`,
        `baton_lane_weight_percent{${m},lane="lane-a",state="observed"} ${before.a - moved}`,
        `baton_lane_image_drift_info{${m},lane="lane-a",desired="${IMAGE}",observed="${HAND}"} 1`,
        `baton_serving_images{${m}} 2`,
        `baton_drift_last_observed_timestamp_seconds ${h.clock.now() / 1000}`,
      ]) {
        expect(drifted).toContain(line);
      }
      expect(drifted).not.toContain(`baton_lane_drift{${m},lane="lane-b",field="image"} 1`);

      // Unchanged drift is not written again.
      h.clock.advance(INTERVAL);
      await h.engine.tick();
      expect(await entries()).toHaveLength(1);
      // The closed record's digest is fixed: drift is not a decision.
      expect(await digest(h, id)).toBe(closedDigest);

      // Put back by hand: drift cleared.
      h.cp.seed([
        { ...a, model: "summarizer-v7", image: IMAGE },
        { ...b, model: "summarizer-v7", image: IMAGE },
      ]);
      h.clock.advance(INTERVAL);
      await h.engine.tick();
      const back = await release(h, id);
      expect(back.drift).toBeNull();
      expect(back.history.at(-1)?.kind).toBe("drift_cleared");
      const after = await scrape(h);
      expect(after).toContain(`baton_drift_lanes{${m}} 0`);
      expect(after.filter((l) => l.startsWith("baton_lane_drift{"))).toEqual([]);
      // One observation per interval, none in between: three since the clean scrape.
      const observations = (lines: string[]) =>
        Number(lines.find((l) => l.startsWith("baton_drift_observations_total "))?.split(" ")[1]);
      expect(observations(after)).toBe(observations(clean) + 3);
    },
  );

  it.skipIf(skip)("off unless configured (hand-built engines)", async () => {
    h = await makeHarness({ kind });
    const id = await createRelease(h);
    await drive(h);
    const a = h.cp.lane("lane-a")!;
    h.cp.seed([{ ...a, model: "summarizer-v7", weight: a.weight === 0 ? 5 : 0 }]);
    h.clock.advance(10 * INTERVAL);
    await h.engine.tick();
    expect((await release(h, id)).history.some((e) => e.kind === "drift")).toBe(false);
    // /metrics still counts releases, and says nothing about drift.
    const lines = await scrape(h);
    expect(lines).toContain('baton_releases{state="succeeded"} 1');
    expect(lines.some((l) => l.startsWith("baton_drift"))).toBe(false);
  });

  it.skipIf(skip)("/metrics takes the viewer or operator token, nothing else", async () => {
    h = await makeHarness({ kind, config: { driftIntervalMs: INTERVAL } });
    const none = await h.engine.app.request("/metrics");
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { message: string } }).error.message).toMatch(
      /bearer token/,
    );
    const wrong = await h.engine.app.request("/metrics", {
      headers: { authorization: "Bearer not-a-token-of-this-engine" },
    });
    expect(wrong.status).toBe(401);
    expect((await op(h, "GET", "/metrics")).status).toBe(200);
    expect(await scrape(h)).toContain('baton_releases{state="running"} 0');
  });

  it.skipIf(skip)(
    "a drift is notified once through the outbox, and a restarted engine neither records nor notifies it again",
    async () => {
      const receiver = await startWebhookReceiver();
      rx = receiver;
      const notifier = () =>
        new WebhookNotifier({
          channel: "webhook",
          url: receiver.url,
          secret: "drift-hook-secret",
          template: "baton",
          timeoutMs: 5_000,
        });
      const notify = {
        webhook: null,
        slack: null,
        github: false,
        events: [...NOTICE_KINDS],
        retryBaseMs: 1_000,
        maxTries: 3,
      };
      const first = await makeHarness({
        kind,
        notifiers: [notifier()],
        config: { driftIntervalMs: INTERVAL, notify },
      });
      h = first;
      const id = await createRelease(first);
      await drive(first);
      const a = first.cp.lane("lane-a")!;
      first.cp.seed([
        { ...a, model: "summarizer-v7", weight: a.weight === 0 ? 5 : 0, image: HAND },
      ]);
      first.clock.advance(INTERVAL);
      await first.engine.tick();
      await drive(first); // delivers the outbox
      const drifts = () =>
        receiver.received
          .map((r) => JSON.parse(r.raw.toString("utf8")) as Notice)
          .filter((n) => n.kind === "drift");
      await receiver.waitFor(2, 20_000); // succeeded, then drift
      expect(drifts()).toHaveLength(1);
      expect(drifts()[0]?.release_id).toBe(id);
      expect(drifts()[0]?.summary).toMatch(/lanes drifted .*lane-a .*image desired .*observed/);
      expect(receiver.received.filter((r) => r.headers["x-baton-event"] === "drift")).toHaveLength(
        1,
      );

      // The engine restarts on the same store and control plane: the unchanged drift is known.
      await first.close(true);
      h = null;
      const second = await makeHarness({
        kind,
        store: first.store,
        dir: first.dir,
        cp: first.cp,
        clock: first.clock,
        notifiers: [notifier()],
        config: { driftIntervalMs: INTERVAL, notify },
      });
      h = second;
      second.clock.advance(INTERVAL);
      await second.engine.tick();
      await drive(second);
      second.clock.advance(INTERVAL);
      await second.engine.tick();
      await drive(second);
      const history = (await release(second, id)).history.filter((e) => e.kind === "drift");
      expect(history).toHaveLength(1);
      expect(drifts()).toHaveLength(1);
      // A different drift is new: recorded and notified once more.
      const b = second.cp.lane("lane-b")!;
      second.cp.seed([{ ...b, model: "summarizer-v7", excluded: !b.excluded }]);
      second.clock.advance(INTERVAL);
      await second.engine.tick();
      await drive(second);
      await receiver.waitFor(3, 20_000);
      expect((await release(second, id)).history.filter((e) => e.kind === "drift")).toHaveLength(2);
      expect(drifts()).toHaveLength(2);
    },
  );

  it.skipIf(skip)(
    "two engines on one database: one observes per interval (the store's drift lease), the other takes over when it stops",
    async () => {
      const first = await makeHarness({ kind, config: { driftIntervalMs: INTERVAL } });
      h = first;
      const id = await createRelease(first);
      await drive(first);
      const second = await makeHarness({
        kind,
        store: first.store,
        dir: first.dir,
        cp: first.cp,
        clock: first.clock,
        config: { driftIntervalMs: INTERVAL },
      });
      let reads = 0;
      const lanes = first.cp.lanes.bind(first.cp);
      first.cp.lanes = (...args: Parameters<typeof lanes>) => {
        reads += 1;
        return lanes(...args);
      };
      // Observations of each engine since `base` (the first engine observed while driving).
      const counts = () => [first, second].map((x) => x.engine.drift?.stats().observations ?? 0);
      const base = counts();
      const observed = () => counts().map((n, i) => n - (base[i] ?? 0));
      try {
        for (let i = 1; i <= 3; i++) {
          first.clock.advance(INTERVAL);
          await Promise.all([first.engine.tick(), second.engine.tick()]);
          expect(observed().reduce((a, b) => a + b, 0)).toBe(i);
        }
        // One engine did all of it, and the control plane's lanes were read once per interval.
        const holder = observed()[0] === 3 ? 0 : 1;
        expect(observed()[holder]).toBe(3);
        expect(reads).toBe(3);
        // A change by hand is recorded once, by whichever engine observes.
        const a = first.cp.lane("lane-a")!;
        first.cp.seed([{ ...a, model: "summarizer-v7", image: HAND }]);
        first.clock.advance(INTERVAL);
        await Promise.all([first.engine.tick(), second.engine.tick()]);
        const drift = (await release(first, id)).history.filter((e) => e.kind === "drift");
        expect(drift).toHaveLength(1);
        // The holder stops cleanly: the other engine observes at its next interval.
        const [stopping, staying] = holder === 0 ? [first, second] : [second, first];
        const before = staying.engine.drift?.stats().observations ?? 0;
        await stopping.close(true);
        staying.clock.advance(INTERVAL);
        await staying.engine.tick();
        expect(staying.engine.drift?.stats().observations).toBe(before + 1);
        // It knows the drift already recorded: not recorded again.
        expect((await release(staying, id)).history.filter((e) => e.kind === "drift")).toHaveLength(
          1,
        );
      } finally {
        // `first` owns the store (closed after each test); `second` only its engine.
        await second.close(true).catch(() => {});
      }
    },
  );
});
