/**
 * A loopback webhook receiver for notifier tests: records every request (headers and the raw
 * body) and answers from a script of statuses (then 200), on a port bound to 0.
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  headers: IncomingHttpHeaders;
  raw: Buffer;
  status: number;
}

export interface WebhookReceiver {
  url: string;
  received: Received[];
  /** Statuses to answer next, in order; once empty, `fallback` (default 200). */
  script: number[];
  fallback: number;
  /** Resolves once `n` requests arrived; rejects after `ms` (default 20 s). */
  waitFor(n: number, ms?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(script: number[] = []): Promise<WebhookReceiver> {
  const rx: WebhookReceiver = {
    url: "",
    received: [],
    script: [...script],
    fallback: 200,
    async waitFor(n, ms = 20_000) {
      const until = Date.now() + ms;
      while (rx.received.length < n) {
        if (Date.now() > until) {
          throw new Error(`[test] receiver got ${rx.received.length} of ${n} requests in ${ms} ms`);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close: async () => {},
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const status = rx.script.shift() ?? rx.fallback;
      rx.received.push({ headers: req.headers, raw: Buffer.concat(chunks), status });
      res.writeHead(status, { "content-type": "text/plain" }).end(status < 300 ? "ok" : "busy");
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  rx.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  rx.close = () =>
    new Promise<void>((ok) => {
      server.closeAllConnections();
      server.close(() => ok());
    });
  return rx;
}
