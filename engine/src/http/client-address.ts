/**
 * The address a request came from, as the platform saw it, on every entry: the Node server's
 * socket (`@hono/node-server` puts the incoming request in the bindings), Lambda's API Gateway
 * or function URL (`requestContext…sourceIp`), Cloudflare's `cf-connecting-ip` (set by
 * Cloudflare's edge; read only where no socket is known, so a Node client cannot claim it).
 * Behind a reverse proxy this is the proxy's address. "unknown" when none is known (tests'
 * `app.request`).
 */
import type { Context } from "hono";

interface Bindings {
  incoming?: { socket?: { remoteAddress?: unknown } };
  server?: { incoming?: { socket?: { remoteAddress?: unknown } } };
  requestContext?: { identity?: { sourceIp?: unknown }; http?: { sourceIp?: unknown } };
}

/** The client's address (IPv4-mapped IPv6 written as IPv4), or "unknown". */
export function clientAddress(c: Context): string {
  const env = (c.env ?? {}) as Bindings;
  const socket = (env.server ?? env).incoming?.socket?.remoteAddress;
  const lambda = env.requestContext?.identity?.sourceIp ?? env.requestContext?.http?.sourceIp;
  const found =
    typeof socket === "string"
      ? socket
      : typeof lambda === "string"
        ? lambda
        : (c.req.header("cf-connecting-ip") ?? "unknown");
  return found.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/, "$1");
}
