/**
 * The operator verbs' routes, built from their declarations (domain/verbs.ts): for each verb
 * on a release (`POST /v1/releases/:id/<verb>`) or a step run (`POST
 * /v1/releases/step-runs/:id/<verb>`), the operator token, no query, the body parsed with the
 * verb's schema (a 400 names the field), one service call, and the verb's answer. Every body
 * is read within its limits (protocol/limits.ts) before a value is built: JSON bodies by
 * `jsonBody`, a recipe by the route's `recipeBody.read`, only once the release is known.
 */
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { BatonError } from "../../domain/errors.ts";
import { VERB_NAMES, VERBS, verbRoute } from "../../domain/verbs.ts";
import { RELEASE_ID_PATTERN, STEP_RUN_ID_PATTERN } from "../../protocol/ids.ts";
import type { Accepted, Refusal, ReleaseApi } from "../../service/api.ts";
import { type NamedToken, personOf, requireBearer } from "../auth.ts";
import { badRequest, errorResponse } from "../errors.ts";
import { knownQueryParams } from "../query-params.ts";
import { VERB_CALLS, type VerbBody } from "../verb-calls.ts";
import { actorFor, jsonBody } from "./operator-body.ts";

/** Validates the `:id` path parameter as a release id. @throws BatonError 400. */
export function releaseParam(c: Context): string {
  const id = c.req.param("id") ?? "";
  if (!RELEASE_ID_PATTERN.test(id)) {
    throw badRequest("release id", [
      {
        path: "id",
        message: `${JSON.stringify(id.slice(0, 64))} is not a release id`,
        fix: "use an id such as r17",
      },
    ]);
  }
  return id;
}

/** Validates the `:id` path parameter as a step-run id. @throws BatonError 400. */
export function stepRunParam(c: Context): string {
  const id = c.req.param("id") ?? "";
  if (!STEP_RUN_ID_PATTERN.test(id)) {
    throw badRequest("step run id", [
      {
        path: "id",
        message: `${JSON.stringify(id.slice(0, 64))} is not a step run id`,
        fix: "use an id such as sr_17_6_f (sr_<release>_<step>_<f|b>)",
      },
    ]);
  }
  return id;
}

/** Answers a service result: the refusal's status, or 200 with `ok`'s body. */
export function answer(
  c: Context,
  r: Accepted | Refusal,
  ok: (a: Accepted) => Record<string, unknown>,
): Response {
  if (!r.ok) return errorResponse(c, r.status, r.code, r.reason, r.problems);
  return c.json(ok(r), 200);
}

export interface VerbRouteOptions {
  api: ReleaseApi;
  operatorTokens: readonly string[];
  /** Operator and viewer tokens: the viewer token gets 403 naming the operator token. */
  readTokens: readonly string[];
  /** People's own operator tokens: an action sent with one is recorded as theirs. */
  operators?: readonly NamedToken[];
  /** Reads a recipe body (`roll-forward`): the recipe, or a signed start; on release routes. */
  recipeBody?: { limit: MiddlewareHandler; read: (c: Context) => Promise<VerbBody> };
}

/** The routes of the verbs on `on` (relative to where that kind of id is mounted). */
export function verbRoutes(on: "release" | "step_run", o: VerbRouteOptions): Hono {
  const app = new Hono();
  const operator = requireBearer(o.operatorTokens, "operator", o.readTokens);
  for (const v of VERB_NAMES.map((n) => VERBS[n]).filter((x) => x.on === on)) {
    const recipe = v.body === "recipe" ? o.recipeBody : undefined;
    if (v.body === "recipe" && !recipe)
      throw new Error(`[engine] the route of ${v.command} reads a recipe: pass recipeBody`);
    const limit: MiddlewareHandler = recipe ? recipe.limit : (_c, next) => next();
    app.post(
      `/:id/${v.command}`,
      operator,
      knownQueryParams(verbRoute(v.name)),
      limit,
      async (c) => {
        const id = on === "release" ? releaseParam(c) : stepRunParam(c);
        // A recipe body is the costly read: a release that does not exist is 404 before it.
        if (recipe && on === "release" && (await o.api.liveState(id)) === null) {
          throw new BatonError("not_found", `[engine] release ${id} does not exist`);
        }
        const body: VerbBody =
          v.body === "none"
            ? {}
            : v.body === "recipe"
              ? await recipe!.read(c)
              : await jsonBody(
                  c,
                  `${v.command} body`,
                  v.body,
                  v.bodyExample ? { example: v.bodyExample } : {},
                );
        const actor = actorFor(
          personOf(c.req.header("authorization"), o.operators ?? []),
          v.body === "none" || v.body === "recipe" ? undefined : (body.actor as string | undefined),
        );
        const r = await VERB_CALLS[v.name](o.api, id, actor, body);
        if (!r.ok) return answer(c, r, () => ({}));
        return c.json(v.answer(id, r.release, r.reply), v.status);
      },
    );
  }
  return app;
}
