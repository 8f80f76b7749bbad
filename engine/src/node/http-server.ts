/**
 * The engine's Node HTTP server with its connection limits (docs/deploying.md "Operator
 * limits"): how long a client may take to send its headers and its whole request, how long an
 * idle keep-alive connection stays open, and how many connections are served at once (a cap
 * below the process's open-file limit, so sockets can never take the descriptors the store,
 * the runner's pipes and a fresh /healthz need). An `Expect: 100-continue` request whose
 * `Content-Length` is over its route's body limit is answered 413 before the client sends the
 * body (no `100 Continue`), with `Connection: close`. A connection closed after an answer sent
 * before its request's body was read (a 413) closes lingering: see `lingerOnUnreadBody`.
 */
import { readFileSync } from "node:fs";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { serve } from "@hono/node-server";
import * as z from "zod";
import { BatonError, type Problem } from "../domain/errors.ts";
import { bodyLimitFor } from "../http/body-limit.ts";
import { errorBody } from "../http/errors.ts";

/** Connection limits of the Node server. Times in ms. */
export interface HttpLimits {
  /** A request's headers must be complete this long after its first byte (BATON_HEADERS_TIMEOUT_MS). */
  headersTimeoutMs: number;
  /** A whole request (headers and body) must be received within this (BATON_REQUEST_TIMEOUT_MS). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this (BATON_KEEP_ALIVE_TIMEOUT_MS). */
  keepAliveTimeoutMs: number;
  /** Connections served at once; more are closed as soon as they are accepted (BATON_MAX_CONNECTIONS). */
  maxConnections: number;
  /** The process's open-file (descriptor) soft limit, when known (Linux: /proc/self/limits). */
  openFileLimit: number | null;
}

/** Descriptors kept free of client connections: store files, Postgres pool, runner pipes, logs. */
export const FD_RESERVE = 256;
/** Connection cap when the open-file limit cannot be read. */
export const DEFAULT_MAX_CONNECTIONS = 768;

/** The open-file soft limit of this process (`Max open files` in /proc/self/limits), or null. */
export function openFileLimit(limitsText?: string): number | null {
  let text = limitsText;
  if (text === undefined) {
    try {
      text = readFileSync("/proc/self/limits", "utf8");
    } catch {
      return null;
    }
  }
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(text);
  if (!m?.[1] || m[1] === "unlimited") return null;
  return Number(m[1]);
}

const ms = (name: string, dflt: number, min: number, max: number) =>
  z.coerce
    .number({ error: `${name} must be a number of milliseconds, ${min}..${max}` })
    .int(`${name} must be a whole number of milliseconds, ${min}..${max}`)
    .min(min, `${name} must be ${min}..${max} (milliseconds)`)
    .max(max, `${name} must be ${min}..${max} (milliseconds)`)
    .default(dflt);

const Env = z.object({
  BATON_HEADERS_TIMEOUT_MS: ms("BATON_HEADERS_TIMEOUT_MS", 20_000, 500, 600_000),
  BATON_REQUEST_TIMEOUT_MS: ms("BATON_REQUEST_TIMEOUT_MS", 60_000, 1_000, 3_600_000),
  BATON_KEEP_ALIVE_TIMEOUT_MS: ms("BATON_KEEP_ALIVE_TIMEOUT_MS", 5_000, 100, 600_000),
  BATON_MAX_CONNECTIONS: z.coerce
    .number({ error: "BATON_MAX_CONNECTIONS must be a number" })
    .int("BATON_MAX_CONNECTIONS must be a whole number")
    .min(16, "BATON_MAX_CONNECTIONS must be at least 16")
    .optional(),
});

/**
 * Reads the limits from the environment (defaults: headers 20 s, request 60 s, keep-alive 5 s,
 * connections = open-file limit − 256, or 768 when the limit is unknown).
 * @throws BatonError `bad_request` naming each bad variable and the fix, e.g. a
 * BATON_MAX_CONNECTIONS that leaves fewer than 256 descriptors under the open-file limit.
 */
export function httpLimitsFromEnv(
  env: Record<string, string | undefined> = process.env,
  fdLimit: number | null = openFileLimit(),
): HttpLimits {
  const clean = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v !== ""),
  );
  const r = Env.safeParse(clean);
  const problems: Problem[] = r.success
    ? []
    : r.error.issues.map((i) => ({
        path: String(i.path[0] ?? "environment"),
        message: i.message,
        fix: "set it to a value in the range the message names, or unset it for the default (docs/deploying.md)",
      }));
  if (r.success) {
    const cap = r.data.BATON_MAX_CONNECTIONS;
    if (cap !== undefined && fdLimit !== null && cap > fdLimit - FD_RESERVE) {
      problems.push({
        path: "BATON_MAX_CONNECTIONS",
        message: `BATON_MAX_CONNECTIONS=${cap} leaves fewer than ${FD_RESERVE} of the process's ${fdLimit} file descriptors for the store and the runner`,
        fix: `lower it to at most ${Math.max(16, fdLimit - FD_RESERVE)}, or raise the open-file limit (LimitNOFILE= in the systemd unit, ulimit -n)`,
      });
    }
  }
  if (problems.length > 0 || !r.success) {
    const lines = problems.map((p) => `  - ${p.path}: ${p.message}; fix: ${p.fix}`).join("\n");
    throw new BatonError("bad_request", `[engine] invalid configuration:\n${lines}`, problems);
  }
  const derived = fdLimit === null ? DEFAULT_MAX_CONNECTIONS : Math.max(16, fdLimit - FD_RESERVE);
  return {
    headersTimeoutMs: r.data.BATON_HEADERS_TIMEOUT_MS,
    requestTimeoutMs: Math.max(r.data.BATON_REQUEST_TIMEOUT_MS, r.data.BATON_HEADERS_TIMEOUT_MS),
    keepAliveTimeoutMs: r.data.BATON_KEEP_ALIVE_TIMEOUT_MS,
    maxConnections: r.data.BATON_MAX_CONNECTIONS ?? derived,
    openFileLimit: fdLimit,
  };
}

/**
 * Answers an `Expect: 100-continue` request: 413 (`Connection: close`, no `100 Continue`) when
 * its Content-Length is over the route's body limit, so the client never sends the body;
 * otherwise `100 Continue` and the request goes to the app as usual.
 */
export function onCheckContinue(server: Server) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const declared = Number(req.headers["content-length"]);
    const path = new URL(req.url ?? "/", "http://engine").pathname;
    const max = bodyLimitFor(req.method ?? "GET", path);
    if (Number.isFinite(declared) && declared > max) {
      const body = JSON.stringify(
        errorBody(
          "payload_too_large",
          `[engine] request body over ${max} bytes, the limit of this route; nothing was read past it`,
        ),
      );
      res.shouldKeepAlive = false;
      res.writeHead(413, {
        "Content-Type": "application/json",
        "Content-Length": Buffer.byteLength(body),
        Connection: "close",
      });
      res.end(body);
      return;
    }
    res.writeContinue();
    server.emit("request", req, res);
  };
}

/**
 * A lingering close's limits (ms), nginx's defaults: it closes after `idleMs` with nothing
 * received (`lingering_timeout`), and after `totalMs` in all (`lingering_time`), whatever the
 * client still sends. A client whose event loop is slow to read the answer (a loaded machine,
 * a client still writing a 100 MB body) keeps its connection, and so the 413, while it writes.
 */
export const LINGER = { idleMs: 5_000, totalMs: 30_000 } as const;

/**
 * A lingering close (as nginx's `lingering_close`): when the server closes a connection whose
 * request body it has not read to the end (it answered 413 before the body, or mid-body), it
 * half-closes (FIN after the answer) and reads and discards what the client still sends until
 * the client closes or a limit of `LINGER` passes. Closing at once would make the kernel answer the
 * unread bytes with a reset, and a client still writing its body would see `ECONNRESET` instead
 * of the 413. Nothing read is kept.
 *
 * Node's server closes a `Connection: close` connection through `socket.destroySoon()` (the
 * same in Node 20 and 24); this wraps that method on each accepted socket.
 */
export function lingerOnUnreadBody(server: Server): void {
  const current = new WeakMap<Socket, IncomingMessage>();
  server.on("request", (req: IncomingMessage) => {
    current.set(req.socket, req);
  });
  server.on("connection", (socket: Socket & { destroySoon?: () => void }) => {
    const destroySoon = socket.destroySoon?.bind(socket);
    if (!destroySoon) return;
    socket.destroySoon = () => {
      const req = current.get(socket);
      if (!req || req.complete || socket.destroyed) return destroySoon();
      const close = () => socket.destroy();
      const idle = setTimeout(close, LINGER.idleMs);
      const total = setTimeout(close, LINGER.totalMs);
      idle.unref();
      total.unref();
      socket.once("close", () => {
        clearTimeout(idle);
        clearTimeout(total);
      });
      socket.on("error", () => socket.destroy());
      // allowHalfOpen is false on the server's sockets: the client's FIN destroys it.
      socket.end();
      // Whatever still reads the body (the app's request stream, paused when its queue is
      // full) lets go; the rest is discarded.
      req.removeAllListeners("data");
      req.removeAllListeners("readable");
      req.on("data", () => idle.refresh());
      req.resume();
      socket.resume();
    };
  });
}

/**
 * What the server calls per request: the request and the server's bindings (`{ incoming,
 * outgoing }` of @hono/node-server), which a Hono app's `fetch` takes as its env and reads
 * the client's socket address from. A wrapper must pass `env` on.
 */
export type ServedFetch = (req: Request, env?: unknown) => Response | Promise<Response>;

/**
 * Serves `fetch` on `port`/`hostname` with `limits` applied; `onListening` runs once bound.
 * Bind errors come as the server's `error` event.
 */
export function serveWithLimits(
  o: {
    fetch: ServedFetch;
    port: number;
    hostname: string;
    limits: HttpLimits;
  },
  onListening: (info: { port: number }) => void,
): Server {
  const { limits } = o;
  const server = serve(
    {
      fetch: o.fetch,
      port: o.port,
      hostname: o.hostname,
      serverOptions: {
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        // How often the timeouts above are checked (Node's default is every 30 s).
        connectionsCheckingInterval: Math.max(
          100,
          Math.min(1_000, Math.floor(limits.headersTimeoutMs / 2)),
        ),
      },
    },
    onListening,
  ) as Server;
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.maxConnections = limits.maxConnections;
  server.on("checkContinue", onCheckContinue(server));
  lingerOnUnreadBody(server);
  return server;
}
