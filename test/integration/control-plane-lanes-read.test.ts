/**
 * The fleet page's read of the control plane: the HTTP adapter's `lanes(model)` against the
 * reference server (its SQLite store, so an integration test: the Node 24 CI step runs only
 * unit tests without native modules).
 */
import { describe, expect, it } from "vitest";
import { HttpControlPlane } from "../../engine/src/adapters/http-control-plane/index.ts";
import { startControlPlane } from "../../engine/src/control-plane/server.ts";

describe("control-plane lanes read", () => {
  it("the HTTP adapter lists the reference server's lanes of one model", async () => {
    const server = await startControlPlane({ port: 0, dataFile: ":memory:", faults: false });
    try {
      server.core.seed([
        { id: "a", model: "m1", weight: 100 },
        { id: "b", model: "m2", weight: 100 },
      ]);
      const cp = new HttpControlPlane({ baseUrl: server.url, token: server.writeToken });
      const read = await cp.lanes("m1");
      expect(read.ok && read.lanes.map((l) => l.id)).toEqual(["a"]);
      const all = await cp.lanes();
      expect(all.ok && all.lanes.map((l) => l.id).sort()).toEqual(["a", "b"]);
      const down = new HttpControlPlane({ baseUrl: "http://127.0.0.1:9", timeoutMs: 500 });
      const bad = await down.lanes("m1");
      expect(bad.ok).toBe(false);
    } finally {
      await server.close();
    }
  });
});
