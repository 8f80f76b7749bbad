/**
 * Drift observation is bounded (docs/drift.md "How it is observed"), on both stores, seen from
 * the control plane's side: the engine reads the lanes over real HTTP (the HTTP control-plane
 * adapter) from a server that counts every request and can hang or fail. However often the
 * engine ticks, it reads at most once per observation interval; a read that hangs is given up
 * after the timeout and never repeated before the next interval, nor stacked on itself; a
 * failing control plane is asked once per interval (no storm). Meanwhile the API, /healthz
 * and /metrics answer, and /metrics counts the timeouts and failures.
 */
import { afterEach, describe, expect, it } from "vitest";
import { HttpControlPlane } from "../../engine/src/adapters/http-control-plane/index.ts";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import type { ControlPlane } from "../../engine/src/ports/control-plane.ts";
import { type LanesServer, startLanesServer } from "../support/lanes-server.ts";
import {
  createRelease,
  drive,
  FakeClock,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  seedControlPlane,
  skipStore,
  VIEWER,
} from "./service-harness.ts";

const INTERVAL = 30_000;

/** Polls `f` every 50 ms until true; throws naming `what` after `ms`. */
async function until(f: () => boolean, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error(`[test] ${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.each(STORE_KINDS)("drift observation bounds on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  let server: LanesServer | null = null;
  afterEach(async () => {
    await server?.close();
    server = null;
    await h?.close();
    h = null;
  });

  const metric = async (hh: Harness, line: string): Promise<number> => {
    const res = await hh.engine.app.request("/metrics", {
      headers: { authorization: `Bearer ${VIEWER}` },
    });
    expect(res.status).toBe(200);
    const found = (await res.text()).split("\n").find((l) => l.startsWith(`${line} `));
    return Number(found?.slice(line.length + 1));
  };

  it.skipIf(skip)(
    "a control plane that hangs, then fails, is asked once per interval; the engine answers meanwhile",
    async () => {
      const clock = new FakeClock();
      const mem = new MemoryControlPlane({ model: "summarizer-v7", now: () => clock.now() });
      seedControlPlane(mem, recipe());
      const srv = await startLanesServer(mem);
      server = srv;
      const http = new HttpControlPlane({ baseUrl: srv.url, timeoutMs: 60_000 });
      // Writes go to the in-memory control plane; every lanes read crosses HTTP to `srv`.
      const cp: ControlPlane = {
        apply: (o, ctx) => mem.apply(o, ctx),
        observe: (o, ctx) => mem.observe(o, ctx),
        lanes: (model, signal) => http.lanes(model, signal),
      };
      h = await makeHarness({
        kind,
        clock,
        cp: mem,
        controlPlane: cp,
        config: { driftIntervalMs: INTERVAL },
      });
      const id = await createRelease(h);
      await drive(h);
      expect((await (await op(h, "GET", `/v1/releases/${id}`)).json()).state).toBe("succeeded");
      clock.advance(INTERVAL);
      await h.engine.tick();
      const lanesReads = () => srv.received.filter((p) => p.startsWith("/v1/lanes")).length;
      const observations = await metric(h, "baton_drift_observations_total");
      expect(observations).toBeGreaterThanOrEqual(1);

      // Ticks within one interval: no read at all.
      const before = lanesReads();
      for (let i = 0; i < 20; i++) await h.engine.tick();
      expect(lanesReads()).toBe(before);

      // The control plane hangs: one read, held open; more ticks (even past further
      // intervals) do not start another while it is held.
      srv.mode = "hang";
      clock.advance(INTERVAL);
      const ticks = [h.engine.tick()];
      await until(() => srv.held() === 1, "the held lanes read");
      for (let i = 0; i < 10; i++) {
        clock.advance(INTERVAL);
        ticks.push(h.engine.tick());
      }
      // The engine answers while its observation hangs.
      const page = await op(h, "GET", `/v1/releases/${id}`);
      expect(page.status).toBe(200);
      expect((await h.engine.app.request("/healthz")).status).toBe(200);
      expect(await metric(h, 'baton_drift_observation_failures_total{reason="timeout"}')).toBe(0);
      expect(srv.held()).toBe(1);
      expect(lanesReads()).toBe(before + 1);
      // The observer gives up after its timeout (5 s) and closes the request.
      await Promise.all(ticks);
      await until(() => srv.held() === 0, "the engine dropping the held read");
      expect(lanesReads()).toBe(before + 1);
      expect(await metric(h, 'baton_drift_observation_failures_total{reason="timeout"}')).toBe(1);
      expect(await metric(h, "baton_drift_observations_total")).toBe(observations);

      // The control plane answers 503: once per interval, however many ticks.
      srv.mode = "error";
      for (let round = 0; round < 3; round++) {
        clock.advance(INTERVAL);
        for (let i = 0; i < 5; i++) await h.engine.tick();
      }
      expect(lanesReads()).toBe(before + 1 + 3);
      expect(
        await metric(h, 'baton_drift_observation_failures_total{reason="control_plane"}'),
      ).toBe(3);

      // Back up: observed again at the next interval, and only then.
      srv.mode = "ok";
      await h.engine.tick();
      expect(lanesReads()).toBe(before + 4);
      clock.advance(INTERVAL);
      await h.engine.tick();
      expect(lanesReads()).toBe(before + 5);
      expect(await metric(h, "baton_drift_observations_total")).toBe(observations + 1);
      expect(await metric(h, "baton_drift_last_observed_timestamp_seconds")).toBe(
        clock.now() / 1000,
      );
      expect(await metric(h, 'baton_drift_lanes{model="summarizer-v7"}')).toBe(0);
    },
    120_000,
  );
});
