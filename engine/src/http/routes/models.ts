/**
 * Model routes: a model's source mark (docs/lifecycle.md "Merge order is release order"), which
 * the recipe workflow reads before it decides (viewer or operator) and moves when it finds a
 * true repeat of what stands (operator).
 */
import { type Context, Hono } from "hono";
import * as z from "zod";
import type { SourceMark } from "../../domain/source-order.ts";
import { ActorField } from "../../domain/verbs.ts";
import { CONTROL_PLANE_NAME_FIX, CONTROL_PLANE_NAME_PATTERN } from "../../protocol/fields.ts";
import { RELEASE_ID_PATTERN } from "../../protocol/ids.ts";
import type { ReleaseApi } from "../../service/api.ts";
import { requireBearer } from "../auth.ts";
import { badRequest } from "../errors.ts";
import { knownQueryParams } from "../query-params.ts";
import { actorOf, jsonBody } from "./operator-body.ts";
import { SourceClaimBody } from "./source-claim.ts";

export interface ModelRouteOptions {
  api: ReleaseApi;
  operatorTokens: readonly string[];
  /** Operator and viewer tokens. */
  readTokens: readonly string[];
}

/** `{commit, committed_at, after, release, actor?}` of `POST …/source-mark`. */
const AcknowledgeBody = SourceClaimBody.extend({
  release: z
    .string({ error: "must be the id of the release that stands, e.g. r17" })
    .regex(RELEASE_ID_PATTERN, "must be a release id such as r17"),
  actor: ActorField,
}).strict();

function modelParam(c: Context): string {
  const model = c.req.param("model") ?? "";
  if (!CONTROL_PLANE_NAME_PATTERN.test(model)) {
    throw badRequest("model", [
      {
        path: "model",
        message: `${JSON.stringify(model.slice(0, 64))} is not a model name`,
        fix: CONTROL_PLANE_NAME_FIX,
      },
    ]);
  }
  return model;
}

/** A mark as the API answers it (times in epoch ms). */
function markJson(mark: SourceMark | null): Record<string, unknown> | null {
  return mark
    ? {
        commit: mark.commit,
        committed_at: mark.committed_at,
        release: mark.release_id,
        at: mark.at,
      }
    : null;
}

export function modelRoutes(o: ModelRouteOptions): Hono {
  const app = new Hono();
  const operator = requireBearer(o.operatorTokens, "operator", o.readTokens);
  const reader = requireBearer(o.readTokens, "viewer or operator");

  app.get(
    "/:model/source-mark",
    reader,
    knownQueryParams("GET /v1/models/:model/source-mark"),
    async (c) => {
      const model = modelParam(c);
      return c.json({ model, mark: markJson(await o.api.sourceMark(model)) });
    },
  );

  app.post(
    "/:model/source-mark",
    operator,
    knownQueryParams("POST /v1/models/:model/source-mark"),
    async (c) => {
      const model = modelParam(c);
      const b = await jsonBody(c, "source mark body", AcknowledgeBody, {
        example: `{"commit": "<40 hex>", "committed_at": 1764662400000, "after": "<40 hex> or null", "release": "r17"}`,
      });
      const mark = await o.api.acknowledgeSource(
        model,
        { commit: b.commit, committed_at: b.committed_at, after: b.after },
        b.release,
        actorOf(b.actor),
      );
      return c.json({ model, mark: markJson(mark) });
    },
  );

  return app;
}
