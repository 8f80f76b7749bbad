/**
 * One rule for the query string of every route (API and dashboard): each parameter at most
 * once. Hono's `c.req.query()` keeps only the first of `?limit=1&limit=2`, so a twin would be
 * dropped silently; it is refused instead, before any route reads the query.
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
