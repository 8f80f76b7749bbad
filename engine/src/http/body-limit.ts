/**
 * One body limit for every route of the engine, applied before any handler
 * or token check reads the body: a `Content-Length` over the route's limit is refused without
 * reading a byte; a streamed (chunked) body is read into a buffer of at most the limit and
 * refused as soon as it passes it. The answer is 413 with `Connection: close` (set in
 * `errors.ts`): the unread rest of the body must not be taken for the next request.
 *
 * Limits (bytes, declared in protocol/limits.ts): a recipe 1 MiB (`RECIPE_LIMITS`), a preflight
 * or callback 1 MiB (`RUNNER_BODY_LIMITS`: the runner cuts its log tail to 256 KiB), anything
 * else (sign-in form, dashboard actions, abort reasons) 64 KiB (`OTHER_BODY_LIMITS`).
 */
import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { BatonError } from "../domain/errors.ts";
import { OTHER_BODY_LIMITS, RECIPE_LIMITS, RUNNER_BODY_LIMITS } from "../protocol/limits.ts";

/** Body limit (bytes) of routes with no larger one: forms, abort reasons, empty posts. */
export const DEFAULT_BODY_MAX_BYTES = OTHER_BODY_LIMITS.bytes;

/** The limit (bytes) for a request to `path`. */
export function bodyLimitFor(method: string, path: string): number {
  // Both routes that take a recipe: a start, and a roll forward's fixed recipe.
  if (method === "POST" && /^\/v1\/releases\/?$|^\/v1\/releases\/[^/]+\/roll-forward$/.test(path)) {
    return RECIPE_LIMITS.bytes;
  }
  if (/^\/v1\/releases\/step-runs\/[^/]+\/(?:preflight|callback)$/.test(path)) {
    return RUNNER_BODY_LIMITS.bytes;
  }
  return DEFAULT_BODY_MAX_BYTES;
}

function limiter(maxSize: number): MiddlewareHandler {
  return bodyLimit({
    maxSize,
    onError: () => {
      throw new BatonError(
        "payload_too_large",
        `[engine] request body over ${maxSize} bytes, the limit of this route; nothing was read past it`,
      );
    },
  });
}

/** Middleware: the route's body limit, for every method and path (unknown routes too). */
export function bodyLimits(): MiddlewareHandler {
  const byLimit = new Map<number, MiddlewareHandler>();
  return (c, next) => {
    const max = bodyLimitFor(c.req.method, c.req.path);
    let mw = byLimit.get(max);
    if (!mw) {
      mw = limiter(max);
      byLimit.set(max, mw);
    }
    return mw(c, next);
  };
}
