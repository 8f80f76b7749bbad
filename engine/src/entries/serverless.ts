/**
 * What the serverless entries (worker.ts, lambda.ts) share: their settings, read from the
 * platform's environment (Workers `env`, Lambda `process.env`) with the Node entry's variable
 * names, and the composition of one core for one event: Postgres store, GitHub dispatcher, HTTP
 * control plane, system clock, console log. No interval: the platform's schedule calls `tick()`,
 * which also observes drift (docs/drift.md "Serverless") at most once per
 * BATON_DRIFT_INTERVAL_MS across all events, kept by the store's `drift` lease; the last
 * observation and its counters are kept in the store, where `GET /metrics` reads them.
 *
 * Nothing here holds a connection across events. Workers forbid I/O objects shared between
 * requests (a pool opened by one request hangs the next), so each event opens its own small
 * pool and closes it when the event's work, including effects it started, has settled
 * (`EventScope.finish`).
 */
import * as z from "zod";
import { GitHubDeployments } from "../adapters/github/deployments.ts";
import { GitHubDispatcher } from "../adapters/github/dispatcher.ts";
import { HttpControlPlane } from "../adapters/http-control-plane/index.ts";
import { HttpDependencyProbe } from "../adapters/http-dependency-probe/index.ts";
import { PostgresStore } from "../adapters/postgres/postgres-store.ts";
import { type Core, type CoreSettings, createCore, type Scheduler } from "../core.ts";
import { DeploymentEnvironmentSetting, DeploymentRefSetting } from "../domain/deployments.ts";
import { dashboardElsewhere } from "../http/dashboard-elsewhere.ts";
import {
  envSchemaFor,
  type RunnerCredentialMode,
  type RunnerOidcSettings,
  runnerCredentialFromEnv,
} from "../http/runner-oidc.ts";
import { systemClock } from "../ports/clock.ts";
import { lazySchema } from "../protocol/lazy-schema.ts";
import { operatorSecretProblems } from "../secret-settings.ts";
import { urlSettingProblems } from "../url-settings.ts";

/** The environment a serverless entry reads: variable name → value. */
export type ServerlessEnv = Record<string, unknown>;

// Checked by urlSettingProblems (url-settings.ts), the one rule of every URL setting.
const url = lazySchema(() => z.string().min(1, "must be a URL"));
const secretList = lazySchema(() =>
  z
    .string()
    .transform((s) => s.split(",").map((x) => x.trim()))
    .refine(
      (l) => l.length > 0 && l.every((x) => x.length >= 16),
      "each secret needs ≥ 16 characters",
    ),
);

const Env = lazySchema(() =>
  z.object({
    DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, "must be a postgres:// URL"),
    BATON_PUBLIC_URL: url,
    BATON_CALLBACK_SECRETS: secretList,
    BATON_OPERATOR_TOKEN: z.string().min(16, "needs ≥ 16 characters"),
    BATON_VIEWER_TOKEN: z.string().min(16, "needs ≥ 16 characters").optional(),
    BATON_CONTROL_PLANE_URL: url,
    /** Bearer token of control-plane writes (the reference control plane's BATON_CP_TOKEN). */
    BATON_CONTROL_PLANE_TOKEN: z.string().min(16, "needs ≥ 16 characters"),
    GITHUB_REPOSITORY: z.string().regex(/^[\w.-]+\/[\w.-]+$/, "must be owner/name"),
    GITHUB_TOKEN: z.string().min(1),
    /** GitHub's REST API (GitHub Enterprise Server, or a stand-in in tests). */
    GITHUB_API_URL: url.optional(),
    /** `off` lets releases share lanes (default one release per lane). */
    BATON_EXCLUSIVE_LANES: z.enum(["on", "off"]).optional(),
    /** GitHub Deployments: the default environment, e.g. `production` (docs/deploying.md). */
    BATON_GITHUB_DEPLOYMENTS: DeploymentEnvironmentSetting.optional(),
    BATON_GITHUB_DEPLOYMENT_REF: DeploymentRefSetting,
    /** The dashboard Worker's URL: the engine Worker redirects dashboard pages there. */
    BATON_DASHBOARD_URL: url.optional(),
    /** Connections per event (default 3: a commit, a claim and a read may overlap). */
    BATON_DB_POOL: z.coerce.number().int().min(1).max(10).optional(),
    /** Drift observation interval, ms (docs/drift.md): 0 off, else 1000..86400000; 60 s default. */
    BATON_DRIFT_INTERVAL_MS: z.coerce
      .number({ error: "must be a number (ms; 0 turns drift detection off)" })
      .int("must be a whole number of ms")
      .min(0, "must be 0 (off) or at least 1000")
      .max(86_400_000, "must be at most 86400000 (a day)")
      .refine((v) => v === 0 || v >= 1000, "must be 0 (off) or at least 1000")
      .default(60_000),
  }),
);

/** Settings of a serverless engine, validated (with the runner credential, BATON_OIDC_*). */
export type ServerlessSettings = z.infer<typeof Env> & {
  runnerCredential: { mode: RunnerCredentialMode; oidc: RunnerOidcSettings | null };
};

/**
 * Validates the environment. @throws Error `[engine] invalid configuration: …` naming every bad
 * variable and where to set it (the entries answer it as a 503 without touching the store).
 */
export function serverlessSettings(env: ServerlessEnv): ServerlessSettings {
  const clean = Object.fromEntries(
    Object.entries(env).filter(([, v]) => typeof v === "string" && v !== ""),
  );
  const r = envSchemaFor(Env, clean).safeParse(clean);
  const rc = runnerCredentialFromEnv(clean, {
    audience: String(clean.BATON_PUBLIC_URL ?? "").replace(/\/+$/, ""),
    repository: typeof clean.GITHUB_REPOSITORY === "string" ? clean.GITHUB_REPOSITORY : null,
  });
  const urls = urlSettingProblems(clean);
  const shared = operatorSecretProblems(
    typeof clean.BATON_CALLBACK_SECRETS === "string" ? clean.BATON_CALLBACK_SECRETS : undefined,
    typeof clean.BATON_OPERATOR_TOKEN === "string" ? clean.BATON_OPERATOR_TOKEN : undefined,
  );
  if (r.success && rc.ok && urls.length === 0 && shared.length === 0) {
    return { ...r.data, runnerCredential: { mode: rc.mode, oidc: rc.oidc } };
  }
  const lines = [
    ...(r.success ? [] : r.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`)),
    ...(rc.ok ? [] : rc.problems.map((p) => `${p.name}: ${p.message}`)),
    ...urls.map((p) => `${p.message} (fix: ${p.fix})`),
    ...shared.map((p) => `${p.message} (fix: ${p.fix})`),
  ];
  throw new Error(
    `[engine] invalid configuration: ${lines.join("; ")}; set these as the function's variables or secrets (docs/deploying.md)`,
  );
}

const consoleLog = {
  info: (m: string) => console.log(m),
  warn: (m: string) => console.warn(m),
  error: (m: string, e?: unknown) => console.error(m, e ?? ""),
};

/**
 * What an entry's app serves. The engine entry (worker.ts) serves the API and no dashboard
 * (its dashboard addresses answer where the dashboard is: http/dashboard-elsewhere.ts); the
 * dashboard Worker (dashboard-worker.ts) serves the dashboard and no API; Lambda serves both.
 */
export interface Surface {
  /** The dashboard under `/` (`dashboardApp`); none when absent. */
  dashboard?: CoreSettings["dashboard"];
  /** The API and the runner protocol (`apiRoutes`); none when absent. */
  api?: CoreSettings["api"];
}

/** What one event may spend (scheduled events): its end, epoch ms of the system clock. */
export interface EventBudget {
  /** Drift observation is bounded to end by then, and not started with less than 1 s left. */
  deadline?: number;
}

/**
 * One event's core and what it started. `defer` collects work that outlives the response
 * (effects after a commit); `finish()` waits for it (bounded by the reconciler's own bounds),
 * then closes the event's connections. Call `finish` exactly once per event.
 */
export class EventScope implements Scheduler {
  readonly core: Core;
  readonly store: PostgresStore;
  private readonly pending: Promise<unknown>[] = [];

  constructor(s: ServerlessSettings, surface: Surface, budget: EventBudget = {}) {
    this.store = new PostgresStore({ connectionString: s.DATABASE_URL, max: s.BATON_DB_POOL ?? 3 });
    this.core = createCore(
      {
        store: this.store,
        dispatcher: new GitHubDispatcher({
          repository: s.GITHUB_REPOSITORY,
          auth: { kind: "token", token: s.GITHUB_TOKEN },
          ...(s.GITHUB_API_URL ? { baseUrl: s.GITHUB_API_URL } : {}),
        }),
        controlPlane: new HttpControlPlane({
          baseUrl: s.BATON_CONTROL_PLANE_URL,
          token: s.BATON_CONTROL_PLANE_TOKEN,
        }),
        clock: systemClock,
        log: consoleLog,
        scheduler: this,
        // The runners reach the machines, the engine does not: rollbacks ask them first.
        runnerProbe: true,
        dependencyProbe: new HttpDependencyProbe(),
        ...(s.BATON_GITHUB_DEPLOYMENTS
          ? {
              deployments: {
                tracker: new GitHubDeployments({
                  repository: s.GITHUB_REPOSITORY,
                  auth: { kind: "token", token: s.GITHUB_TOKEN },
                  ...(s.GITHUB_API_URL ? { baseUrl: s.GITHUB_API_URL } : {}),
                }),
                policy: {
                  environment: s.BATON_GITHUB_DEPLOYMENTS,
                  ref: s.BATON_GITHUB_DEPLOYMENT_REF,
                  // Statuses wait in the outbox; the schedule's next tick retries them.
                  retry: { baseMs: 5_000, maxTries: 8 },
                },
              },
            }
          : {}),
      },
      {
        publicUrl: s.BATON_PUBLIC_URL.replace(/\/+$/, ""),
        callbackSecrets: s.BATON_CALLBACK_SECRETS,
        runnerCredential: s.runnerCredential,
        operatorToken: s.BATON_OPERATOR_TOKEN,
        viewerToken: s.BATON_VIEWER_TOKEN ?? null,
        repository: s.GITHUB_REPOSITORY,
        exclusiveLanes: s.BATON_EXCLUSIVE_LANES !== "off",
        ...(surface.api ? { api: surface.api } : {}),
        ...(surface.dashboard
          ? { dashboard: surface.dashboard }
          : {
              extendApp: (app) => {
                app.route("/", dashboardElsewhere(s.BATON_DASHBOARD_URL ?? null));
              },
            }),
        ...(s.BATON_DRIFT_INTERVAL_MS > 0
          ? {
              drift: {
                intervalMs: s.BATON_DRIFT_INTERVAL_MS,
                mode: "event" as const,
                ...(budget.deadline === undefined ? {} : { deadline: budget.deadline }),
              },
            }
          : {}),
      },
    );
  }

  defer(work: Promise<unknown>): void {
    this.pending.push(work);
  }

  /** Waits for deferred work (new work it defers too), stops the reconciler, closes the pool. */
  async finish(): Promise<void> {
    for (let i = 0; i < 100 && this.pending.length > 0; i++) {
      await Promise.allSettled(this.pending.splice(0));
    }
    await this.core.stop();
    await this.store.close().catch(() => {});
  }
}

/** The databases (DATABASE_URL) this isolate / execution environment has migrated. */
const migrated = new Set<string>();

/**
 * Opens one event's scope; the first event of an isolate / execution environment for a database
 * migrates the store (engines starting together wait on a database lock, so this is safe to
 * repeat).
 */
export async function openEvent(
  s: ServerlessSettings,
  surface: Surface,
  budget: EventBudget = {},
): Promise<EventScope> {
  const scope = new EventScope(s, surface, budget);
  if (!migrated.has(s.DATABASE_URL)) {
    try {
      await scope.store.migrate();
    } catch (err) {
      await scope.store.close().catch(() => {});
      throw err;
    }
    migrated.add(s.DATABASE_URL);
  }
  return scope;
}

/** The answer to an event that cannot be served because the settings are wrong. */
export function misconfigured(err: unknown): Response {
  const message = err instanceof Error ? err.message : String(err);
  return Response.json({ error: { code: "misconfigured", message } }, { status: 503 });
}

/** The answer when the store cannot be opened or migrated (database down): retry later. */
export function storeDown(err: unknown): Response {
  console.error("[engine] the store does not answer", err);
  return Response.json(
    {
      error: {
        code: "unavailable",
        message:
          "[engine] the store does not answer (database down, unreachable or refusing this login); nothing was changed; retry in a few seconds",
      },
    },
    { status: 503, headers: { "retry-after": "5" } },
  );
}

/**
 * Opens the event's scope, or answers why not: 503 `misconfigured` for bad settings, 503
 * `unavailable` (Retry-After) when the database cannot be reached or migrated.
 */
export async function openOrAnswer(
  env: ServerlessEnv,
  surface: Surface,
): Promise<EventScope | Response> {
  let settings: ServerlessSettings;
  try {
    settings = serverlessSettings(env);
  } catch (err) {
    console.error(String(err));
    return misconfigured(err);
  }
  try {
    return await openEvent(settings, surface);
  } catch (err) {
    return storeDown(err);
  }
}

/** The part of the Workers `ExecutionContext` the Workers entries use. */
export interface WorkerContext {
  waitUntil(work: Promise<unknown>): void;
}

/**
 * A Workers `fetch` handler serving `surface`: one event's scope per request (or the answer
 * why not, as `openOrAnswer`), closed under `ctx.waitUntil` once the response is made.
 */
export function workerFetch(
  surface: Surface,
): (req: Request, env: ServerlessEnv, ctx: WorkerContext) => Promise<Response> {
  return async (req, env, ctx) => {
    const scope = await openOrAnswer(env, surface);
    if (scope instanceof Response) return scope;
    try {
      return await scope.core.app.fetch(req);
    } finally {
      ctx.waitUntil(scope.finish());
    }
  };
}
