/**
 * One rule for the query string of every route (API and dashboard): each parameter at most
 * once. Hono's `c.req.query()` keeps only the first of `?limit=1&limit=2`, so a twin would be
 * dropped silently; it is refused instead, before any route reads the query. A parameter a
 * route does not take is refused too (`knownQueryParams`), rather than ignored.
 */
import type { MiddlewareHandler } from "hono";
import { BatonError } from "../domain/errors.ts";

/**
 * The first parameter name given more than once in `search` (`?a=1&b=2&a=3` -> `a`), after
 * percent-decoding as `URLSearchParams` does, or null when every name is given once.
 */
export function repeatedQueryParam(search: string): string | null {
  const seen = new Set<string>();
  for (const name of new URLSearchParams(search).keys()) {
    if (seen.has(name)) return name;
    seen.add(name);
  }
  return null;
}

/** Middleware: a 400 `bad_request` naming the parameter given twice (`query.<name>`). */
export function singleQueryParams(): MiddlewareHandler {
  return async (c, next) => {
    const url = c.req.url;
    const q = url.indexOf("?");
    const name = q < 0 ? null : repeatedQueryParam(url.slice(q + 1).split("#")[0] ?? "");
    if (name !== null) {
      const shown = JSON.stringify(name).slice(1, -1);
      throw new BatonError(
        "bad_request",
        `[engine] bad query: ${shown} given twice; give it once`,
        [
          {
            path: `query.${name}`,
            message: `${shown} given twice; give it once`,
            fix: `give ${shown} once: drop the other ${shown}=... from the URL`,
          },
        ],
      );
    }
    await next();
  };
}

/** A query parameter's name as shown in an answer: quoted, control characters escaped, ≤ 64 characters. */
function shownName(name: string): string {
  return JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);
}

/**
 * Middleware: refuses every query parameter `route` does not take, before its handler reads
 * anything (body included): a 400 `bad_request` with one problem per unknown parameter at
 * `query.<name>`, naming it and the parameters the route takes. Used by every route under
 * `/v1/releases` but the runner's preflight and callback (docs/engine.md#http-api).
 * @param route the route as the docs name it, e.g. `GET /v1/releases/:id`.
 * @param accepted the parameters the route takes (none for most).
 * @param hint a sentence appended to each fix, e.g. where paging lives.
 * @throws BatonError 400.
 */
export function knownQueryParams(
  route: string,
  accepted: readonly string[] = [],
  hint = "",
): MiddlewareHandler {
  const takes =
    accepted.length > 0
      ? `${route} takes only ${accepted.join(", ")}`
      : `${route} takes no query parameters`;
  return async (c, next) => {
    const url = c.req.url;
    const q = url.indexOf("?");
    if (q >= 0) {
      const names = new Set(new URLSearchParams(url.slice(q + 1).split("#")[0] ?? "").keys());
      const unknown = [...names].filter((n) => !accepted.includes(n));
      if (unknown.length > 0) {
        const problems = unknown.map((name) => ({
          path: `query.${name.length > 64 ? `${name.slice(0, 64)}…` : name}`,
          message: `${shownName(name)} is not a parameter of ${route}`,
          fix: `remove ${shownName(name)} from the URL; ${takes}${hint ? `; ${hint}` : ""}`,
        }));
        const first = problems[0]!;
        throw new BatonError(
          "bad_request",
          `[engine] bad query: ${first.path}: ${first.message}`,
          problems,
        );
      }
    }
    await next();
  };
}
