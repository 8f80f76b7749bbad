/**
 * Release labels at the reference router proxy (docs/control-plane.md "Release labels"), over
 * HTTP: every request forwarded to a lane carries `baton-release` (the release of the latest
 * change to the model at the control plane, `none` before any) and `baton-arm`, read at lane
 * stand-ins written here (plain node:http, no router code); a client's own values are replaced;
 * the router's counts per release and arm equal the lanes' counts by label.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { ObservedRelease } from "../../engine/src/control-plane/observed-release.ts";
import {
  type RouterProxyHandle,
  startRouterProxy,
} from "../../engine/src/control-plane/router-proxy.ts";

/** What one lane stand-in saw: requests per `release|arm` label, and requests missing one. */
interface LaneSeen {
  labels: Map<string, number>;
  unlabelled: number;
}

describe("release labels at the router proxy", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  /** A lane's endpoint that counts the labels each request arrives with. */
  async function laneServer(seen: LaneSeen): Promise<string> {
    const server = http.createServer((req, res) => {
      req.resume();
      const release = req.headers["baton-release"];
      const arm = req.headers["baton-arm"];
      if (typeof release !== "string" || typeof arm !== "string") seen.unlabelled++;
      else seen.labels.set(`${release}|${arm}`, (seen.labels.get(`${release}|${arm}`) ?? 0) + 1);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ release, arm }));
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

  it("every forwarded request carries its release and arm; counts per release at the router equal the lanes'", async () => {
    const cp = new MemoryControlPlane({ model: "m", now: () => 1 });
    cp.seed([
      { id: "a", weight: 100 },
      { id: "b", weight: 0 },
    ]);
    const seen: Record<string, LaneSeen> = {
      a: { labels: new Map(), unlabelled: 0 },
      b: { labels: new Map(), unlabelled: 0 },
    };
    const ups: Record<string, string> = {
      a: await laneServer(seen.a as LaneSeen),
      b: await laneServer(seen.b as LaneSeen),
    };
    const observed = new ObservedRelease(
      (q) => cp.core.history(q),
      (model) => cp.core.lanes(model),
    );
    const p: RouterProxyHandle = await startRouterProxy({
      lanes: (model) => cp.core.lanes(model),
      upstream: (id) => ups[id] ?? null,
      release: (model) => observed.of(model),
      assignment: {
        unit: () => "request",
        arm: (_model, lane) => (lane === "b" ? "candidate" : "control"),
      },
    });
    closers.push(() => p.close());
    const send = async (n: number, forged = false) => {
      for (let i = 0; i < n; i++) {
        const res = await fetch(`${p.url}/route/m/v1/generate`, {
          headers: forged ? { "baton-release": "r999", "baton-arm": "candidate" } : {},
        });
        expect(res.status).toBe(200);
        await res.arrayBuffer();
      }
    };
    const write = (release: string, key: string, weights: Record<string, number>) =>
      cp.core.write(
        { operation_key: `${release}:${key}`, release_id: release, generation: 1 },
        { kind: "set_traffic", model: "m", weights },
      );

    await send(20); // before any release wrote the model: none
    write("r1", "5:fwd:traffic=10", { a: 90, b: 10 });
    await send(100, true); // a client's own labels are replaced
    write("r2", "5:fwd:traffic=50", { a: 50, b: 50 });
    await send(100);
    // A lane write alone moves the label too: r3 excludes lane b.
    cp.core.write(
      { operation_key: "r3:1:fwd:lane=b:excluded=true", release_id: "r3", generation: 1 },
      { kind: "set_marker", lane: "b", marker: "excluded", present: true },
    );
    await send(10);

    // At the lanes: every request labelled, under the release in force when it was sent.
    expect(seen.a?.unlabelled).toBe(0);
    expect(seen.b?.unlabelled).toBe(0);
    const atLanes: Record<string, Record<string, number>> = {};
    for (const s of Object.values(seen)) {
      for (const [label, n] of s.labels) {
        const [release, arm] = label.split("|") as [string, string];
        atLanes[release] ??= {};
        (atLanes[release] as Record<string, number>)[arm] =
          ((atLanes[release] as Record<string, number>)[arm] ?? 0) + n;
      }
    }
    expect(atLanes).toEqual({
      none: { control: 20 },
      r1: { control: 90, candidate: 10 },
      r2: { control: 50, candidate: 50 },
      r3: { control: 10 },
    });
    expect(seen.b?.labels.get("r2|candidate")).toBe(50);
    expect(seen.a?.labels.get("r1|candidate")).toBeUndefined();
    // At the router: the same counts per release and arm, read from its counts endpoint.
    const counts = (await (await fetch(`${p.url}/counts/m`)).json()) as {
      releases: Record<string, Record<string, number>>;
    };
    const nonZero = Object.fromEntries(
      Object.entries(counts.releases).map(([r, arms]) => [
        r,
        Object.fromEntries(Object.entries(arms).filter(([, n]) => n > 0)),
      ]),
    );
    expect(nonZero).toEqual(atLanes);
  });

  it("without arms or a release source the labels say unknown and none", async () => {
    const seen: LaneSeen = { labels: new Map(), unlabelled: 0 };
    const up = await laneServer(seen);
    const p = await startRouterProxy({
      lanes: () => [
        {
          id: "a",
          model: "m",
          weight: 100,
          excluded: false,
          capabilities: [],
          advertised: false,
          updated_at: 0,
        },
      ],
      upstream: () => up,
    });
    closers.push(() => p.close());
    const res = await fetch(`${p.url}/route/m/x`);
    expect(res.headers.get("baton-release")).toBe("none");
    expect(res.headers.get("baton-arm")).toBe("unknown");
    await res.arrayBuffer();
    expect([...seen.labels]).toEqual([["none|unknown", 1]]);
    expect(p.counts("m").releases).toEqual({ none: { candidate: 0, control: 0, unknown: 1 } });
  });
});
