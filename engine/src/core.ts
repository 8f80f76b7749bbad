/**
 * The portable core: ports in, `{ app, tick }` out. It imports no Node-only module (CI bundles
 * it for a neutral platform and fails on any `node:` import or native module:
 * scripts/check-portable.mjs), so the same core runs under Node (engine.ts, main-node.ts), on
 * Cloudflare Workers (entries/worker.ts) and on AWS Lambda (entries/lambda.ts).
 *
 * Wiring, once and in one direction:
 *   EffectsDue ← ReleaseService (commits; notifies when a commit wrote effects)
 *   Reconciler → ReleaseService (performs the outbox, feeds outcomes back through `apply`)
 *   EffectsDue → Reconciler.kick (the core connects the two; neither knows the other)
 *   Maintenance ← Retention, DriftObserver, DependencyProbes, DrillSchedule (built here from the ports; drift reads the fleet
 *     view over the service's reads), run by `tick` after each reconciler pass
 *   app → service (+ `tick` for `POST /v1/tick`, store counts and drift stats for `GET /metrics`)
 * The entry decides what drives `tick()`: an interval (Node), a Cron Trigger (Workers), an
 * EventBridge schedule (Lambda). Work a request starts (a kick) is handed to
 * `scheduler.defer`, which a serverless entry maps to `waitUntil`.
 */
import type { Hono } from "hono";
import type { AdmissionConfig } from "./admission/policy.ts";
import type { BundleVerifier } from "./admission/verify.ts";
import { type ApiRoutes, createApp } from "./http/app.ts";
import type { NamedToken } from "./http/auth.ts";
import type { DashboardTokens } from "./http/dashboard/auth.ts";
import type { DashboardDeps } from "./http/dashboard/index.tsx";
import { engineMetrics } from "./http/metrics.ts";
import { exposition } from "./http/prometheus-text.ts";
import {
  type RunnerCredentialMode,
  type RunnerOidcSettings,
  RunnerOidcVerifier,
} from "./http/runner-oidc.ts";
import type { Clock } from "./ports/clock.ts";
import type { ControlPlane } from "./ports/control-plane.ts";
import type { DependencyProbe } from "./ports/dependency-probe.ts";
import type { DeploymentTracker } from "./ports/deployments.ts";
import type { Dispatcher } from "./ports/dispatcher.ts";
import type { MetricsSource } from "./ports/metrics-source.ts";
import type { Notifier } from "./ports/notifier.ts";
import type { Store } from "./ports/store.ts";
import type { TargetProbe } from "./ports/target-probe.ts";
import { DependencyProbes } from "./service/dependency-probes.ts";
import type { Domain } from "./service/domain.ts";
import { DriftObserver, type DriftPolicy } from "./service/drift.ts";
import { DrillSchedule } from "./service/drill-schedule.ts";
import { EffectsDue } from "./service/effects-due.ts";
import { loadFleet } from "./service/fleet-load.ts";
import { Maintenance } from "./service/maintenance.ts";
import { Reconciler, type ReconcilerOptions } from "./service/reconciler.ts";
import {
  type DeploymentsPolicy,
  effectsPolicyOf,
  type Logger,
  type NotifyPolicy,
  ReleaseService,
} from "./service/release-service.ts";
import { DEFAULT_RETENTION, Retention, type RetentionPolicy } from "./service/retention.ts";

/** How work started by a request outlives the response (Workers: `ctx.waitUntil`). */
export interface Scheduler {
  /** Keeps the runtime alive until `work` settles. Node needs nothing (the process lives on). */
  defer(work: Promise<unknown>): void;
}

/** The ports the core runs on; every one is an interface with adapters per platform. */
export interface CorePorts {
  store: Store;
  dispatcher: Dispatcher;
  controlPlane: ControlPlane;
  clock: Clock;
  log: Logger;
  /** Default: nothing to do (a long-lived process). */
  scheduler?: Scheduler;
  /** Notifiers and what they are told; none by default. */
  notify?: NotifyPolicy;
  /** GitHub Deployments: where statuses go and the policy; off by default. */
  deployments?: { tracker: DeploymentTracker; policy: DeploymentsPolicy };
  /** Where gates read their numbers; none: every gate's evidence is missing (docs/gate.md). */
  metrics?: MetricsSource;
  /**
   * Asks lanes' machines a rollback's prerequisites and, when a recovery is verified, what they
   * run and their health (docs/lifecycle.md); none: the prerequisite checks are recorded as not
   * asked and the rollback goes on, and verification reads the lanes' last runner reports.
   */
  targetProbe?: TargetProbe;
  /**
   * Without `targetProbe`: ask a rollback's prerequisites by a read-only runner step per lane
   * through `dispatcher` (docs/lifecycle.md "Rollback prerequisites"). Default false.
   */
  runnerProbe?: boolean;
  /**
   * Asks mutable dependencies' providers their revision (docs/drift.md "Mutable dependencies"),
   * on the drift schedule; none (or drift off): not probed, and starts are judged by their
   * contracts' expiry alone.
   */
  dependencyProbe?: DependencyProbe;
}

/** The settings the core needs (the rest of EngineConfig is for entries and adapters). */
export interface CoreSettings {
  /** Engine URL as runners and browsers reach it (callback URLs, links). */
  publicUrl: string;
  /** HMAC secrets of preflight/callback credentials (rotation list). */
  callbackSecrets: readonly string[];
  /**
   * How runners authenticate (docs/runner.md): `hmac` (default), `oidc` (a GitHub Actions OIDC
   * token checked against `oidc`), or both. Modes with `oidc` need its settings.
   */
  runnerCredential?: { mode: RunnerCredentialMode; oidc: RunnerOidcSettings | null };
  operatorToken: string;
  /** People's own operator tokens (BATON_OPERATORS): actions sent with one are recorded as theirs. */
  operators?: readonly NamedToken[];
  viewerToken: string | null;
  /** owner/name, for run links. */
  repository?: string;
  /**
   * The dashboard the entry mounts under `/` (`dashboardApp` of http/dashboard/index.tsx); none
   * when absent. The core never imports the dashboard itself, so an entry without it (the
   * engine Worker) bundles none of its modules.
   */
  dashboard?: (deps: DashboardDeps) => Hono;
  /**
   * The HTTP API the entry mounts (`apiRoutes` of http/api-routes.ts: `/healthz`, `/metrics`,
   * `/v1/*` with the runner protocol); none when absent (the dashboard Worker), and then none
   * of its routes is bundled.
   */
  api?: ApiRoutes;
  reconciler?: Partial<ReconcilerOptions>;
  /** Kick the reconciler right after a commit that wrote effects (default true). */
  eagerReconcile?: boolean;
  /** One release per lane (default true). */
  exclusiveLanes?: boolean;
  /** Admission policy of new releases (admission/policy.ts); off by default. */
  admission?: AdmissionConfig;
  /** Its bundle verifier in `enforce` mode (Node entry: `new BundleVerifier(policy)`). */
  admissionVerifier?: BundleVerifier;
  /** Retention of finished releases, run from `tick` (service/retention.ts). */
  retention?: RetentionPolicy;
  /** Drift detection from `tick` (service/drift.ts); off when absent. */
  drift?: DriftPolicy;
  /** Transition and compiler (tests wrap them). */
  domain?: Domain;
  /** Mounts more routes on the app before the dashboard. */
  extendApp?: (app: Hono) => void;
}

export interface Core {
  /** The Hono app: serve it with any adapter (`app.fetch`). */
  app: Hono;
  /** One reconciler pass: fires due deadlines, performs due effects. Concurrent calls share one. */
  tick(): Promise<{ performed: number; failed: number }>;
  service: ReleaseService;
  reconciler: Reconciler;
  /** The drift observer; null when drift detection is off (or the control plane lists no lanes). */
  drift: DriftObserver | null;
  /** Stops kicking and waits (bounded) for effects in flight. */
  stop(): Promise<void>;
}

/** Builds the core from its ports. Pure wiring: opens nothing, starts no timer. */
export function createCore(ports: CorePorts, s: CoreSettings): Core {
  const { store, dispatcher, controlPlane, clock, log } = ports;
  const effectsDue = new EffectsDue();
  const service = new ReleaseService({
    store,
    clock,
    publicUrl: s.publicUrl,
    log,
    effectsDue,
    dispatcher,
    ...(s.domain ? { domain: s.domain } : {}),
    ...(s.exclusiveLanes === undefined ? {} : { exclusiveLanes: s.exclusiveLanes }),
    ...(s.admission ? { admission: s.admission } : {}),
    ...(s.admissionVerifier ? { admissionVerifier: s.admissionVerifier } : {}),
    ...(ports.notify ? { notify: ports.notify } : {}),
    ...(ports.deployments ? { deployments: ports.deployments.policy } : {}),
    ...(ports.targetProbe ? { targetProbe: ports.targetProbe } : {}),
    ...(ports.runnerProbe ? { runnerProbe: true } : {}),
    controlPlane,
  });
  const drift =
    s.drift && controlPlane.lanes
      ? new DriftObserver({
          store,
          controlPlane,
          clock,
          policy: s.drift,
          log,
          readFleet: async (cp) => (await loadFleet(service, cp, null)).models,
          effects: effectsPolicyOf({
            publicUrl: s.publicUrl,
            notify: ports.notify,
            deployments: ports.deployments?.policy,
          }),
        })
      : null;
  const dependencies =
    s.drift && ports.dependencyProbe
      ? new DependencyProbes({
          store,
          probe: ports.dependencyProbe,
          clock,
          policy: s.drift,
          log,
          effects: effectsPolicyOf({
            publicUrl: s.publicUrl,
            notify: ports.notify,
            deployments: ports.deployments?.policy,
          }),
        })
      : null;
  const drills = s.drift
    ? new DrillSchedule({
        store,
        clock,
        policy: s.drift,
        log,
        effects: effectsPolicyOf({
          publicUrl: s.publicUrl,
          notify: ports.notify,
          deployments: ports.deployments?.policy,
        }),
      })
    : null;
  const maintenance = new Maintenance(
    new Retention(store, clock, s.retention ?? DEFAULT_RETENTION, log),
    drift,
    dependencies,
    drills,
  );
  const notify = ports.notify && ports.notify.notifiers.length > 0 ? ports.notify : null;
  const reconciler = new Reconciler(
    {
      store,
      dispatcher,
      controlPlane,
      clock,
      publicUrl: s.publicUrl,
      log,
      releases: service,
      ...(ports.metrics ? { metrics: ports.metrics } : {}),
      ...(ports.targetProbe ? { targetProbe: ports.targetProbe } : {}),
      ...(notify
        ? {
            notifiers: new Map<string, Notifier>(notify.notifiers.map((n) => [n.channel, n])),
            notifyRetry: notify.retry,
          }
        : {}),
      ...(ports.deployments
        ? {
            deployments: ports.deployments.tracker,
            deploymentsRetry: ports.deployments.policy.retry,
          }
        : {}),
    },
    s.reconciler,
  );
  if (s.eagerReconcile !== false) {
    effectsDue.listen(() => {
      reconciler.kick();
      ports.scheduler?.defer(reconciler.idle());
    });
  }
  const tick = async () => {
    const done = await reconciler.runOnce();
    await maintenance.run();
    return done;
  };
  const rc = s.runnerCredential;
  if (rc && rc.mode !== "hmac" && !rc.oidc) {
    throw new Error(`[engine] runner credential ${rc.mode} needs its OIDC settings (BATON_OIDC_*)`);
  }
  // One read of a model's lanes, for GET /v1/releases/:id/lanes (absent: no such read).
  const lanesRead = controlPlane.lanes?.bind(controlPlane);
  const app = createApp({
    api: service,
    tick,
    clock,
    callbackSecrets: s.callbackSecrets,
    ...(rc?.oidc && rc.mode !== "hmac"
      ? {
          runnerCredential: {
            mode: rc.mode,
            verifier: new RunnerOidcVerifier(rc.oidc),
            store,
          },
        }
      : {}),
    operatorToken: s.operatorToken,
    ...(s.operators ? { operators: s.operators } : {}),
    viewerToken: s.viewerToken,
    metrics: async () =>
      exposition(
        engineMetrics({
          releases: await store.countReleases(),
          drift: await maintenance.driftMetrics(),
        }),
      ),
    publicUrl: s.publicUrl,
    ...(s.repository ? { repository: s.repository } : {}),
    ...(lanesRead ? { lanes: lanesRead } : {}),
    log,
    ...(s.api ? { routes: s.api } : {}),
    extend: (a) => {
      s.extendApp?.(a);
      if (s.dashboard) {
        const tokens: DashboardTokens = { operator: s.operatorToken, people: s.operators ?? [] };
        if (s.viewerToken) tokens.viewer = s.viewerToken;
        a.route(
          "/",
          s.dashboard({
            api: service,
            tokens,
            publicUrl: s.publicUrl,
            now: () => clock.now(),
            controlPlane,
            ...(s.repository ? { repository: s.repository } : {}),
          }),
        );
      }
    },
  });
  const stop = async () => {
    await reconciler.stop();
    await maintenance.stop();
  };
  return { app, tick, service, reconciler, drift, stop };
}
