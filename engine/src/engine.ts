/**
 * The Node composition: configuration → Node adapters (SQLite or Postgres store, local runner or
 * GitHub dispatcher, embedded or remote control plane) → the portable core (core.ts) → an
 * interval ticker. Used by `main-node.ts`, the CLI, the demo and tests; anything can be
 * injected (store, dispatcher, control plane, clock) so tests run the real app on doubles.
 */

import { join } from "node:path";
import type { Hono } from "hono";
import { GitHubDeployments } from "./adapters/github/deployments.ts";
import { GitHubDispatcher } from "./adapters/github/index.ts";
import { HttpControlPlane } from "./adapters/http-control-plane/index.ts";
import { HttpDependencyProbe } from "./adapters/http-dependency-probe/index.ts";
import { LocalRunner } from "./adapters/local-runner/index.ts";
import { notifiersFromConfig } from "./adapters/notifier/index.ts";
import { PrometheusMetricsSource } from "./adapters/prometheus/index.ts";
import { SshTargetProbe } from "./adapters/ssh-target-probe/index.ts";
import { openStore } from "./adapters/store-factory.ts";
import { BundleVerifier } from "./admission/verify.ts";
import type { EngineConfig } from "./config.ts";
import { startEmbeddedControlPlane } from "./control-plane/embedded.ts";
import { createCore } from "./core.ts";
import { NOTICE_KINDS } from "./domain/notifications.ts";
import { declareRecipeLanes } from "./embedded-lanes.ts";
import { installFaultHost } from "./faults.ts";
import { apiRoutes } from "./http/api-routes.ts";
import { dashboardApp } from "./http/dashboard/index.tsx";
import { prepareDataDir } from "./node/data-dir.ts";
import { nodeFaultHost } from "./node/fault-host.ts";
import { type Clock, systemClock } from "./ports/clock.ts";
import type { ControlPlane } from "./ports/control-plane.ts";
import type { DependencyProbe } from "./ports/dependency-probe.ts";
import type { DeploymentTracker } from "./ports/deployments.ts";
import type { Dispatcher } from "./ports/dispatcher.ts";
import type { MetricsSource } from "./ports/metrics-source.ts";
import type { Notifier } from "./ports/notifier.ts";
import type { Store } from "./ports/store.ts";
import type { TargetProbe } from "./ports/target-probe.ts";
import type { Domain } from "./service/domain.ts";
import type { DriftObserver } from "./service/drift.ts";
import { passFailureLog } from "./service/pass-failure-log.ts";
import type { Reconciler, ReconcilerOptions } from "./service/reconciler.ts";
import type { DeploymentsPolicy, Logger, ReleaseService } from "./service/release-service.ts";

export interface EngineOverrides {
  store?: Store;
  dispatcher?: Dispatcher;
  controlPlane?: ControlPlane;
  clock?: Clock;
  log?: Logger;
  reconciler?: Partial<ReconcilerOptions>;
  /**
   * Run the reconciler right after a commit that wrote effects (default true), so a step's
   * next dispatch does not wait for the interval. Tests that step the reconciler by hand
   * (fake clock) turn it off.
   */
  eagerReconcile?: boolean;
  /** Mounts more routes on the app (e.g. the dashboard). */
  extendApp?: (app: Hono) => void;
  /** Transition and compiler (tests wrap them). */
  domain?: Domain;
  /** Mount the dashboard under `/` (default true). */
  dashboard?: boolean;
  /** Notifiers instead of those `config.notify` names (tests). */
  notifiers?: Notifier[];
  /** Deployment tracker instead of GitHub's when `config.githubDeployments` is set (tests). */
  deployments?: DeploymentTracker;
  /**
   * Where gates read their numbers (docs/gate.md); default: Prometheus at
   * `config.prometheusUrl`, else none (gated waves end inconclusive).
   */
  metrics?: MetricsSource;
  /**
   * Asks lanes' machines a rollback's prerequisites. Default: over SSH with BATON_SSH_KEY_FILE
   * when the local dispatcher is configured (and no dispatcher is injected), else none.
   */
  targetProbe?: TargetProbe;
  /**
   * Without a target probe: ask a rollback's prerequisites by a read-only runner step per lane
   * (docs/lifecycle.md "Rollback prerequisites"). Default: on with the GitHub dispatcher
   * (BATON_DISPATCHER=github: the runners reach the machines, the engine does not).
   */
  runnerProbe?: boolean;
  /** Asks mutable dependencies' providers their revision; default: their probe URLs over HTTP. */
  dependencyProbe?: DependencyProbe;
}

export interface Engine {
  config: EngineConfig;
  app: Hono;
  service: ReleaseService;
  reconciler: Reconciler;
  /** The drift observer (its counters: `stats()`); null when drift detection is off. */
  drift: DriftObserver | null;
  /** One reconciler pass (what the interval calls). */
  tick(): Promise<{ performed: number; failed: number }>;
  store: Store;
  dispatcher: Dispatcher;
  controlPlane: ControlPlane;
  clock: Clock;
  /** Starts the reconciler interval (`config.tickMs`). */
  startTicking(): void;
  /** Stops the interval, waits for a running reconciler pass, closes the store (if owned). */
  close(): Promise<void>;
}

/** Builds the dispatcher the configuration names. @throws Error naming the missing setting. */
export function dispatcherFromConfig(config: EngineConfig): Dispatcher {
  if (config.dispatcher === "github") {
    if (!config.githubRepository) {
      throw new Error("[engine] BATON_DISPATCHER=github needs GITHUB_REPOSITORY=owner/name");
    }
    const auth = config.githubApp
      ? { kind: "app" as const, ...config.githubApp }
      : config.githubToken
        ? { kind: "token" as const, token: config.githubToken }
        : null;
    if (!auth)
      throw new Error("[engine] BATON_DISPATCHER=github needs GITHUB_TOKEN or a GitHub App");
    return new GitHubDispatcher({
      repository: config.githubRepository,
      auth,
      ...(config.githubApiUrl ? { baseUrl: config.githubApiUrl } : {}),
      ...(config.githubTimeoutMs ? { timeoutMs: config.githubTimeoutMs } : {}),
      ...(config.githubPacing ? { pacing: config.githubPacing } : {}),
    });
  }
  // The local runner plays GitHub Actions on this machine: it runs the release-step action
  // of this checkout for each dispatch (docs/engine.md, "Dispatchers").
  return new LocalRunner({
    repoRoot: process.cwd(),
    workDir: join(config.dataDir, "runner"),
    inputs: {
      "engine-url": config.publicUrl,
      "callback-secret": config.callbackSecrets[0] ?? "",
      ...(config.sshKey ? { "ssh-key": config.sshKey } : {}),
    },
  });
}

/** Creates the engine. Opens (and migrates) the store unless one is injected. */
export async function createEngine(config: EngineConfig, o: EngineOverrides = {}): Promise<Engine> {
  const clock = o.clock ?? systemClock;
  const log: Logger = o.log ?? {
    info: (m) => console.log(m),
    warn: (m) => console.warn(m),
    error: (m, e) => console.error(m, e ?? ""),
  };
  // The data directory is used unless store, dispatcher and control plane all come from elsewhere.
  if (!o.store || !o.dispatcher || !o.controlPlane) prepareDataDir(config.dataDir);
  const dispatcher = o.dispatcher ?? dispatcherFromConfig(config);
  const closers: (() => Promise<void>)[] = [];
  let controlPlane: ControlPlane;
  if (o.controlPlane) {
    controlPlane = o.controlPlane;
  } else {
    // Every write names its release's model in its context: one adapter serves every model.
    let baseUrl = config.controlPlaneUrl;
    let token = config.controlPlaneToken ?? null;
    if (!baseUrl) {
      const embedded = await startEmbeddedControlPlane({
        dataDir: config.dataDir,
        ...(token ? { writeToken: token } : {}),
      });
      baseUrl = embedded.handle.url;
      token = embedded.handle.writeToken;
      closers.push(() => embedded.handle.close());
      log.info(`[engine] embedded control plane at ${baseUrl}`);
      for (const file of config.embeddedLanes ?? []) {
        log.info(`[engine] ${declareRecipeLanes(embedded.handle.core, file)}`);
      }
    }
    if (!token) {
      throw new Error(
        "[engine] BATON_CONTROL_PLANE_URL needs BATON_CONTROL_PLANE_TOKEN (the control plane's write token)",
      );
    }
    controlPlane = new HttpControlPlane({ baseUrl, token });
  }
  const ownsStore = !o.store;
  const store =
    o.store ??
    (await openStore(
      config.databaseUrl
        ? { databaseUrl: config.databaseUrl, dataDir: config.dataDir }
        : { dataDir: config.dataDir },
    ));

  installFaultHost(nodeFaultHost);
  const deployments = deploymentsFromConfig(config, o.deployments);
  const metrics =
    o.metrics ??
    (config.prometheusUrl ? new PrometheusMetricsSource({ baseUrl: config.prometheusUrl }) : null);
  const targetProbe =
    o.targetProbe ??
    (!o.dispatcher && config.dispatcher !== "github" && config.sshKey
      ? new SshTargetProbe({
          privateKey: config.sshKey,
          ...(process.env.BATON_DEPLOY_SCRIPT
            ? { deployScript: process.env.BATON_DEPLOY_SCRIPT }
            : {}),
        })
      : null);
  const core = createCore(
    {
      store,
      dispatcher,
      controlPlane,
      clock,
      log,
      ...(metrics ? { metrics } : {}),
      ...(deployments ? { deployments } : {}),
      ...(targetProbe ? { targetProbe } : {}),
      dependencyProbe: o.dependencyProbe ?? new HttpDependencyProbe(),
      ...(!targetProbe && (o.runnerProbe ?? config.dispatcher === "github")
        ? { runnerProbe: true }
        : {}),
      notify: {
        notifiers: o.notifiers ?? notifiersFromConfig(config),
        events: new Set(config.notify?.events ?? NOTICE_KINDS),
        retry: {
          baseMs: config.notify?.retryBaseMs ?? 5_000,
          maxTries: config.notify?.maxTries ?? 8,
        },
      },
    },
    {
      publicUrl: config.publicUrl,
      callbackSecrets: config.callbackSecrets,
      ...(config.runnerCredential ? { runnerCredential: config.runnerCredential } : {}),
      operatorToken: config.operatorToken,
      ...(config.operators ? { operators: config.operators } : {}),
      viewerToken: config.viewerToken,
      ...(config.githubRepository ? { repository: config.githubRepository } : {}),
      api: apiRoutes,
      ...(o.dashboard === false ? {} : { dashboard: dashboardApp }),
      ...(o.reconciler ? { reconciler: o.reconciler } : {}),
      ...(o.eagerReconcile === false ? { eagerReconcile: false } : {}),
      ...(o.domain ? { domain: o.domain } : {}),
      ...(o.extendApp ? { extendApp: o.extendApp } : {}),
      exclusiveLanes: process.env.BATON_EXCLUSIVE_LANES !== "off",
      ...(config.admission ? { admission: config.admission } : {}),
      ...(config.admission?.mode === "enforce"
        ? { admissionVerifier: new BundleVerifier(config.admission.policy) }
        : {}),
      ...(config.retention ? { retention: config.retention } : {}),
      ...(config.driftIntervalMs
        ? {
            drift: {
              intervalMs: config.driftIntervalMs,
              ...(config.driftSettleMs === undefined ? {} : { settleMs: config.driftSettleMs }),
            },
          }
        : {}),
    },
  );
  log.info(admissionLine(config));
  const keyWarning = o.dispatcher ? null : sshKeyWarning(config);
  if (keyWarning) log.warn(keyWarning);
  let timer: NodeJS.Timeout | null = null;
  return {
    config,
    app: core.app,
    service: core.service,
    reconciler: core.reconciler,
    drift: core.drift,
    tick: core.tick,
    store,
    dispatcher,
    controlPlane,
    clock,
    startTicking() {
      if (timer) return;
      const failures = passFailureLog(log);
      timer = setInterval(() => {
        core.tick().then(failures.ok, failures.failed);
      }, config.tickMs);
      timer.unref();
    },
    async close() {
      if (timer) clearInterval(timer);
      timer = null;
      await core.stop();
      for (const c of closers) await c().catch(() => {});
      if (ownsStore) await store.close();
    },
  };
}

/**
 * The start-up warning when the local dispatcher has no SSH key (BATON_SSH_KEY_FILE unset):
 * every runner step would fail before reaching a machine. Null when there is nothing to say.
 */
export function sshKeyWarning(config: EngineConfig): string | null {
  if (config.dispatcher !== "local" || config.sshKey) return null;
  return "[engine] warning: the local dispatcher (BATON_DISPATCHER=local, the default) has no SSH key: every runner step (deploy, smoke check, restore) will fail before it reaches a machine (`input ssh-key is empty`); fix: set BATON_SSH_KEY_FILE to the SSH private key the runner uses to log in to the lanes' machines, or set BATON_DISPATCHER=github to run the steps in GitHub Actions";
}

/** One start-up line saying how manifests are admitted (docs/trust.md "Modes"). */
function admissionLine(config: EngineConfig): string {
  const a = config.admission ?? { mode: "off" as const };
  if (a.mode === "enforce") {
    const s = a.policy.manifest.signers;
    return `[engine] admission: enforcing the trust policy (${s.keys.length} key(s), ${s.identities.length} identity(ies) may sign manifests; provenance ${a.policy.images.provenance}, sbom ${a.policy.images.sbom})`;
  }
  if (a.mode === "unconfigured") {
    return "[engine] admission: no trust policy (BATON_TRUST_POLICY unset): every start is refused as unsigned; set BATON_ADMISSION=off for local use only";
  }
  return "[engine] admission: off: manifests are not verified (local use only)";
}

/**
 * GitHub Deployments from `config.githubDeployments` (null when off): the tracker (`override`,
 * else GitHub's through the engine's token or App) and the policy.
 */
function deploymentsFromConfig(
  config: EngineConfig,
  override: DeploymentTracker | undefined,
): { tracker: DeploymentTracker; policy: DeploymentsPolicy } | null {
  const d = config.githubDeployments;
  if (!d) return null;
  const policy: DeploymentsPolicy = {
    environment: d.environment,
    ref: d.ref,
    retry: { baseMs: config.notify?.retryBaseMs ?? 5_000, maxTries: config.notify?.maxTries ?? 8 },
  };
  if (override) return { tracker: override, policy };
  const auth = config.githubApp
    ? { kind: "app" as const, ...config.githubApp }
    : config.githubToken
      ? { kind: "token" as const, token: config.githubToken }
      : null;
  if (!auth || !config.githubRepository) {
    throw new Error(
      "[engine] BATON_GITHUB_DEPLOYMENTS needs GITHUB_REPOSITORY and GITHUB_TOKEN or a GitHub App",
    );
  }
  const tracker = new GitHubDeployments({
    repository: config.githubRepository,
    auth,
    ...(config.githubApiUrl ? { baseUrl: config.githubApiUrl } : {}),
    ...(config.githubTimeoutMs ? { timeoutMs: config.githubTimeoutMs } : {}),
  });
  return { tracker, policy };
}
