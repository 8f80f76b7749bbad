/**
 * Every route refuses an oversize body before reading it (a
 * Content-Length over the route's limit), or as soon as a streamed (chunked) body passes it,
 * with 413 and `Connection: close` (the unread rest of the body would otherwise be read as
 * the next request). Over a real socket: the engine app served by @hono/node-server.
 */

import type { Server } from "node:http";
import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpLimitsFromEnv, LINGER, serveWithLimits } from "../../engine/src/node/http-server.ts";
import { rawExchange } from "../support/raw-http.ts";
import { createRelease, type Harness, makeHarness, OPERATOR, recipe } from "./service-harness.ts";

let h: Harness;
let server: Server;
let port = 0;

beforeAll(async () => {
  h = await makeHarness({ seed: recipe(2) });
  await createRelease(h, recipe(2));
  await new Promise<void>((resolve) => {
    // The engine's own Node server (engine/src/node/http-server.ts), as `baton serve` runs it.
    server = serveWithLimits(
      { fetch: h.engine.app.fetch, port: 0, hostname: "127.0.0.1", limits: httpLimitsFromEnv({}) },
      (info) => {
        port = info.port;
        resolve();
      },
    );
  });
});
afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  await h.close();
});

/** Sends `head` then body bytes via `feed`; everything read until the socket closes. */
const exchange = (head: string, feed: (s: Socket) => void) => rawExchange(port, head, feed);

const ROUTES = [
  "/login",
  "/v1/releases",
  "/v1/releases/r1/abort",
  "/v1/releases/step-runs/sr_1_1_f/callback",
  "/v1/releases/step-runs/sr_1_1_f/preflight",
  "/releases/r1/abort",
  "/v1/tick",
  "/no/such/route",
];

describe("body limits on every route", () => {
  for (const route of ROUTES) {
    it(`${route}: a 300 MB Content-Length is 413 before the body is read, and the socket closes`, async () => {
      const head = `POST ${route} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${300 * 1024 * 1024}\r\n\r\n`;
      // Only 1 KB of the announced 300 MB is ever sent: an answer proves nothing waited for it.
      const got = await exchange(head, (s) => s.write("token=".padEnd(1024, "x")));
      expect(got).toMatch(/^HTTP\/1\.1 413 /);
      expect(got.toLowerCase()).toMatch(/\r\nconnection: close\r\n/);
      expect(got).toMatch(/payload_too_large/);
    });
  }

  it("/login: a chunked body is cut off once past the limit (413, closed)", async () => {
    const head =
      "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n";
    const chunk = "x".repeat(64 * 1024);
    const got = await exchange(head, (s) => {
      let sent = 0;
      const more = () => {
        // Bounded: 4 MB at most, far past the limit; stops when the server closes.
        while (sent < 64 && !s.destroyed) {
          sent++;
          if (!s.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`)) {
            s.once("drain", more);
            return;
          }
        }
      };
      s.write("6\r\ntoken=\r\n");
      more();
    });
    expect(got).toMatch(/^HTTP\/1\.1 413 /);
    expect(got.toLowerCase()).toMatch(/\r\nconnection: close\r\n/);
  });

  it("a client still writing its body after the 413 sees the answer and a clean close, not a reset (lingering close)", async () => {
    const { connect } = await import("node:net");
    const head = `POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${100 * 1024 * 1024}\r\n\r\n`;
    const mb = Buffer.alloc(1024 * 1024, 0x78);
    const out = await new Promise<{ got: string; error: string | null }>((resolve) => {
      const s = connect(port, "127.0.0.1");
      let got = "";
      let error: string | null = null;
      let wroteAfter = false;
      const timer = setTimeout(() => s.destroy(new Error("still open after 10 s")), 10_000);
      s.on("data", (d) => {
        got += d.toString("latin1");
        // Once the whole answer is in, go on sending as a client streaming its body does:
        // 4 MB more, then close our side. Closed at once, the server would answer these with
        // a reset.
        if (!wroteAfter && got.includes("payload_too_large")) {
          wroteAfter = true;
          for (let i = 0; i < 4; i++) s.write(mb);
          s.end();
        }
      });
      s.on("error", (e: NodeJS.ErrnoException) => {
        error = e.code ?? e.message;
      });
      s.on("close", () => {
        clearTimeout(timer);
        resolve({ got, error });
      });
      s.write(head);
      s.write(mb.subarray(0, 256 * 1024));
    });
    expect(out.got).toMatch(/^HTTP\/1\.1 413 /);
    expect(out.error).toBeNull();
  });

  it("a client that goes quiet after the 413 without closing is let go by the server once LINGER.idleMs passes with nothing received", async () => {
    const { connect } = await import("node:net");
    // A server of its own, so that its connection count is this client's alone.
    const own = await new Promise<{ server: Server; port: number }>((resolve) => {
      const sv = serveWithLimits(
        {
          fetch: h.engine.app.fetch,
          port: 0,
          hostname: "127.0.0.1",
          limits: httpLimitsFromEnv({}),
        },
        (info) => resolve({ server: sv, port: info.port }),
      );
    });
    const connections = () =>
      new Promise<number>((ok) => own.server.getConnections((_e, n) => ok(n ?? -1)));
    const head = `POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${100 * 1024 * 1024}\r\n\r\n`;
    // Half-open allowed: the server's FIN after the answer does not close our side, and we send
    // nothing more.
    const s = connect({ port: own.port, host: "127.0.0.1", allowHalfOpen: true });
    let got = "";
    s.on("data", (d) => {
      got += d.toString("latin1");
    });
    s.write(head);
    s.write(Buffer.alloc(256 * 1024, 0x78));
    try {
      // Bounded: the idle limit plus 10 s on a loaded machine, polled every 100 ms.
      const until = Date.now() + LINGER.idleMs + 10_000;
      let open = -1;
      for (let i = 0; i < 1_000 && Date.now() < until; i++) {
        open = await connections();
        if (got.includes("payload_too_large") && open === 0) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(got).toMatch(/^HTTP\/1\.1 413 /);
      expect(open, "the lingering connection is still held by the server").toBe(0);
    } finally {
      s.destroy();
      await new Promise<void>((r) => own.server.close(() => r()));
    }
  }, 30_000);

  it("a small body still works on a kept-alive connection", async () => {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(res.status).toBe(200);
  });
});

describe("Expect: 100-continue (what curl sends for a large body)", () => {
  it("an oversize Content-Length is 413 with Connection: close before the body is sent (no 100 Continue)", async () => {
    const head = `POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${300 * 1024 * 1024}\r\nExpect: 100-continue\r\n\r\n`;
    // Not one byte of the body is sent: the client waits for 100 Continue, as curl does.
    const got = await exchange(head, () => {});
    expect(got).not.toMatch(/100 Continue/);
    expect(got).toMatch(/^HTTP\/1\.1 413 /);
    expect(got.toLowerCase()).toMatch(/\r\nconnection: close\r\n/);
    expect(got).toMatch(/payload_too_large/);
    expect(got).toMatch(/request body over 65536 bytes/);
  });

  it("a body within the limit gets 100 Continue, then the route's own answer", async () => {
    const form = "token=wrong-token-0123456789";
    const head = `POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${form.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`;
    const got = await exchange(head, (s) => {
      // The body goes only once the server said 100 Continue.
      s.once("data", () => s.write(form));
    });
    expect(got).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 (303|401) /);
    expect(got).not.toMatch(/payload_too_large/);
  });
});

describe("compressed bodies (Content-Encoding other than identity)", () => {
  for (const enc of ["gzip", "br", "deflate, identity"]) {
    it(`Content-Encoding: ${enc} is 415 naming the header and the fix, before the body is read`, async () => {
      const { gzipSync } = await import("node:zlib");
      const body = gzipSync(Buffer.from(JSON.stringify(recipe(2))));
      const res = await fetch(`http://127.0.0.1:${port}/v1/releases`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${OPERATOR}`,
          "content-type": "application/json",
          "content-encoding": enc,
        },
        body,
      });
      expect(res.status).toBe(415);
      expect(res.headers.get("connection")).toBe("close");
      const out = (await res.json()) as { error: { code: string; message: string } };
      expect(out.error.code).toBe("unsupported_media_type");
      expect(out.error.message).toMatch(/Content-Encoding/);
      expect(out.error.message).toMatch(/send the body uncompressed/);
    });
  }

  it("Content-Encoding: identity is read as usual", async () => {
    const res = await fetch(`http://127.0.0.1:${port}/v1/releases/r1/abort`, {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": "identity" },
      body: "{}",
    });
    expect(res.status).not.toBe(415);
  });
});
