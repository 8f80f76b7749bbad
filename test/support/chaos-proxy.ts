/**
 * An HTTP proxy on 127.0.0.1 in front of the engine, as the network between a runner and the
 * engine: it forwards every request, except the next `n` callbacks matching a step run, whose
 * connections it destroys (the engine is unreachable for them: a network error, no answer).
 */
import { createServer, type IncomingMessage, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface ChaosProxy {
  url: string;
  /** Requests seen, in order: method, path, and whether they were dropped. */
  seen: { path: string; dropped: boolean }[];
  /** Drops the next `n` callback requests whose path contains `stepRunId`. */
  dropCallbacks(stepRunId: string, n: number): void;
  close(): Promise<void>;
}

/** Starts a proxy forwarding to `target` (e.g. `http://127.0.0.1:40123`). */
export async function startChaosProxy(target: string): Promise<ChaosProxy> {
  const t = new URL(target);
  const seen: ChaosProxy["seen"] = [];
  let drop: { id: string; n: number } | null = null;
  const server: Server = createServer((req: IncomingMessage, res) => {
    const path = req.url ?? "/";
    if (drop && drop.n > 0 && path.includes(drop.id) && path.endsWith("/callback")) {
      drop.n -= 1;
      seen.push({ path, dropped: true });
      req.resume();
      req.socket.destroy();
      return;
    }
    seen.push({ path, dropped: false });
    const up = request(
      { host: t.hostname, port: t.port, method: req.method, path, headers: req.headers },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    up.on("error", () => req.socket.destroy());
    req.pipe(up);
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    dropCallbacks(stepRunId, n) {
      drop = { id: stepRunId, n };
    },
    close: () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
