/**
 * Liveness (`GET /healthz`, no token), the reconciler trigger (`POST /v1/tick`, operator) and
 * the Prometheus exposition (`GET /metrics`, viewer or operator token).
 */
import { Hono } from "hono";
import type { ReleaseApi } from "../../service/api.ts";
import { requireBearer } from "../auth.ts";
import { errorResponse } from "../errors.ts";
import { EXPOSITION_CONTENT_TYPE } from "../prometheus-text.ts";

export function systemRoutes(o: {
  api: ReleaseApi;
  /** One reconciler pass: fires due deadlines, performs due effects (the core's `tick`). */
  tick: () => Promise<{ performed: number; failed: number }>;
  operatorTokens: readonly string[];
  /** Operator and viewer tokens: the viewer token gets 403 naming the operator token. */
  readTokens?: readonly string[];
  /** The exposition text of `GET /metrics` (http/metrics.ts); no route when absent. */
  metrics?: () => Promise<string>;
}): Hono {
  const app = new Hono();
  app.get("/healthz", async (c) => {
    try {
      await o.api.health();
      return c.json({ ok: true });
    } catch {
      c.header("Retry-After", "5");
      return errorResponse(c, 503, "unavailable", "[engine] the store does not answer");
    }
  });
  app.post("/v1/tick", requireBearer(o.operatorTokens, "operator", o.readTokens), async (c) => {
    return c.json(await o.tick());
  });
  const metrics = o.metrics;
  if (metrics) {
    app.get(
      "/metrics",
      requireBearer(o.readTokens ?? o.operatorTokens, "viewer or operator"),
      async (c) => {
        let text: string;
        try {
          text = await metrics();
        } catch {
          c.header("Retry-After", "5");
          return errorResponse(c, 503, "unavailable", "[engine] the store does not answer");
        }
        c.header("Content-Type", EXPOSITION_CONTENT_TYPE);
        c.header("Cache-Control", "no-store");
        return c.body(text);
      },
    );
  }
  return app;
}
