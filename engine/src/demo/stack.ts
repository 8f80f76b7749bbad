/**
 * The whole embedded default in one process: the fleet (reference control plane + embedded SSH
 * target), the local runner (runs the bundled release-step action as a GitHub runner would),
 * and the engine (SQLite, or Postgres with `databaseUrl`) serving its HTTP app on 127.0.0.1.
 * Used by `npm run demo` and by the e2e harness.
 */

import { createPublicKey, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join, resolve } from "node:path";
import { EmbeddedMetricsSource } from "../adapters/embedded-metrics/index.ts";
import { type LocalRunEvent, LocalRunner } from "../adapters/local-runner/index.ts";
import { SshTargetProbe } from "../adapters/ssh-target-probe/index.ts";
import { parseTrustPolicy, type TrustPolicy } from "../admission/policy.ts";
import {
  generateSigningKey,
  type SigningKey,
  signManifest,
  signWithKey,
} from "../admission/sign.ts";
import { GITHUB_HOSTED_BUILDER, provenanceStatement } from "../admission/statement.ts";
import type { EngineConfig } from "../config.ts";
import { type ImageProfile, TrafficGenerator } from "../control-plane/traffic.ts";
import type { RecipeInput } from "../domain/recipe.ts";
import type { Manifest } from "../domain/types.ts";
import { createEngine, type Engine } from "../engine.ts";
import { makeDirs } from "../node/data-dir.ts";
import { httpLimitsFromEnv, type ServedFetch, serveWithLimits } from "../node/http-server.ts";
import type { Clock } from "../ports/clock.ts";
import { compileRecipeInput } from "../recipes/compile-text.ts";
import type { Logger } from "../service/release-service.ts";
import { type Fleet, REPO_ROOT, startFleet } from "./fleet.ts";
import { laneIdsOf, pointRecipeAtFleet, readRecipeFile } from "./recipe.ts";

/** Default recipe of the demo. */
export const EXAMPLE_RECIPE = join(REPO_ROOT, "recipes/example.yaml");

/**
 * The image a lane runs after a local-runner event, when that event is a deploy or a restore
 * (`attach-queue-lane`, `restore-queue-lane`) that ran and succeeded: `{lane, image}` from its
 * payload's `args`; null for anything else. A run that ended `success` without doing its step
 * (its preflight declined, 409: a stale generation after an abort, say; output `status` is then
 * `declined`) changed nothing on the lane, so it reports nothing: only the action's output
 * `status: succeeded` counts. Otherwise the next release's observed baseline names an image the
 * lane never ran, its deploy stops that (absent) container instead of the one running, and the
 * old container keeps running beside the new one.
 */
export function laneImageChange(e: LocalRunEvent): { lane: string; image: string } | null {
  if (e.type !== "finished" || e.run.conclusion !== "success") return null;
  if (e.run.outputs.status !== "succeeded") return null;
  const p = e.run.payload;
  if (p.tool !== "attach-queue-lane" && p.tool !== "restore-queue-lane") return null;
  const lane = (p.args as { lane?: { id?: unknown } }).lane?.id;
  const image = (p.args as { image?: unknown }).image;
  if (typeof lane !== "string" || typeof image !== "string") return null;
  return { lane, image };
}

export interface StackOptions {
  /** Working folder: engine SQLite file, control-plane file, target sandbox, runner folders. */
  dir: string;
  /** `postgres://…` to run the engine on Postgres instead of SQLite. */
  databaseUrl?: string | null;
  /** The recipe to aim at the fleet (already read); its lanes decide the fleet's health ports. */
  recipe: RecipeInput;
  /** The engine's (API and dashboard) port on 127.0.0.1; default 0 (a free one). */
  port?: number;
  /** Reconciler interval, ms (default 200). */
  tickMs?: number;
  /** Deadline overrides written into the recipe (ms). */
  deadlines?: { start_ms?: number; callback_ms?: number };
  /** Engine log (default: warnings and errors to stderr). */
  log?: Logger;
  /** Runner steps the local runner executes at once (default 4, like a few busy runners). */
  maxConcurrentRuns?: number;
  /** More environment for the runner's steps (the action and the tools). */
  runnerEnv?: Record<string, string>;
  /** Told about every local-runner event (after the stack's own handling). */
  onRunEvent?: (e: LocalRunEvent) => void;
  /**
   * `sign` (the demo): the stack generates a signing key, the engine enforces a trust policy
   * allowing only that key, and `startBody` signs the manifest and the image's provenance.
   * `off` (default): admission off, as for local use (BATON_ADMISSION=off).
   */
  admission?: "sign" | "off";
  /**
   * Outcome model of the candidate image in the router's traffic generator (e.g.
   * `{errorRate: 0.05}`); the previous image keeps the default (1% errors, 80 ms median).
   */
  candidateProfile?: Partial<ImageProfile>;
  /** The engine's clock (default: the wall clock); tests move it to pass a deadline. */
  clock?: Clock;
  /** Seconds deploy.sh on the embedded target waits for a lane's health URL (default 2). */
  healthTimeoutS?: number;
  /**
   * Declared model-load time (ms) of every container started after the lanes' bootstrap: its
   * health URL answers 503 (loading) for that long, as a model server loading its weights
   * would (waiting, not CPU). Default 0 (healthy as soon as it listens).
   */
  modelLoadMs?: number;
  /**
   * Drift detection interval, ms (docs/drift.md; default off: the e2e tests change lanes by
   * hand). The demo turns it on so `demo --serve` shows `baton_drift_*` on /metrics.
   */
  driftIntervalMs?: number;
  /**
   * How a rollback's prerequisites are asked (docs/lifecycle.md): `ssh` (default) by the engine
   * over SSH; `runner`, as with the GitHub dispatcher, by a read-only runner step per lane that
   * the local runner executes (the bundled action and the `inspect-lane` tool).
   */
  rollbackProbe?: "ssh" | "runner";
}

/** The demo's own trust: a generated key and the policy that allows only it. */
export interface DemoTrust {
  key: SigningKey;
  policy: TrustPolicy;
  /** The source repository the demo's provenance names. */
  repository: string;
}

/** How a health fault ends: at the lane's next run of another step run, or its very next run. */
export type HealthFaultUntil = "other_step_run" | "next_run";

/** What a failing lane's health URL answers in the demo (a model server explaining itself). */
export const DEMO_HEALTH_BODY = "model not loaded: CUDA OOM";

export interface Stack {
  engine: Engine;
  runner: LocalRunner;
  fleet: Fleet;
  /** Engine base URL (API and dashboard), e.g. http://127.0.0.1:40123. */
  url: string;
  operatorToken: string;
  callbackSecret: string;
  /** The recipe aimed at the fleet, and its compiled manifest (what the fleet was prepared for). */
  recipe: RecipeInput;
  manifest: Manifest;
  /**
   * Makes the health check of forward step `stepIndex` fail: when a run of that step run is
   * queued, its lane's health URL starts answering 503; it answers 200 again when a run of
   * another step run of the same lane is queued (`other_step_run`, so engine retries fail too;
   * e.g. the lane's restore) or when any next run of that lane is queued (`next_run`, e.g. a
   * re-run from the Actions UI). Other lanes' runs (a parallel wave's) leave the fault in
   * place: only that lane's health URL fails, so only its step runs see it. The failing answer's body is
   * `body` (default `DEMO_HEALTH_BODY`): deploy.sh keeps it, the step run's error names it.
   */
  failHealthAt(stepIndex: number, until?: HealthFaultUntil, body?: string): void;
  /**
   * The reference router as a traffic generator (docs/gate.md): it serves the model's units
   * over the control plane's weights, each lane labelled with the image it runs (told by the
   * runner's deploy and restore steps), and is what the gates read (embedded metrics source).
   */
  traffic: TrafficGenerator;
  /** Authorised fetch against the engine. */
  api(path: string, init?: RequestInit): Promise<Response>;
  /** The demo's trust (admission `sign`), else null. */
  trust: DemoTrust | null;
  /**
   * The JSON body that starts a release of `recipe` (default: the stack's recipe): with
   * admission `sign`, the recipe with its signed manifest and the image's provenance.
   */
  startBody(recipe?: RecipeInput): Promise<string>;
  close(): Promise<void>;
}

/** Environment the runner's steps need to reach the embedded target. */
export function runnerEnvFor(fleet: Fleet): Record<string, string> {
  return {
    BATON_DEPLOY_SCRIPT: fleet.deployScript,
    BATON_CONNECT_TIMEOUT_MS: "10000",
  };
}

/** Bundles the action and the tools when `dist/` is missing (a fresh clone before `npm run build`). */
export async function ensureBundles(): Promise<void> {
  const needed = [
    join(REPO_ROOT, "actions/release-step/dist/index.js"),
    join(REPO_ROOT, "scripts/release/dist/attach-queue-lane.mjs"),
  ];
  if (needed.every((f) => existsSync(f))) return;
  const build = (await import(join(REPO_ROOT, "scripts/build.mjs"))) as {
    buildAll(): Promise<string[]>;
  };
  await build.buildAll();
}

const quietLog: Logger = {
  info: () => {},
  warn: (m) => console.warn(m),
  error: (m, e) => console.error(m, e instanceof Error ? e.message : (e ?? "")),
};

/**
 * Listens for the engine on 127.0.0.1:`port` (0: any free port) with the engine's own server
 * limits (body limits answered before 100 Continue, timeouts).
 * @throws Error naming the port and the fix when it is in use or cannot be bound.
 */
async function listenEngine(port: number, fetch: ServedFetch): Promise<Server> {
  return new Promise<Server>((ok, fail) => {
    const s = serveWithLimits(
      { fetch, port, hostname: "127.0.0.1", limits: httpLimitsFromEnv() },
      () => ok(s as Server),
    );
    (s as Server).once("error", (e: NodeJS.ErrnoException) =>
      fail(
        new Error(
          e.code === "EADDRINUSE"
            ? `[demo] port ${port} on 127.0.0.1 is in use: choose another --port, or leave --port out to take a free one`
            : `[demo] cannot listen on 127.0.0.1:${port}: ${e.message}`,
        ),
      ),
    );
  });
}

/**
 * Starts fleet, runner and engine, and prepares the fleet for the recipe (baseline weights in
 * the control plane, previous image running on every lane). Does not start a release.
 * @throws Error (prefixed with its component) when a part cannot start; started parts are closed.
 */
export async function startStack(o: StackOptions): Promise<Stack> {
  const dir = resolve(o.dir);
  makeDirs(dir);
  await ensureBundles();
  const model = String(o.recipe.model ?? "default");
  const closers: (() => Promise<unknown>)[] = [];
  const closeAll = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  // The engine's HTTP server first (port 0 unless `port` fixes it), so that a port in use
  // fails before anything else starts, and so its URL can go into the runner's inputs.
  // The server's bindings go along with each request: the engine reads the client's address
  // from them (credential throttling is per address).
  let fetcher: ServedFetch | null = null;
  const server = await listenEngine(o.port ?? 0, (req, env) =>
    fetcher ? fetcher(req, env) : new Response("starting", { status: 503 }),
  );
  closers.push(
    () =>
      new Promise<void>((ok) => {
        server.closeAllConnections();
        server.close(() => ok());
      }),
  );
  let fleet: Fleet;
  try {
    fleet = await startFleet({
      dir,
      laneIds: laneIdsOf(o.recipe),
      model,
      ...(o.healthTimeoutS === undefined ? {} : { healthTimeoutS: o.healthTimeoutS }),
      ...(o.modelLoadMs === undefined ? {} : { modelLoadMs: o.modelLoadMs }),
    });
  } catch (e) {
    await closeAll();
    throw e;
  }
  closers.push(() => fleet.close());
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const callbackSecret = randomBytes(24).toString("hex");
    const operatorToken = randomBytes(24).toString("hex");

    const traffic = new TrafficGenerator(fleet.cp.core, { model, seed: 42 });
    closers.push(async () => traffic.stop());
    // The router and the control plane learn which image a lane serves from the runner steps
    // that change it.
    const laneImage = (e: LocalRunEvent) => {
      const changed = laneImageChange(e);
      if (!changed) return;
      traffic.setLaneImage(changed.lane, changed.image);
      // The lane reports the image it now runs to the control plane (LaneState.image), as a
      // fleet's lane registration would after a deploy or a restore.
      try {
        fleet.cp.core.reportImage(changed.lane, changed.image);
      } catch {
        // A lane the control plane does not know: nothing to report to.
      }
    };
    let fault: { stepIndex: number; until: HealthFaultUntil; lane: string; body: string } | null =
      null;
    let active: { stepRunId: string; until: HealthFaultUntil; lane: string } | null = null;
    let manifest: Manifest | null = null;
    // The lane a run's step acts on (its payload's `args.lane.id`), or null (no lane).
    const laneOfRun = (run: LocalRunEvent["run"]): string | null => {
      const lane = (run.payload.args as { lane?: { id?: unknown } } | undefined)?.lane?.id;
      return typeof lane === "string" ? lane : null;
    };
    const onEvent = (e: LocalRunEvent) => {
      if (e.type === "queued") {
        const m = /^sr_\d+_(\d+)_f$/.exec(e.run.stepRunId);
        // Only a run of the faulted lane ends the fault: in a parallel wave, other lanes' step
        // runs are queued while the faulted one is still in flight (its health check not yet
        // made), and clearing then let the faulted step succeed.
        if (active && laneOfRun(e.run) === active.lane) {
          const same = e.run.stepRunId === active.stepRunId;
          if (active.until === "next_run" || !same) {
            fleet.clearFailHealth();
            active = null;
          }
        }
        if (fault && m && Number(m[1]) === fault.stepIndex) {
          fleet.failHealthOf(fault.lane, fault.body);
          active = { stepRunId: e.run.stepRunId, until: fault.until, lane: fault.lane };
          fault = null;
        }
      }
      laneImage(e);
      o.onRunEvent?.(e);
    };
    const runner = new LocalRunner({
      repoRoot: REPO_ROOT,
      workDir: join(dir, "runner"),
      inputs: {
        "engine-url": url,
        "callback-secret": callbackSecret,
        "ssh-key": fleet.target.clientPrivateKey,
      },
      env: { ...runnerEnvFor(fleet), ...o.runnerEnv },
      runTimeoutMs: 120_000,
      ...(o.maxConcurrentRuns === undefined ? {} : { maxConcurrentRuns: o.maxConcurrentRuns }),
      onEvent,
    });
    closers.push(() => runner.close());

    const recipe = pointRecipeAtFleet(
      o.recipe,
      fleet.target,
      fleet.lanes,
      runner.commitSha,
      o.deadlines,
    );
    manifest = compileRecipeInput(recipe).manifest;
    await fleet.prepare(manifest);
    for (const l of manifest.lanes) traffic.setLaneImage(l.id, manifest.previous_image);
    traffic.setCandidate(manifest.image);
    // A shadow phase: the router mirrors to the lanes the recipe declares shadow-safe while they
    // serve the candidate at weight 0 (so only during that phase), within the phase's caps.
    const shadowWave = manifest.waves.find((w) => w.shadow);
    if (shadowWave?.shadow)
      traffic.setShadow({
        caps: shadowWave.shadow,
        safe: new Set(manifest.lanes.filter((l) => l.shadow_env).map((l) => l.id)),
      });
    if (o.candidateProfile) traffic.setProfile(manifest.image, o.candidateProfile);

    const trust = o.admission === "sign" ? demoTrust(dir) : null;
    const config: EngineConfig = {
      databaseUrl: o.databaseUrl ?? null,
      dataDir: join(dir, "engine"),
      port: Number(new URL(url).port),
      publicUrl: url,
      callbackSecrets: [callbackSecret],
      operatorToken,
      viewerToken: null,
      controlPlaneUrl: fleet.cp.url,
      controlPlaneToken: fleet.cp.writeToken,
      dispatcher: "local",
      githubRepository: null,
      githubToken: null,
      githubApp: null,
      tickMs: o.tickMs ?? 200,
      sshKey: fleet.target.clientPrivateKey,
      admission: trust ? { mode: "enforce", policy: trust.policy } : { mode: "off" },
      ...(o.driftIntervalMs ? { driftIntervalMs: o.driftIntervalMs } : {}),
    };
    const engine = await createEngine(config, {
      dispatcher: runner,
      controlPlane: fleet.controlPlane,
      log: o.log ?? quietLog,
      reconciler: { leaseMs: 5_000 },
      metrics: new EmbeddedMetricsSource(traffic),
      // Rollback prerequisites are asked of the embedded target as of any machine: over SSH.
      ...(o.rollbackProbe === "runner"
        ? { runnerProbe: true }
        : {
            targetProbe: new SshTargetProbe({
              privateKey: fleet.target.clientPrivateKey,
              deployScript: fleet.deployScript,
            }),
          }),
      ...(o.clock ? { clock: o.clock } : {}),
    });
    closers.push(() => engine.close());
    fetcher = engine.app.fetch;
    engine.startTicking();

    const m = manifest;
    return {
      engine,
      runner,
      fleet,
      url,
      operatorToken,
      callbackSecret,
      recipe,
      manifest: m,
      traffic,
      failHealthAt(stepIndex, until = "other_step_run", body = DEMO_HEALTH_BODY) {
        const step = m.steps[stepIndex];
        if (step?.kind !== "runner" || !step.lane) {
          throw new Error(
            `[demo] step ${stepIndex} is not a runner step of a lane; only those have a health check`,
          );
        }
        fault = { stepIndex, until, lane: step.lane, body };
      },
      api(path, init = {}) {
        const headers = new Headers(init.headers);
        if (!headers.has("authorization")) headers.set("authorization", `Bearer ${operatorToken}`);
        return fetch(`${url}${path}`, { ...init, headers });
      },
      trust,
      async startBody(r = recipe) {
        if (!trust) return JSON.stringify(r);
        const c = compileRecipeInput(r);
        const bundle = await signManifest(c, { key: trust.key });
        const provenance = await signWithKey(
          provenanceStatement(c.manifest.image, {
            builder: GITHUB_HOSTED_BUILDER,
            repository: trust.repository,
          }),
          trust.key,
        );
        return JSON.stringify({ recipe: r, bundle, attestations: [provenance] });
      },
      close: closeAll,
    };
  } catch (e) {
    await closeAll();
    throw e;
  }
}

/**
 * The demo's ECDSA key and a trust policy allowing only it, for manifests and image
 * provenance (built by GitHub-hosted runners from the demo's repository). Generated at the
 * first start in `dir` and kept in `<dir>/trust` (`demo-key.pem` 0600, `demo-key.id`,
 * `demo-key.pub`): a second start on the same data dir signs with the same key, so releases
 * admitted before (and rollbacks to their manifests) still verify.
 */
export function demoTrust(dir: string): DemoTrust {
  const repository = "https://github.com/baton-demo/models";
  const trustDir = join(dir, "trust");
  mkdirSync(trustDir, { recursive: true });
  const pemFile = join(trustDir, "demo-key.pem");
  const idFile = join(trustDir, "demo-key.id");
  let pair: { private_key_pem: string; public_key_pem: string };
  let keyId: string;
  if (existsSync(pemFile) && existsSync(idFile)) {
    const privateKeyPem = readFileSync(pemFile, "utf8");
    pair = {
      private_key_pem: privateKeyPem,
      public_key_pem: createPublicKey(privateKeyPem)
        .export({ type: "spki", format: "pem" })
        .toString(),
    };
    keyId = readFileSync(idFile, "utf8").trim();
  } else {
    pair = generateSigningKey();
    keyId = `demo-${randomBytes(4).toString("hex")}`;
    writeFileSync(pemFile, pair.private_key_pem, { mode: 0o600 });
    writeFileSync(idFile, `${keyId}\n`);
  }
  writeFileSync(join(trustDir, "demo-key.pub"), pair.public_key_pem);
  const policy = parseTrustPolicy(
    {
      version: 1,
      manifest: { signers: { keys: [{ key_id: keyId, public_key_file: "demo-key.pub" }] } },
      images: {
        provenance: "required",
        builders: [GITHUB_HOSTED_BUILDER],
        source_repositories: [repository],
      },
    },
    trustDir,
  );
  return { key: { key_id: keyId, private_key_pem: pair.private_key_pem }, policy, repository };
}

/** Reads the example recipe (or `file`). */
export function loadRecipe(file = EXAMPLE_RECIPE): RecipeInput {
  return readRecipeFile(file);
}
