/**
 * One world of the crash harness: the example release on real parts, with the engine as a
 * separate process (SQLite file, or Postgres) that the harness SIGKILLs and restarts:
 * - the fleet of the demo (reference control plane on its own SQLite file, embedded SSH target
 *   with deploy.sh and the container stand-in), in this process;
 * - the GitHub stand-in; each accepted dispatch is handed to the local runner, which runs the
 *   bundled release-step action in this process's children, so runs outlive engine crashes as
 *   GitHub's runners do;
 * - the engine (`test/support/chaos-engine.ts`) on a fixed port, restartable on the same store.
 * `evidence()` gathers what the checks need once the release ended.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type LocalRunEvent, LocalRunner } from "../../engine/src/adapters/local-runner/index.ts";
import { openStore } from "../../engine/src/adapters/store-factory.ts";
import type { ChangeRecord, LedgerEntry } from "../../engine/src/control-plane/model.ts";
import { type Fleet, REPO_ROOT, startFleet } from "../../engine/src/demo/fleet.ts";
import { laneIdsOf, pointRecipeAtFleet } from "../../engine/src/demo/recipe.ts";
import { ensureBundles, loadRecipe, runnerEnvFor } from "../../engine/src/demo/stack.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { HistoryEntry, Manifest, Release } from "../../engine/src/domain/types.ts";
import type { AttemptResult, OutboxRow } from "../../engine/src/ports/store.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { type EngineProcess, spawnEngine } from "./chaos-process.ts";
import { type ChaosProxy, startChaosProxy } from "./chaos-proxy.ts";
import { type GitHubStandin, startGitHubStandin } from "./github-standin.ts";
import { proposePort } from "./ports.ts";

export interface CrashWorldOptions {
  dir: string;
  /** Forward runner step whose lane's health check fails (all its tries): compensation runs. */
  failAt?: number | null;
  /** Postgres URL for the engine; default a SQLite file under `dir`. */
  databaseUrl?: string | null;
  recipe?: RecipeInput;
  /** Put a `ChaosProxy` between the runners and the engine (it becomes the engine's public URL). */
  proxy?: boolean;
  /** Extra environment for the action and tools (e.g. `BATON_HTTP_ATTEMPTS`). */
  runnerEnv?: Record<string, string>;
}

/** A stand-in `docker` call as the target recorded it (`standin/calls.jsonl`). */
export interface DockerCall {
  at: number;
  argv: string[];
  exit?: number;
}

/** One line of deploy.sh's ledger: operation key, subcommand, phase, recorded JSON line. */
export interface DeployLedgerLine {
  key: string;
  sub: string;
  phase: string;
  line: string;
}

/** Everything the checks read after a release ended. */
export interface Evidence {
  release: Release;
  history: HistoryEntry[];
  attemptResults: AttemptResult[];
  pendingOutbox: OutboxRow[];
  cpHistory: ChangeRecord[];
  cpLedger: LedgerEntry[];
  deployLedger: DeployLedgerLine[];
  dockerCalls: DockerCall[];
  /** Dispatches GitHub (the stand-in) answered 204 to, as (step run, dispatch seq). */
  dispatches: { step_run_id: string; dispatch: number }[];
}

export interface CrashWorld {
  dir: string;
  fleet: Fleet;
  github: GitHubStandin;
  runner: LocalRunner;
  manifest: Manifest;
  recipe: RecipeInput;
  url: string;
  operatorToken: string;
  /** The proxy runners reach the engine through, when asked for. */
  proxy: ChaosProxy | null;
  /** Environment of the engine process (plus `extra`, e.g. BATON_FAULT). */
  engineEnv(extra?: Record<string, string>): Record<string, string>;
  startEngine(extra?: Record<string, string>): Promise<EngineProcess>;
  api(path: string, init?: RequestInit): Promise<Response>;
  startRelease(): Promise<string>;
  /** The release as the engine answers, or null when it does not answer (down, restarting). */
  readRelease(id: string): Promise<Release | null>;
  /** Reads the store and the fleet (the engine must be stopped for SQLite consistency). */
  evidence(id: string): Promise<Evidence>;
  close(): Promise<void>;
}

const REPOSITORY = "acme/models";

/** Builds a world and prepares the fleet for the (example) recipe. Does not start an engine. */
export async function startCrashWorld(o: CrashWorldOptions): Promise<CrashWorld> {
  await ensureBundles();
  const dir = o.dir;
  mkdirSync(dir, { recursive: true });
  const source = o.recipe ?? loadRecipe();
  const fleet = await startFleet({
    dir,
    laneIds: laneIdsOf(source),
    model: String(source.model),
    // Generous enough for a loaded CI machine: a spurious health failure would compensate.
    healthTimeoutS: 3,
  });
  const closers: (() => Promise<unknown>)[] = [() => fleet.close()];
  const closeAll = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    // The engine's address is fixed for the world (runs call back to it across restarts):
    // each start waits out a process that holds the port (spawnEngine).
    const port = await proposePort();
    const url = `http://127.0.0.1:${port}`;
    const proxy = o.proxy ? await startChaosProxy(url) : null;
    if (proxy) closers.push(() => proxy.close());
    const runnerUrl = proxy?.url ?? url;
    const token = `ghp_${randomBytes(18).toString("hex")}`;
    const callbackSecret = randomBytes(24).toString("hex");
    const operatorToken = randomBytes(24).toString("hex");

    // The health fault of `failAt`: its lane answers 503 from the moment a run of that step run
    // is queued until a run of another step run is queued (so engine retries fail too).
    let failing: string | null = null;
    const failStep = o.failAt ?? null;
    const onEvent = (e: LocalRunEvent) => {
      if (e.type !== "queued") return;
      const id = e.run.stepRunId;
      if (failing && id !== failing) {
        fleet.clearFailHealth();
        failing = null;
      }
      const m = /^sr_\d+_(\d+)_f$/.exec(id);
      if (failStep !== null && m && Number(m[1]) === failStep && !failing) {
        const lane = manifest.steps[failStep]?.lane;
        if (lane) {
          fleet.failHealthOf(lane);
          failing = id;
        }
      }
    };
    const runner = new LocalRunner({
      repoRoot: REPO_ROOT,
      workDir: join(dir, "runner"),
      inputs: {
        "engine-url": runnerUrl,
        "callback-secret": callbackSecret,
        "ssh-key": fleet.target.clientPrivateKey,
      },
      // A run's preflight and callback must outlive an engine restart: a restart costs about
      // 2 s of CPU (importing the engine), over 25 s of wall time on a machine loaded 20 deep,
      // and a run that gives up before the engine is back leaves its step run waiting for
      // the start deadline (10 min). 40 tries, 4 s apart at most, are about 150 s.
      // The SSH handshake with the embedded target is JavaScript crypto in this process, which
      // hosts every world of a scenario: at load 38 it took over the demo's 10 s (a connect
      // check failed, the release paused for a re-run). 60 s bounds it on a starved machine;
      // an unreachable target still fails the step.
      env: {
        ...runnerEnvFor(fleet),
        BATON_HTTP_ATTEMPTS: "40",
        BATON_HTTP_BUDGET_MS: "180000",
        BATON_CONNECT_TIMEOUT_MS: "60000",
        ...o.runnerEnv,
      },
      runTimeoutMs: 120_000,
      maxConcurrentRuns: 4,
      onEvent,
    });
    closers.push(() => runner.close());
    const github = await startGitHubStandin({
      rateLimits: { perMinute: 100_000, perHour: 1_000_000, maxConcurrent: 100 },
      repository: REPOSITORY,
      tokens: [token],
      onAccepted: (d) => {
        void runner.dispatch(d.client_payload as never);
      },
    });
    closers.push(() => github.close());

    const pointed = pointRecipeAtFleet(source, fleet.target, fleet.lanes, runner.commitSha);
    // A failing step compensates at once (no re-run window), so the crash scenarios also
    // exercise compensation (docs/state-machine.md "Re-run window").
    const recipe: RecipeInput =
      failStep === null
        ? pointed
        : { ...pointed, policy: { ...(pointed.policy ?? {}), rerun_window_minutes: 0 } };
    const manifest = compileRecipeInput(recipe).manifest;
    if (failStep !== null && manifest.steps[failStep]?.kind !== "runner") {
      throw new Error(
        `failAt ${failStep} is not a runner step of the recipe (it is ${manifest.steps[failStep]?.name ?? "missing"}); a health fault only fails runner steps`,
      );
    }
    await fleet.prepare(manifest);

    const engineDir = join(dir, "engine");
    mkdirSync(engineDir, { recursive: true });
    const engineEnv = (extra: Record<string, string> = {}) => ({
      BATON_CALLBACK_SECRETS: callbackSecret,
      BATON_OPERATOR_TOKEN: operatorToken,
      BATON_ADMISSION: "off",
      BATON_CONTROL_PLANE_URL: fleet.cp.url,
      BATON_CONTROL_PLANE_TOKEN: fleet.cp.writeToken,
      GITHUB_REPOSITORY: REPOSITORY,
      GITHUB_TOKEN: token,
      // These scenarios test crashes and contention, not GitHub's rate limits
      // (test/integration/github-pacing.test.ts does): lift the budgets on both sides.
      BATON_GITHUB_DISPATCH_PER_MINUTE: "100000",
      BATON_GITHUB_DISPATCH_PER_HOUR: "1000000",
      CHAOS_GITHUB_API_URL: github.baseUrl,
      CHAOS_LEASE_MS: "1500",
      BATON_TICK_MS: "100",
      ...(proxy ? { BATON_PUBLIC_URL: proxy.url } : {}),
      ...(o.databaseUrl ? { DATABASE_URL: o.databaseUrl } : { BATON_DATA_DIR: engineDir }),
      ...extra,
    });
    const procs: EngineProcess[] = [];
    closers.push(async () => {
      for (const p of procs) await p.kill();
    });
    const api = (path: string, init: RequestInit = {}) => {
      const headers = new Headers(init.headers);
      if (!headers.has("authorization")) headers.set("authorization", `Bearer ${operatorToken}`);
      return fetch(`${url}${path}`, { ...init, headers, signal: AbortSignal.timeout(5_000) });
    };

    return {
      dir,
      fleet,
      github,
      runner,
      manifest,
      recipe,
      url,
      operatorToken,
      proxy,
      engineEnv,
      async startEngine(extra = {}) {
        const p = await spawnEngine(port, engineEnv(extra));
        procs.push(p);
        return p;
      },
      api,
      async startRelease() {
        const res = await api("/v1/releases", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(recipe),
        });
        const body = (await res.json()) as { id?: string };
        if (res.status !== 201 || !body.id)
          throw new Error(`[chaos] POST /v1/releases: HTTP ${res.status} ${JSON.stringify(body)}`);
        return body.id;
      },
      async readRelease(id) {
        try {
          const res = await api(`/v1/releases/${id}`);
          if (res.status !== 200) return null;
          return (await res.json()) as Release;
        } catch {
          return null;
        }
      },
      async evidence(id) {
        const store = await openStore(
          o.databaseUrl
            ? { databaseUrl: o.databaseUrl, dataDir: engineDir }
            : { dataDir: engineDir },
        );
        try {
          const release = await store.getRelease(id);
          if (!release) throw new Error(`[chaos] release ${id} is not in the store`);
          return {
            release,
            history: await store.getHistory(id, { limit: 100_000 }),
            attemptResults: await store.listAttemptResults(id),
            pendingOutbox: await store.pendingOutbox(id),
            cpHistory: fleet.cp.core.history({}),
            cpLedger: fleet.cp.core.ledger({ limit: 100_000 }),
            deployLedger: readDeployLedger(join(dir, "target", "ledger")),
            dockerCalls: readJsonLines<DockerCall>(join(dir, "target", "standin", "calls.jsonl")),
            dispatches: github.accepted.map((d) => {
              const p = d.client_payload as { step_run_id: string; release: { dispatch: number } };
              return { step_run_id: p.step_run_id, dispatch: p.release.dispatch };
            }),
          };
        } finally {
          await store.close();
        }
      },
      close: closeAll,
    };
  } catch (e) {
    await closeAll();
    throw e;
  }
}

function readJsonLines<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  const out: T[] = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      // a torn last line (a killed writer) is not evidence of anything
    }
  }
  return out;
}

function readDeployLedger(file: string): DeployLedgerLine[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => {
      const [key = "", sub = "", phase = "", ...rest] = l.split("\t");
      return { key, sub, phase, line: rest.join("\t") };
    });
}
