/** Liveness (`GET /healthz`, no token) and the reconciler trigger (`POST /v1/tick`, operator). */
import { Hono } from "hono";
import type { ReleaseApi } from "../../service/api.ts";
import { requireBearer } from "../auth.ts";
import { errorResponse } from "../errors.ts";

export function systemRoutes(o: {
  api: ReleaseApi;
  /** One reconciler pass: fires due deadlines, performs due effects (the core's `tick`). */
  tick: () => Promise<{ performed: number; failed: number }>;
  operatorTokens: readonly string[];
  /** Operator and viewer tokens: the viewer token gets 403 naming the operator token. */
  readTokens?: readonly string[];
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
  return app;
}
