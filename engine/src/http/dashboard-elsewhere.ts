/**
 * What an app without the dashboard (the engine Worker) answers at the dashboard's addresses:
 * every path outside `/v1/` that no API route took. With the dashboard's URL
 * (BATON_DASHBOARD_URL), a GET or HEAD is redirected there (302, same path and query); any
 * other request, or any request when no URL is set, gets a 404 `dashboard_elsewhere` saying
 * where the dashboard is and how to deploy it (docs/deploying.md "Cloudflare Workers").
 * Mounted by the entry after the API's routes (`extend`), so it never shadows one.
 */
import { Hono } from "hono";
import { errorResponse } from "./errors.ts";

/** Where the dashboard is deployed, for the message (repository-relative doc). */
const HOW_TO_DEPLOY =
  'the dashboard is a second Worker built from the same source (node scripts/build-worker.mjs --dashboard; docs/deploying.md "Cloudflare Workers")';

/**
 * The routes answering dashboard addresses on an app that serves none. `dashboardUrl`: the
 * dashboard's base URL (no trailing slash needed), or null when unknown.
 */
export function dashboardElsewhere(dashboardUrl: string | null): Hono {
  const app = new Hono();
  const base = dashboardUrl?.replace(/\/+$/, "") ?? null;
  app.all("*", (c, next) => {
    if (c.req.path.startsWith("/v1/")) return next();
    const method = c.req.method;
    if (base && (method === "GET" || method === "HEAD")) {
      const url = new URL(c.req.url);
      return c.redirect(`${base}${url.pathname}${url.search}`, 302);
    }
    const where = base
      ? `the dashboard is at ${base}${c.req.path}`
      : `${HOW_TO_DEPLOY}; set BATON_DASHBOARD_URL on this Worker to be redirected there`;
    return errorResponse(
      c,
      404,
      "dashboard_elsewhere",
      `[engine] this is the engine: it serves the API (/v1/…), the runners and /metrics, not the dashboard; ${where}`,
    );
  });
  return app;
}
