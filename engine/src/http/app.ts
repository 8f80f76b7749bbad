/**
 * The engine's Hono app: the middleware every answer passes, one `onError`, JSON 404s, and the
 * routes its entry passes in (the HTTP API of docs/engine.md, http/api-routes.ts; the dashboard).
 * Transport-free: serve it with `@hono/node-server` (main-node.ts) or call `app.request`.
 */
import { Hono } from "hono";
import { secureHeaders } from "hono/secure-headers";
import type { Clock } from "../ports/clock.ts";
import type { LanesRead } from "../protocol/control-plane.ts";
import type { ReleaseApi } from "../service/api.ts";
import type { NamedToken } from "./auth.ts";
import { AuthThrottle, authThrottle } from "./auth-throttle.ts";
import { bodyLimits, identityEncodingOnly } from "./body-limit.ts";
import { errorResponse, onError } from "./errors.ts";
import { singleQueryParams } from "./query-params.ts";
import type { StepRunRouteOptions } from "./routes/step-runs.ts";

export interface AppOptions {
  api: ReleaseApi;
  /** One reconciler pass (`POST /v1/tick`): the core's `tick`. */
  tick: () => Promise<{ performed: number; failed: number }>;
  clock: Clock;
  callbackSecrets: readonly string[];
  /** The OIDC runner credential of preflights and callbacks; default HMAC only. */
  runnerCredential?: StepRunRouteOptions["runnerCredential"];
  operatorToken: string;
  /** People's own operator tokens (BATON_OPERATORS): actions sent with one are recorded as theirs. */
  operators?: readonly NamedToken[];
  viewerToken: string | null;
  log?: { error(msg: string, err?: unknown): void; info?(msg: string): void };
  /**
   * Engine URL as browsers see it and owner/name for run links; the dashboard, when the entry
   * passes one, is mounted by `createCore` (core.ts) with the same values.
   */
  publicUrl?: string;
  repository?: string;
  /** The exposition text of `GET /metrics`; no such route when absent. */
  metrics?: () => Promise<string>;
  /** One read of a model's lanes at the control plane (`GET /v1/releases/:id/lanes`). */
  lanes?: (model: string) => Promise<LanesRead>;
  /** Mounts more routes (e.g. the dashboard under `/`) before the 404 handler. */
  extend?: (app: Hono) => void;
  /**
   * Mounts the API's routes (`apiRoutes` of http/api-routes.ts: `/healthz`, `/metrics`, `/v1/*`,
   * the runner protocol among them) before `extend`; none when absent (the dashboard Worker).
   * Passed in, not imported, so an app without the API bundles none of its routes.
   */
  routes?: ApiRoutes;
}

/** The tokens an app accepts: operators' (the shared one and people's own) and readers'. */
export interface AppTokens {
  operatorTokens: readonly string[];
  readTokens: readonly string[];
}

/** Mounts routes on `app` from its options and the tokens it accepts. */
export type ApiRoutes = (app: Hono, o: AppOptions, tokens: AppTokens) => void;

export function createApp(o: AppOptions): Hono {
  const app = new Hono();
  const operators = o.operators ?? [];
  const operatorTokens = [o.operatorToken, ...operators.map((p) => p.token)];
  const readTokens = o.viewerToken ? [...operatorTokens, o.viewerToken] : operatorTokens;
  app.onError(onError(o.log ?? console));
  // Credential guessing is throttled per client address before anything else reads the request.
  app.use(
    "*",
    // People's own tokens are known tokens: using one is never a failed guess.
    authThrottle(new AuthThrottle(o.clock), readTokens),
  );
  // Before every route (the dashboard's too, mounted by `extend`): no handler reads past it.
  app.use("*", bodyLimits());
  // Bodies are read as sent: a compressed one is refused (415) before anything reads it.
  app.use("*", identityEncodingOnly());
  // CSP and frame headers on every answer (the dashboard's pages above all): no framing
  // (clickjacking of the abort/resume forms), no plugins, forms post only here. The pages'
  // small inline scripts and styles still need 'unsafe-inline' (everything they print is
  // escaped; XSS in every field is tested).
  app.use(
    "*",
    secureHeaders({
      contentSecurityPolicy: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'", "'unsafe-inline'"],
        styleSrc: ["'self'", "'unsafe-inline'"],
        imgSrc: ["'self'", "data:"],
        objectSrc: ["'none'"],
        baseUri: ["'none'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
      },
      xFrameOptions: "DENY",
      referrerPolicy: "same-origin",
      strictTransportSecurity: false,
    }),
  );
  // Each query parameter at most once, on every route: `c.req.query()` would keep the first.
  app.use("*", singleQueryParams());
  app.notFound((c) =>
    errorResponse(c, 404, "not_found", `[engine] no route ${c.req.method} ${c.req.path}`),
  );
  o.routes?.(app, o, { operatorTokens, readTokens });
  o.extend?.(app);
  return app;
}
