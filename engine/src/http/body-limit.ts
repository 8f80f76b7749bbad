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

/**
 * Middleware: a request whose `Content-Encoding` is anything but `identity` (gzip, br, …) is
 * refused with 415 before any body is read. The engine reads bodies as sent: a compressed
 * recipe would otherwise be parsed as raw bytes and refused with a misleading shape error.
 */
export function identityEncodingOnly(): MiddlewareHandler {
  return async (c, next) => {
    const enc = c.req.header("content-encoding");
    if (enc !== undefined) {
      const codings = enc
        .split(",")
        .map((s) => s.trim().toLowerCase())
        .filter((s) => s !== "" && s !== "identity");
      if (codings.length > 0) {
        throw new BatonError(
          "unsupported_media_type",
          `[engine] the Content-Encoding header says "${enc.slice(0, 64)}"; the engine reads request bodies uncompressed only. Fix: send the body uncompressed, without a Content-Encoding header (or with "Content-Encoding: identity")`,
        );
      }
    }
    await next();
  };
}
