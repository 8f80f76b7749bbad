/**
 * The reference router as a shadow router (docs/control-plane.md "The router as a shadow
 * router"), observed from outside: requests go through the router over HTTP, users read who
 * answered them, and each lane counts what it received (mirrored copies carry `baton-shadow: 1`).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { LaneState } from "../../engine/src/control-plane/model.ts";
import {
  type RouterProxyHandle,
  type ShadowOptions,
  startRouterProxy,
} from "../../engine/src/control-plane/router-proxy.ts";

const lane = (id: string, weight: number): LaneState =>
  ({
    id,
    model: "m",
    weight,
    excluded: false,
    capabilities: [],
    advertised: false,
    updated_at: 0,
  }) as LaneState;

/** What one lane received: plain requests and mirrored copies, with their authorization. */
interface Received {
  plain: number;
  mirrored: number;
  mirroredAuth: string[];
}

describe("router proxy as a shadow router", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  /** A lane endpoint answering `status` with its own id, counting what it received. */
  async function laneServer(id: string, status = 200) {
    const got: Received = { plain: 0, mirrored: 0, mirroredAuth: [] };
    const server = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        if (req.headers["baton-shadow"] === "1") {
          got.mirrored++;
          got.mirroredAuth.push(String(req.headers.authorization));
        } else got.plain++;
        res.writeHead(status, { "content-type": "text/plain" });
        res.end(id);
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    closers.push(
      () =>
        new Promise<void>((r) => {
          server.close(() => r());
          server.closeAllConnections();
        }),
    );
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, got };
  }

  /**
   * A router over `base` (weight 100, the baseline), `cand` (candidate, shadow-safe, weight 0,
   * answering 500) and `unsafe` (candidate, weight 0, not declared shadow-safe).
   */
  async function world(over: Partial<ShadowOptions> & { share?: number; rate?: number } = {}) {
    const base = await laneServer("base");
    const cand = await laneServer("cand", 500);
    const unsafe = await laneServer("unsafe");
    const urls: Record<string, string> = { base: base.url, cand: cand.url, unsafe: unsafe.url };
    const router: RouterProxyHandle = await startRouterProxy({
      lanes: () => [lane("base", 100), lane("cand", 0), lane("unsafe", 0)],
      upstream: (id) => urls[id] ?? null,
      shadow: {
        caps: () => ({ share: over.share ?? 100, rate_per_s: over.rate ?? 10_000 }),
        safe: (_m, id) => id === "cand",
        candidate: (_m, id) => id !== "base",
        authorize: (h) => h.authorization === "Bearer good",
        ...over,
      },
    });
    closers.push(() => router.close());
    return { router, base, cand, unsafe };
  }

  /** Sends `n` requests through the router one after another; returns who answered each. */
  async function send(router: RouterProxyHandle, n: number, auth = "Bearer good") {
    const answers: string[] = [];
    for (let i = 0; i < n; i++) {
      const res = await fetch(`${router.url}/route/m/v1/summarize`, {
        method: "POST",
        headers: { authorization: auth, "content-type": "application/json" },
        body: JSON.stringify({ text: `request ${i}` }),
      });
      answers.push(`${res.status} ${await res.text()} ${res.headers.get("baton-lane")}`);
    }
    return answers;
  }

  /** Waits (bounded) until every admitted copy was sent and answered. */
  async function settled(router: RouterProxyHandle) {
    for (let i = 0; i < 500; i++) {
      const s = (await (await fetch(`${router.url}/counts/m`)).json()).shadow;
      if (s.sent + s.too_large === s.mirrored) return s;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error("mirrored copies were not all answered");
  }

  it("answers users only from the baseline: the candidate's answers to mirrored requests are discarded", async () => {
    const { router, base, cand } = await world();
    const answers = await send(router, 50);
    const shadow = await settled(router);
    // Every user got the baseline's answer; the candidate answered none of them.
    expect(answers).toEqual(new Array(50).fill("200 base base"));
    expect(base.got).toMatchObject({ plain: 50, mirrored: 0 });
    expect(cand.got).toMatchObject({ plain: 0, mirrored: 50 });
    // The router counts no user request on the candidate lane, and the shadow outcomes side by side.
    const counts = await (await fetch(`${router.url}/counts/m`)).json();
    expect(counts.lanes.cand).toBeUndefined();
    expect(shadow).toMatchObject({
      requests: 50,
      mirrored: 50,
      sent: 50,
      candidate: { requests: 50, errors: 50 },
      baseline: { requests: 50, errors: 0 },
    });
  });

  it("caps the share: at most share% of the model's requests are mirrored", async () => {
    const { router, cand } = await world({ share: 10 });
    await send(router, 95);
    const shadow = await settled(router);
    expect(cand.got.mirrored).toBe(9); // ⌊95 × 10%⌋
    expect(shadow).toMatchObject({ requests: 95, mirrored: 9, skipped: { share: 86 } });
  });

  it("caps the rate: at most rate_per_s copies in each second of the clock", async () => {
    let now = 1_000_000;
    const { router, cand } = await world({ rate: 4, now: () => now });
    await send(router, 10);
    await settled(router);
    expect(cand.got.mirrored).toBe(4);
    now += 999; // the same second
    await send(router, 3);
    await settled(router);
    expect(cand.got.mirrored).toBe(4);
    now += 1; // the next second
    await send(router, 10);
    const shadow = await settled(router);
    expect(cand.got.mirrored).toBe(8);
    expect(shadow).toMatchObject({ requests: 23, mirrored: 8, skipped: { rate: 15 } });
  });

  it("mirrors to no lane that does not declare shadow_safe", async () => {
    const { router, cand, unsafe } = await world();
    await send(router, 20);
    await settled(router);
    expect(unsafe.got).toMatchObject({ plain: 0, mirrored: 0 });
    expect(cand.got.mirrored).toBe(20);

    // With the shadow-safe lane gone, nothing is mirrored at all.
    const only = await world({ safe: () => false });
    await send(only.router, 20);
    const shadow = await settled(only.router);
    expect(only.unsafe.got).toMatchObject({ plain: 0, mirrored: 0 });
    expect(only.cand.got).toMatchObject({ plain: 0, mirrored: 0 });
    expect(shadow).toMatchObject({ mirrored: 0, skipped: { no_lane: 20 } });
  });

  it("checks a request's authorization before copying it: an unauthorized request is not mirrored", async () => {
    const { router, base, cand } = await world();
    const bad = await send(router, 10, "Bearer stolen");
    await send(router, 5, "Bearer good");
    const shadow = await settled(router);
    // The unauthorized requests still reach the baseline (which answers them as it would) ...
    expect(bad).toEqual(new Array(10).fill("200 base base"));
    expect(base.got.plain).toBe(15);
    // ... but no copy of one reached a shadow lane.
    expect(cand.got.mirrored).toBe(5);
    expect(new Set(cand.got.mirroredAuth)).toEqual(new Set(["Bearer good"]));
    expect(shadow).toMatchObject({ mirrored: 5, skipped: { unauthorized: 10 } });
  });

  it("mirrors nothing while no shadow phase is in force", async () => {
    const { router, cand } = await world({ caps: () => null });
    await send(router, 10);
    expect(cand.got).toMatchObject({ plain: 0, mirrored: 0 });
    const counts = await (await fetch(`${router.url}/counts/m`)).json();
    expect(counts.shadow).toMatchObject({ requests: 0, mirrored: 0 });
  });

  it("counts a copy whose answer breaks off as a candidate error, once in each arm, on /metrics too", async () => {
    const base = await laneServer("base");
    // A shadow lane that starts its answer, then resets the connection.
    const broken = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/plain" });
        res.write("partial");
        setImmediate(() => res.socket?.destroy());
      });
    });
    await new Promise<void>((r) => broken.listen(0, "127.0.0.1", r));
    closers.push(
      () =>
        new Promise<void>((r) => {
          broken.close(() => r());
          broken.closeAllConnections();
        }),
    );
    const urls: Record<string, string> = {
      base: base.url,
      cand: `http://127.0.0.1:${(broken.address() as AddressInfo).port}`,
    };
    const router = await startRouterProxy({
      lanes: () => [lane("base", 100), lane("cand", 0)],
      upstream: (id) => urls[id] ?? null,
      shadow: {
        caps: () => ({ share: 100, rate_per_s: 10_000 }),
        safe: (_m, id) => id === "cand",
        candidate: (_m, id) => id === "cand",
        authorize: () => true,
      },
    });
    closers.push(() => router.close());
    await send(router, 20);
    const shadow = await settled(router);
    expect(shadow.sent).toBe(20);
    expect(shadow.candidate.requests).toBe(20);
    expect(shadow.baseline.requests).toBe(20);
    // The broken-off answers are errors of the candidate, and /metrics says the same.
    expect(shadow.candidate.errors).toBe(20);
    const text = await (await fetch(`${router.url}/metrics`)).text();
    expect(text).toContain('baton_shadow_units_total{model="m",lane="cand",arm="candidate"} 20');
    expect(text).toContain('baton_shadow_units_total{model="m",lane="base",arm="control"} 20');
  });
});
