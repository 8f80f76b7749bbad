/**
 * A control plane's lanes read (`GET /v1/lanes`) over real HTTP on 127.0.0.1, answered from an
 * in-memory control plane, that a test can make hang (requests held open, never answered) or
 * fail (503), counting every request it receives: what an engine's observer asks of a control
 * plane that is down, seen from the control plane's side.
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";

export type LanesMode = "ok" | "hang" | "error";

export interface LanesServer {
  url: string;
  mode: LanesMode;
  /** Requests received, in order (path with query). */
  received: string[];
  /** Requests held open right now (mode `hang`; the client has not gone away). */
  held(): number;
  close(): Promise<void>;
}

/** Starts the server over `cp`; mode `ok` until changed. */
export async function startLanesServer(cp: MemoryControlPlane): Promise<LanesServer> {
  const open = new Set<ServerResponse>();
  const state: LanesServer = {
    url: "",
    mode: "ok",
    received: [],
    held: () => open.size,
    close: async () => {
      for (const r of open) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
  const server = createServer((req, res) => {
    const path = req.url ?? "/";
    state.received.push(path);
    req.resume();
    if (state.mode === "hang") {
      open.add(res);
      res.on("close", () => open.delete(res));
      return;
    }
    if (state.mode === "error" || !path.startsWith("/v1/lanes")) {
      res.writeHead(503, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { code: "unavailable", message: "down for the test" } }));
      return;
    }
    const model = new URL(path, "http://x").searchParams.get("model") ?? undefined;
    void cp.lanes(model).then((read) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ lanes: read.ok ? read.lanes : [] }));
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}
