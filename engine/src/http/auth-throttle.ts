/**
 * Throttles credential guessing per client address (docs/engine.md "Authentication"): every
 * request that carries a bearer token the engine does not know, and every sign-in on `/login`
 * that fails, counts as a failure of its client's address. After `failures` failures within
 * `windowMs` of the first, every request of that address that carries a credential (any bearer
 * token, any sign-in) is answered 429 with `Retry-After` until the window ends, whether the
 * credential is right or not: otherwise the answers would still tell a right guess from a
 * wrong one. Requests without a credential (pages, `/healthz`) are not affected; runners'
 * preflights and callbacks have their own bounded refusal record and are not counted here.
 *
 * State is in memory, per engine process (per isolate on Workers), and bounded: at most
 * `maxClients` addresses are remembered, the oldest first forgotten. Time comes from the
 * engine's clock (tests move a fake one).
 */
import type { MiddlewareHandler } from "hono";
import type { Clock } from "../ports/clock.ts";
import { tokenMatches } from "./auth.ts";
import { clientAddress } from "./client-address.ts";
import { errorResponse } from "./errors.ts";

/** Failures allowed per window, the window (ms), and how many addresses are remembered. */
export const AUTH_THROTTLE = { failures: 10, windowMs: 60_000, maxClients: 10_000 } as const;

interface Window {
  /** Epoch ms of the first failure of this window. */
  start: number;
  failures: number;
}

/** Failed credentials per client address, in fixed windows. */
export class AuthThrottle {
  private readonly byClient = new Map<string, Window>();

  constructor(
    private readonly clock: Clock,
    private readonly limits: {
      failures: number;
      windowMs: number;
      maxClients: number;
    } = AUTH_THROTTLE,
  ) {}

  /**
   * When `client` may present a credential again: whole seconds from now and the epoch ms;
   * null when it may now.
   */
  retry(client: string): { seconds: number; at: number } | null {
    const w = this.byClient.get(client);
    if (!w || w.failures < this.limits.failures) return null;
    const at = w.start + this.limits.windowMs;
    const left = at - this.clock.now();
    return left > 0 ? { seconds: Math.ceil(left / 1000), at } : null;
  }

  /** Counts one failed credential of `client`. */
  fail(client: string): void {
    const now = this.clock.now();
    const w = this.byClient.get(client);
    if (w && now - w.start < this.limits.windowMs && now >= w.start) {
      w.failures++;
      return;
    }
    this.byClient.delete(client);
    this.byClient.set(client, { start: now, failures: 1 });
    while (this.byClient.size > this.limits.maxClients) {
      const oldest = this.byClient.keys().next().value;
      if (oldest === undefined) break;
      this.byClient.delete(oldest);
    }
  }
}

const RUNNER_ROUTE = /^\/v1\/releases\/step-runs\/[^/]+\/(?:preflight|callback)$/;

/**
 * Middleware: refuses credentials from a throttled address (429, Retry-After), and counts a
 * bearer token that is neither `tokens` nor valid, and a sign-in answered 401, as failures.
 * @param tokens every bearer token the engine knows (operator, viewer).
 */
export function authThrottle(throttle: AuthThrottle, tokens: readonly string[]): MiddlewareHandler {
  const known = tokens.filter((t) => t.length > 0);
  return async (c, next) => {
    if (RUNNER_ROUTE.test(c.req.path)) return next();
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header("authorization") ?? "")?.[1];
    const signIn = c.req.method === "POST" && c.req.path === "/login";
    if (bearer === undefined && !signIn) return next();
    const client = clientAddress(c);
    const wait = throttle.retry(client);
    if (wait) {
      c.header("Retry-After", String(wait.seconds));
      return errorResponse(
        c,
        429,
        "too_many_requests",
        `[engine] too many failed sign-ins or bearer tokens from ${client}; nothing was checked; try again in ${wait.seconds} s (at ${new Date(wait.at).toISOString()})`,
      );
    }
    await next();
    const failed =
      (bearer !== undefined && !tokenMatches(bearer, known)) || (signIn && c.res.status === 401);
    if (failed) throttle.fail(client);
  };
}
