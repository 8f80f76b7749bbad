/**
 * The reference router as an HTTP proxy (engine/src/control-plane/router-proxy.ts): requests
 * reach the lanes' own endpoints by the control plane's weights, every batch split exactly, and
 * the lanes' answers come back; no lane, or a lane that does not answer, is a clear error.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { LaneState } from "../../engine/src/control-plane/model.ts";
import {
  BatchRouter,
  batchOrder,
  type RouterProxyHandle,
  startRouterProxy,
} from "../../engine/src/control-plane/router-proxy.ts";

const lane = (id: string, weight: number, excluded = false): LaneState =>
  ({
    id,
    model: "m",
    weight,
    excluded,
    capabilities: [],
    advertised: false,
    updated_at: 0,
  }) as LaneState;

/** `counts` of `n` picks of the router. */
function picks(r: BatchRouter, n: number) {
  const counts: Record<string, number> = {};
  const plans = new Set<number>();
  let size = 0;
  for (let i = 0; i < n; i++) {
    const p = r.next("m")!;
    counts[p.lane] = (counts[p.lane] ?? 0) + 1;
    plans.add(p.plan);
    size = p.size;
  }
  return { counts, plans, size };
}

describe("BatchRouter", () => {
  it("splits every batch exactly: 10/90 in 100, 1/2 in 102 (a whole multiple of the weights' sum)", () => {
    let lanes = [lane("a", 10), lane("b", 90)];
    const r = new BatchRouter(() => lanes);
    expect(picks(r, 100)).toMatchObject({ counts: { a: 10, b: 90 }, size: 100 });
    lanes = [lane("a", 1), lane("b", 2), lane("c", 7, true)];
    const p = picks(r, 102);
    expect(p).toMatchObject({ counts: { a: 34, b: 68 }, size: 102 });
    expect(p.plans.size).toBe(1);
  });

  it("plans a new batch when the weights change, and routes nothing when no lane takes traffic", () => {
    let lanes = [lane("a", 50), lane("b", 50)];
    const r = new BatchRouter(() => lanes);
    const first = r.next("m")!;
    lanes = [lane("a", 0), lane("b", 100)];
    const second = r.next("m")!;
    expect(second.plan).not.toBe(first.plan);
    expect(second).toMatchObject({ lane: "b", index: 0 });
    lanes = [lane("a", 0), lane("b", 100, true)];
    expect(r.next("m")).toBeNull();
  });

  it("interleaves a batch evenly", () => {
    const order = batchOrder({ a: 2, b: 8 });
    expect(order).toHaveLength(10);
    expect(order.filter((x) => x === "a")).toHaveLength(2);
    // Not both at one end: the first a within the first half, the second in the second half.
    expect(order.indexOf("a")).toBeLessThan(5);
    expect(order.lastIndexOf("a")).toBeGreaterThanOrEqual(5);
  });
});

describe("router proxy over HTTP", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  /** A lane's endpoint answering with `image`; null: one that drops every connection. */
  async function laneServer(image: string | null): Promise<string> {
    const server = http.createServer((req, res) => {
      req.resume();
      if (image === null) return res.destroy();
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ image, path: req.url }));
    });
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", () => ok()));
    closers.push(
      () =>
        new Promise<void>((ok) => {
          server.close(() => ok());
          server.closeAllConnections();
        }),
    );
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async function proxy(lanes: () => LaneState[], ups: Record<string, string>) {
    const p: RouterProxyHandle = await startRouterProxy({
      lanes,
      upstream: (id) => ups[id] ?? null,
    });
    closers.push(() => p.close());
    return p;
  }

  it("sends each lane its exact share and returns the lane's own answer", async () => {
    const ups = { a: await laneServer("old"), b: await laneServer("new") };
    const p = await proxy(() => [lane("a", 90), lane("b", 10)], ups);
    const answers = await Promise.all(
      Array.from({ length: 100 }, async () => {
        const res = await fetch(`${p.url}/route/m/v1/generate?x=1`);
        return {
          lane: res.headers.get("baton-lane"),
          batch: res.headers.get("baton-batch"),
          ...((await res.json()) as { image: string; path: string }),
        };
      }),
    );
    expect(answers.filter((a) => a.image === "new")).toHaveLength(10);
    expect(answers.filter((a) => a.lane === "a" && a.image === "old")).toHaveLength(90);
    expect(answers[0]?.path).toBe("/v1/generate?x=1");
    expect(new Set(answers.map((a) => a.batch?.split("/")[0])).size).toBe(1);
  });

  it("503 when no lane takes traffic, 502 naming a lane that does not answer", async () => {
    const none = await proxy(() => [lane("a", 100, true)], {});
    const res = await fetch(`${none.url}/route/m/x`);
    expect(res.status).toBe(503);
    expect(await res.text()).toContain("no lane of m takes traffic");
    const dead = await proxy(() => [lane("a", 100)], { a: await laneServer(null) });
    const r2 = await fetch(`${dead.url}/route/m/x`);
    expect(r2.status).toBe(502);
    expect(r2.headers.get("baton-lane")).toBe("a");
    expect(await r2.text()).toContain("[router] lane a");
  });

  it("a kept-alive connection the lane closes as it is reused: the request is sent again on a new one", async () => {
    // The lane answers the first request on each connection and drops the connection when a
    // second one arrives on it (its idle timeout firing as the router reuses the socket).
    const served = new WeakMap<object, number>();
    let connections = 0;
    const server = http.createServer((req, res) => {
      req.resume();
      const n = (served.get(req.socket) ?? 0) + 1;
      served.set(req.socket, n);
      if (n > 1) return req.socket.destroy();
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ image: "new" }));
    });
    server.on("connection", () => connections++);
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", () => ok()));
    closers.push(
      () =>
        new Promise<void>((ok) => {
          server.close(() => ok());
          server.closeAllConnections();
        }),
    );
    const p = await proxy(() => [lane("a", 100)], {
      a: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${p.url}/route/m/x`);
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    expect(statuses).toEqual([200, 200, 200]);
    // Each reuse met a dropped connection and went again on a new one.
    expect(connections).toBe(3);
  });
});
