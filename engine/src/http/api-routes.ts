/** The HTTP API's routes, mounted by the entries that serve the API (core.ts `api`). */
import type { ApiRoutes } from "./app.ts";
import { incidentRoutes } from "./routes/incidents.ts";
import { modelRoutes } from "./routes/models.ts";
import { releaseRoutes } from "./routes/releases.ts";
import { stepRunRoutes } from "./routes/step-runs.ts";
import { systemRoutes } from "./routes/system.ts";

/**
 * The HTTP API of docs/engine.md on `app`: `/healthz`, `POST /v1/tick`, `/metrics`, the runner
 * protocol (`/v1/releases/step-runs`), models, incidents and releases. An entry that serves the
 * API passes it to the app (`CoreSettings.api`); the dashboard Worker does not.
 */
export const apiRoutes: ApiRoutes = (app, o, { operatorTokens, readTokens }) => {
  const operators = o.operators ?? [];
  /** What every route group needs to serve and authorise a request. */
  const auth = { api: o.api, operatorTokens, operators, readTokens };
  app.route(
    "/",
    systemRoutes({
      api: o.api,
      tick: o.tick,
      operatorTokens,
      readTokens,
      ...(o.metrics ? { metrics: o.metrics } : {}),
    }),
  );
  app.route(
    "/v1/releases/step-runs",
    stepRunRoutes({
      ...auth,
      clock: o.clock,
      callbackSecrets: o.callbackSecrets,
      ...(o.runnerCredential ? { runnerCredential: o.runnerCredential } : {}),
      ...(o.log ? { log: o.log } : {}),
    }),
  );
  app.route("/v1/models", modelRoutes(auth));
  app.route("/v1/incidents", incidentRoutes(auth));
  app.route(
    "/v1/releases",
    releaseRoutes({
      ...auth,
      ...(o.repository ? { repository: o.repository } : {}),
      ...(o.lanes ? { lanes: o.lanes } : {}),
    }),
  );
};
