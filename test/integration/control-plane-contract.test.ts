/** Runs the control-plane contract suite against the in-memory double and the reference server. */

import { HttpControlPlane } from "../../engine/src/adapters/http-control-plane/index.ts";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { startEmbeddedControlPlane } from "../../engine/src/control-plane/embedded.ts";
import type { LaneState, RouteResult } from "../../engine/src/control-plane/model.ts";
import { controlPlaneContract } from "../contract/control-plane.contract.ts";

let seeds = 0;
controlPlaneContract("in-memory double", async () => {
  const cp = new MemoryControlPlane();
  return {
    cp,
    applications: async (key) => cp.applications(key),
    weights: async () => cp.weights(),
    lane: async (id) => cp.lane(id),
    route: async (n) => cp.route(n),
    seed: async (lanes) => cp.seed(lanes),
    close: async () => {},
  };
});

controlPlaneContract("reference server over HTTP", async () => {
  const { handle: server } = await startEmbeddedControlPlane({ dataDir: ":memory:" });
  const cp = new HttpControlPlane({ baseUrl: server.url, token: server.writeToken });
  const get = async (path: string) => {
    const res = await fetch(`${server.url}${path}`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  return {
    cp,
    applications: async (key) =>
      (
        (await get(`/v1/history?operation_key=${encodeURIComponent(key)}`)).body
          .history as unknown[]
      ).length,
    weights: async () => {
      const r = await get("/v1/models/default/traffic");
      return r.status === 404 ? {} : (r.body.weights as Record<string, number>);
    },
    lane: async (id) => {
      const r = await get(`/v1/lanes/${encodeURIComponent(id)}`);
      return r.status === 404 ? undefined : (r.body as unknown as LaneState);
    },
    route: async (requests) => {
      const res = await fetch(`${server.url}/v1/route`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ requests }),
      });
      return (await res.json()) as RouteResult;
    },
    // Seeded through the contract itself (a keyed traffic write), as it would be on any service.
    seed: async (lanes) => {
      // Lanes are declared first: a write never creates one.
      for (const l of lanes) {
        const res = await fetch(`${server.url}/v1/lanes/${encodeURIComponent(l.id)}`, {
          method: "PUT",
          headers: {
            "content-type": "application/json",
            authorization: `Bearer ${server.writeToken}`,
            "Idempotency-Key": `seed:declare:${l.id}`,
            "Baton-Release-Id": "seed",
            "Baton-Generation": "0",
          },
          body: JSON.stringify({ model: "default" }),
        });
        if (res.status !== 200) throw new Error(`declare failed: ${await res.text()}`);
      }
      const r = await cp.apply(
        {
          op: "set_traffic",
          weights: Object.fromEntries(lanes.map((l) => [l.id, l.weight ?? 0])),
          percent: 0,
        },
        {
          operation_key: `seed:traffic:${++seeds}`,
          release_id: "seed",
          generation: 0,
          model: "default",
        },
      );
      if (r.outcome !== "ok") throw new Error(`seed failed: ${JSON.stringify(r)}`);
    },
    close: () => server.close(),
  };
});
