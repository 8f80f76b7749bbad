/**
 * Cloudflare Workers entry of the engine. `fetch` serves the core's app (the API, the runner
 * protocol, `/metrics`; no dashboard: its addresses answer where the dashboard Worker is,
 * http/dashboard-elsewhere.ts, and dashboard-worker.ts serves it); a Cron Trigger (`scheduled`) runs
 * `tick()` (deadlines, due effects, retention, and drift observation when its interval is due,
 * bounded to end within `SCHEDULED_BUDGET_MS` of the event); effects a request commits run
 * after the response under `ctx.waitUntil`. Store: Postgres over TCP sockets (`pg` +
 * `pg-cloudflare`, compatibility flag `nodejs_compat`), one small pool per event, closed when
 * the event's work has settled.
 * Built by scripts/build-worker.mjs; set up as in docs/deploying.md.
 */
import { apiRoutes } from "../http/api-routes.ts";
import {
  openEvent,
  type Surface,
  serverlessSettings,
  type WorkerContext,
  workerFetch,
} from "./serverless.ts";

/** What this Worker serves: the API, without the dashboard. Not exported (see below). */
const ENGINE: Surface = { api: apiRoutes };

/**
 * What a scheduled event gives drift observation, ms from the event's start: well inside what
 * Cloudflare lets a Cron Trigger run (wall-clock minutes, 30 s of CPU by default). Not
 * exported: every export of a Workers module must be a handler.
 */
const SCHEDULED_BUDGET_MS = 30_000;

export default {
  fetch: workerFetch(ENGINE),

  async scheduled(
    _event: unknown,
    env: Record<string, unknown>,
    ctx: WorkerContext,
  ): Promise<void> {
    // Bad settings or a database down fail the event, so the Cron Trigger's log shows it.
    const scope = await openEvent(serverlessSettings(env), ENGINE, {
      deadline: Date.now() + SCHEDULED_BUDGET_MS,
    });
    ctx.waitUntil(
      scope.core
        .tick()
        .catch((err) => console.error("[engine] scheduled tick failed", err))
        .finally(() => scope.finish()),
    );
  },
};
