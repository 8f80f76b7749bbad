/**
 * Cloudflare Workers entry of the dashboard: the second Worker of a Workers deployment, built
 * from the same source (scripts/build-worker.mjs --dashboard). `fetch` serves the dashboard's
 * pages, login, actions and live updates (http/dashboard/) from the same Postgres store and
 * settings as the engine Worker (worker.ts); it serves no API and none of the runner protocol,
 * and has no Cron Trigger (the engine Worker's schedule runs `tick()`). Effects an action
 * commits run after the response under `ctx.waitUntil`, as on the engine Worker.
 * Set up as in docs/deploying.md "Cloudflare Workers".
 */
import { dashboardApp } from "../http/dashboard/index.tsx";
import { type Surface, workerFetch } from "./serverless.ts";

/** What this Worker serves: the dashboard, without the API. Not exported (see below). */
const DASHBOARD: Surface = { dashboard: dashboardApp };

// Every export of a Workers module must be a handler.
export default { fetch: workerFetch(DASHBOARD) };
