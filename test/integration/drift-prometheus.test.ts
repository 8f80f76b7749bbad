/**
 * The drift drill seen by a real Prometheus (Debian's `prometheus`), on both stores: the engine
 * is served over HTTP, Prometheus scrapes its `GET /metrics` every second with the viewer token
 * (docs/drift.md "Scrape it with Prometheus"); after a release succeeded, a lane's weight and
 * image changed by hand at the control plane show up in Prometheus's own query API after one
 * observation interval: the drifted fields, desired vs observed weight, and both images.
 */
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { afterEach, describe, expect, it } from "vitest";
import { type PrometheusHandle, startPrometheus } from "../support/prometheus.ts";
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

const INTERVAL = 30_000;
const HAND = `ghcr.io/acme/summarizer@sha256:${"9e".repeat(32)}`;

type Series = { metric: Record<string, string>; value: [number, string] }[];

/** Polls Prometheus's instant query until `ok(result)`; throws with the last result after 60 s. */
async function queryUntil(
  prom: PrometheusHandle,
  q: string,
  ok: (r: Series) => boolean,
): Promise<Series> {
  let last: Series = [];
  const end = Date.now() + 60_000;
  while (Date.now() < end) {
    const res = await fetch(`${prom.url}/api/v1/query?query=${encodeURIComponent(q)}`);
    if (res.ok) {
      last = ((await res.json()) as { data: { result: Series } }).data.result;
      if (ok(last)) return last;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`[test] prometheus: ${q} never matched; last ${JSON.stringify(last)}`);
}

describe.each(STORE_KINDS)("drift metrics scraped by Prometheus on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  let prom: PrometheusHandle | null = null;
  let server: ReturnType<typeof serve> | null = null;
  afterEach(async () => {
    await prom?.close();
    prom = null;
    const s = server;
    if (s) await new Promise<void>((r) => s.close(() => r()));
    server = null;
    await h?.close();
    h = null;
  });

  it.skipIf(skip)(
    "a weight and an image changed by hand reach Prometheus, desired vs observed",
    async () => {
      const hh = await makeHarness({ kind, config: { driftIntervalMs: INTERVAL } });
      h = hh;
      const id = await createRelease(hh);
      await drive(hh);
      expect(
        ((await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as { state: string }).state,
      ).toBe("succeeded");
      const s = serve({ fetch: hh.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
      server = s;
      await new Promise<void>((r) => s.once("listening", () => r()));
      const target = `127.0.0.1:${(s.address() as AddressInfo).port}`;
      prom = await startPrometheus([target], { job: "baton-engine", bearerToken: VIEWER });

      // Scraped with the viewer token: the target is up and the release is counted.
      await queryUntil(prom, 'up{job="baton-engine"}', (r) => r[0]?.value[1] === "1");
      await queryUntil(prom, 'baton_releases{state="succeeded"}', (r) => r[0]?.value[1] === "1");

      const a = hh.cp.lane("lane-a")!;
      const b = hh.cp.lane("lane-b")!;
      const moved = a.weight >= 10 ? 10 : -10;
      hh.cp.seed([
        { ...a, model: "summarizer-v7", weight: a.weight - moved, image: HAND },
        { ...b, model: "summarizer-v7", weight: b.weight + moved, image: IMAGE },
      ]);
      hh.clock.advance(INTERVAL);
      await hh.engine.tick();

      const fields = await queryUntil(
        prom,
        'baton_lane_drift{model="summarizer-v7",lane="lane-a"}',
        (r) => r.length === 2,
      );
      expect(fields.map((r) => r.metric.field).sort()).toEqual(["image", "weight"]);
      const weights = await queryUntil(
        prom,
        'baton_lane_weight_percent{model="summarizer-v7",lane="lane-a"}',
        (r) =>
          r.some((x) => x.metric.state === "observed" && x.value[1] === String(a.weight - moved)),
      );
      expect(weights.find((x) => x.metric.state === "desired")?.value[1]).toBe(String(a.weight));
      const images = await queryUntil(prom, "baton_lane_image_drift_info", (r) => r.length === 1);
      expect(images[0]?.metric).toMatchObject({ lane: "lane-a", desired: IMAGE, observed: HAND });
      await queryUntil(
        prom,
        'baton_drift_lanes{model="summarizer-v7"}',
        (r) => r[0]?.value[1] === "2",
      );
      // The alert of docs/drift.md fires on exactly the drifted fields.
      const alert = await queryUntil(
        prom,
        "max by (model, lane, field) (baton_lane_drift) == 1",
        (r) => r.length === 3,
      );
      expect(alert.map((r) => `${r.metric.lane}/${r.metric.field}`).sort()).toEqual([
        "lane-a/image",
        "lane-a/weight",
        "lane-b/weight",
      ]);
    },
    180_000,
  );
});
