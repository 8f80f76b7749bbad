/**
 * E2E harness: everything one test needs, on real parts — the engine (SQLite in a temp dir, or
 * a fresh Postgres database on BATON_TEST_DATABASE_URL), the reference control plane (its own
 * SQLite file), the embedded SSH target (deploy.sh, container stand-in) and the local runner
 * running the bundled release-step action. Two modes:
 * - `startInProcess`: the demo's stack (engine in this process, HTTP on 127.0.0.1);
 * - `startSplit`: the engine as a separate process (engine/src/demo/engine-process.ts) that a
 *   test can SIGKILL and restart on the same store, while the control plane and the target keep
 *   running in the test process.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterEach, describe, expect } from "vitest";
import { headSha, type LocalRunner } from "../../engine/src/adapters/local-runner/index.ts";
import { startRouterProxy } from "../../engine/src/control-plane/router-proxy.ts";
import { type Fleet, REPO_ROOT, startFleet } from "../../engine/src/demo/fleet.ts";
import { stepLabel } from "../../engine/src/demo/progress.ts";
import { laneIdsOf, pointRecipeAtFleet } from "../../engine/src/demo/recipe.ts";
import {
  ensureBundles,
  loadRecipe,
  runnerEnvFor,
  type Stack,
  type StackOptions,
  startStack,
} from "../../engine/src/demo/stack.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { HistoryEntry, Manifest, StepRun } from "../../engine/src/domain/types.ts";
import type { AttemptResult } from "../../engine/src/ports/store.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { shQuote } from "../../scripts/lib/shell-quote.ts";
import { connect } from "../../scripts/lib/ssh.ts";
import { bundledNodeArgs } from "./bundles.ts";
import { onFreshPort, PortTaken, saysPortTaken } from "./ports.ts";

export type StoreKind = "sqlite" | "postgres";
export const PG_URL = process.env.BATON_TEST_DATABASE_URL;

/** `GET /v1/releases/:id` as the tests read it. */
export interface RecordJson {
  id: string;
  state: string;
  generation: number;
  high_water_mark: number;
  reason: string | null;
  step_runs: StepRun[];
  history: HistoryEntry[];
  attempt_results: AttemptResult[];
  manifest: Manifest;
}

/**
 * A describe block per store. Postgres without BATON_TEST_DATABASE_URL is skipped with a
 * message, except under CI=true where a missing database is a failure.
 */
export function describeStore(kind: StoreKind, name: string, fn: () => void): void {
  if (kind === "postgres" && !PG_URL) {
    if (process.env.CI === "true") {
      describe(name, () => {
        throw new Error(
          "[e2e] BATON_TEST_DATABASE_URL is not set under CI=true; .ci/run starts Postgres and exports it",
        );
      });
      return;
    }
    console.warn(
      `[e2e] skipping "${name}" on Postgres: set BATON_TEST_DATABASE_URL=postgres://… (scripts/ci/pg-start.sh starts one)`,
    );
    describe.skip(name, fn);
    return;
  }
  describe(name, fn);
}

let dbSeq = 0;

/** A fresh database on the test server; `drop()` removes it (connections forced out). */
export async function freshDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  if (!PG_URL) throw new Error("[e2e] BATON_TEST_DATABASE_URL is not set");
  const name = `baton_e2e_${process.pid}_${Date.now() % 1e7}_${dbSeq++}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(PG_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** Polls `read` until `done` holds; throws with `describe(last)` after `timeoutMs`. */
export async function waitUntil<T>(
  read: () => Promise<T>,
  done: (v: T) => boolean,
  what: string,
  timeoutMs = 90_000,
  describeLast: (v: T) => string = (v) => JSON.stringify(v).slice(0, 500),
): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: T | undefined;
  for (let i = 0; Date.now() < until && i < 10_000; i++) {
    try {
      last = await read();
      if (done(last)) return last;
    } catch {
      // the engine may be restarting; read again
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(
    `[e2e] timed out after ${timeoutMs} ms waiting for ${what}; last: ${last === undefined ? "(no answer)" : describeLast(last)}`,
  );
}

/**
 * "Re-run jobs" on step run `srId`'s latest run once that run has completed: a release pauses on
 * the failed callback while the run's post step may still be running, and a run that has not
 * completed cannot be re-run (as on GitHub).
 */
export async function rerunWhenCompleted(
  runner: LocalRunner,
  srId: string,
  by?: string,
  timeoutMs = 120_000,
): Promise<{ runId: string; attempt: number }> {
  const runs = await waitUntil(
    async () => runner.runsOf(srId),
    (rs) => rs.length > 0 && rs.at(-1)!.state === "completed",
    `the latest run of ${srId} to complete`,
    timeoutMs,
  );
  return runner.rerun(runs.at(-1)!.runId, by);
}

/** One line per step run, for failure messages. */
export function summarize(r: RecordJson): string {
  return `${r.id} ${r.state} (${r.reason ?? ""}) ${r.step_runs.map((s) => `${s.id}=${s.state}`).join(" ")}`;
}

/** What both modes offer the tests. */
export interface E2EBase {
  kind: StoreKind;
  dir: string;
  fleet: Fleet;
  manifest: Manifest;
  recipe: RecipeInput;
  operatorToken: string;
  callbackSecret: string;
  url(): string;
  /** Authorised (operator) request to the engine. */
  api(path: string, init?: RequestInit): Promise<Response>;
  /** POSTs the fleet-aimed recipe; returns the release id. */
  startRelease(opts?: { hold?: boolean }): Promise<string>;
  record(id: string): Promise<RecordJson>;
  waitFor(
    id: string,
    done: (r: RecordJson) => boolean,
    what: string,
    timeoutMs?: number,
  ): Promise<RecordJson>;
  close(): Promise<void>;
}

function baseApi(get: () => { url: string; token: string }) {
  const api = (path: string, init: RequestInit = {}) => {
    const { url, token } = get();
    const headers = new Headers(init.headers);
    if (!headers.has("authorization")) headers.set("authorization", `Bearer ${token}`);
    return fetch(`${url}${path}`, { ...init, headers });
  };
  const record = async (id: string) => {
    const res = await api(`/v1/releases/${id}`);
    if (res.status !== 200) throw new Error(`[e2e] GET /v1/releases/${id}: HTTP ${res.status}`);
    return (await res.json()) as RecordJson;
  };
  return {
    api,
    record,
    waitFor: (id: string, done: (r: RecordJson) => boolean, what: string, timeoutMs = 120_000) =>
      waitUntil(() => record(id), done, what, timeoutMs, summarize),
  };
}

/** POSTs `recipe` to start a release (`hold`: created but not started); returns its id. */
export function postRecipe(
  api: (p: string, i?: RequestInit) => Promise<Response>,
  recipe: RecipeInput,
  hold = false,
): Promise<string> {
  return postStartBody(api, JSON.stringify(recipe), hold);
}

/**
 * POSTs a start body (a recipe, or `{"recipe", "bundle", "attestations"}` as `Stack.startBody`
 * signs it) to start a release (`hold`: created but not started); returns its id.
 * @throws Error naming the status and the answer unless 201.
 */
export async function postStartBody(
  api: (p: string, i?: RequestInit) => Promise<Response>,
  body: string,
  hold = false,
): Promise<string> {
  const res = await api(`/v1/releases${hold ? "?start=false" : ""}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  const answer = (await res.json()) as { id?: string };
  if (res.status !== 201 || !answer.id) {
    throw new Error(`[e2e] POST /v1/releases: HTTP ${res.status} ${JSON.stringify(answer)}`);
  }
  return answer.id;
}

export interface InProcessOptions {
  recipe?: RecipeInput;
  deadlines?: StackOptions["deadlines"];
  /** The engine's clock (default: the wall clock). */
  clock?: StackOptions["clock"];
  /** Seconds deploy.sh waits for a lane's health URL (default 2; more lanes start slower under load). */
  healthTimeoutS?: number;
  /**
   * `sign`: the engine enforces the demo's trust policy and `startRelease` sends the recipe
   * signed (`Stack.startBody`); default `off`.
   */
  admission?: StackOptions["admission"];
  /** How rollback prerequisites are asked (default `ssh`: by the engine). */
  rollbackProbe?: StackOptions["rollbackProbe"];
}

export interface InProcess extends E2EBase {
  stack: Stack;
}

/** The engine in this process (the demo's stack). */
export async function startInProcess(
  kind: StoreKind,
  o: InProcessOptions = {},
): Promise<InProcess> {
  const dir = mkdtempSync(join(tmpdir(), `baton-e2e-${kind}-`));
  const db = kind === "postgres" ? await freshDatabase() : null;
  let stack: Stack;
  try {
    stack = await startStack({
      dir,
      databaseUrl: db?.url ?? null,
      recipe: o.recipe ?? loadRecipe(),
      tickMs: 100,
      ...(o.deadlines ? { deadlines: o.deadlines } : {}),
      ...(o.clock ? { clock: o.clock } : {}),
      ...(o.healthTimeoutS === undefined ? {} : { healthTimeoutS: o.healthTimeoutS }),
      ...(o.admission ? { admission: o.admission } : {}),
      ...(o.rollbackProbe ? { rollbackProbe: o.rollbackProbe } : {}),
      log: { info: () => {}, warn: () => {}, error: (m) => console.error(m) },
    });
  } catch (e) {
    await db?.drop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const s = stack;
  const base = baseApi(() => ({ url: s.url, token: s.operatorToken }));
  return {
    kind,
    dir,
    stack: s,
    fleet: s.fleet,
    manifest: s.manifest,
    recipe: s.recipe,
    operatorToken: s.operatorToken,
    callbackSecret: s.callbackSecret,
    url: () => s.url,
    ...base,
    startRelease: async (opts = {}) => postStartBody(base.api, await s.startBody(), opts.hold),
    async close() {
      await s.close();
      await db?.drop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Runs `n` reconciler passes of the in-process engine, each awaited (what `n` ticks of its
 * interval do): "nothing moves while held" is then checked over rounds that happened, not over
 * a wait that may or may not have seen any.
 */
export async function reconcilerRounds(e: InProcess, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await e.stack.engine.tick();
}

/** A running engine process. */
export interface EngineProc {
  child: ChildProcess;
  /** stdout + stderr so far. */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface Split extends E2EBase {
  /** Starts the engine process (again) on the same store; resolves once it listens. */
  startEngine(env?: Record<string, string>): Promise<EngineProc>;
  /** The current engine process, if any. */
  engine(): EngineProc | null;
  /** SIGKILLs the current engine process and waits for it to die. */
  killEngine(): Promise<void>;
}

/** The engine as a separate process; the fleet stays in this process across engine restarts. */
export async function startSplit(
  kind: StoreKind,
  o: { recipe?: RecipeInput } = {},
): Promise<Split> {
  await ensureBundles();
  const dir = mkdtempSync(join(tmpdir(), `baton-e2e-split-${kind}-`));
  const db = kind === "postgres" ? await freshDatabase() : null;
  const source = o.recipe ?? loadRecipe();
  const fleet = await startFleet({ dir, laneIds: laneIdsOf(source), model: String(source.model) });
  const recipe = pointRecipeAtFleet(source, fleet.target, fleet.lanes, headSha(REPO_ROOT));
  const manifest = compileRecipeInput(recipe).manifest;
  await fleet.prepare(manifest);
  // The engine's port, proposed at its first start (ports.ts) and kept across restarts.
  let port = 0;
  let url = "";
  const operatorToken = randomBytes(24).toString("hex");
  const callbackSecret = randomBytes(24).toString("hex");
  const keyFile = join(dir, "runner-ssh-key");
  writeFileSync(keyFile, fleet.target.clientPrivateKey, { mode: 0o600 });
  mkdirSync(join(dir, "engine"), { recursive: true });
  let current: EngineProc | null = null;
  const all: EngineProc[] = [];

  /** Starts an engine process on `port`. @throws PortTaken when another process holds it. */
  const launch = async (extra: Record<string, string>): Promise<EngineProc> => {
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: process.env.HOME ?? dir,
      PORT: String(port),
      BATON_PUBLIC_URL: url,
      BATON_CALLBACK_SECRETS: callbackSecret,
      BATON_OPERATOR_TOKEN: operatorToken,
      BATON_ADMISSION: "off",
      BATON_CONTROL_PLANE_URL: fleet.cp.url,
      BATON_CONTROL_PLANE_TOKEN: fleet.cp.writeToken,
      BATON_DISPATCHER: "local",
      BATON_TICK_MS: "100",
      BATON_LEASE_MS: "1500",
      BATON_LOCAL_SSH_KEY_FILE: keyFile,
      BATON_LOCAL_WORK_DIR: join(dir, "runner"),
      BATON_LOCAL_RUNNER_ENV: JSON.stringify(runnerEnvFor(fleet)),
      ...(db ? { DATABASE_URL: db.url } : { BATON_DATA_DIR: join(dir, "engine") }),
      ...extra,
    };
    // The engine process's bundle (test/support/bundles.ts), started through its export.
    const args = await bundledNodeArgs("engine/src/demo/engine-process.ts", {
      call: "startEngineProcess",
    });
    const child = spawn(process.execPath, args, {
      cwd: REPO_ROOT,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let listening = false;
    const keep = (d: Buffer) => {
      out += d.toString();
      listening ||= out.includes("[engine] listening on");
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((ok) =>
      child.once("exit", (code, signal) => ok({ code, signal })),
    );
    const proc: EngineProc = { child, output: () => out, exited };
    current = proc;
    all.push(proc);
    let gone = false;
    void exited.then(() => {
      gone = true;
    });
    await waitUntil(
      async () => {
        if (gone) throw new Error("exited");
        // Only once this process said it listens is the answer its own.
        return listening ? (await fetch(`${url}/healthz`)).status : 0;
      },
      (s) => s === 200 || gone,
      "the engine process to listen",
      30_000,
    );
    if (gone) {
      await exited;
      if (saysPortTaken(out)) throw new PortTaken(port, out.slice(-400));
      throw new Error(`[e2e] the engine process exited at start:\n${out}`);
    }
    return proc;
  };
  const startEngine = async (extra: Record<string, string> = {}): Promise<EngineProc> => {
    if (port === 0) {
      return onFreshPort("the engine process", (p) => {
        port = p;
        url = `http://127.0.0.1:${p}`;
        return launch(extra);
      });
    }
    // A restart keeps the address the runs call back to; another process holding it meanwhile
    // is waited out, bounded.
    const until = Date.now() + 30_000;
    for (;;) {
      try {
        return await launch(extra);
      } catch (e) {
        if (!(e instanceof PortTaken) || Date.now() > until) throw e;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  };

  const base = baseApi(() => ({ url, token: operatorToken }));
  return {
    kind,
    dir,
    fleet,
    manifest,
    recipe,
    operatorToken,
    callbackSecret,
    url: () => url,
    ...base,
    startRelease: (opts = {}) => postRecipe(base.api, recipe, opts.hold),
    startEngine,
    engine: () => current,
    async killEngine() {
      const p = current;
      if (!p) return;
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
      await p.exited;
      current = null;
    },
    async close() {
      for (const p of all) {
        // Graceful first (the engine closes its runner and store), then SIGKILL after 10 s.
        if (p.child.exitCode === null && p.child.signalCode === null) {
          p.child.kill("SIGTERM");
          const t = setTimeout(() => p.child.kill("SIGKILL"), 10_000);
          await p.exited;
          clearTimeout(t);
        }
      }
      await fleet.close();
      await db?.drop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * One describe block per store, titled `title(kind)`, for tests on the in-process stack: `fn`
 * gets `start(options)`, which starts the stack on that store (`startInProcess`), and the store.
 * The stack a test started is closed after it (the router's traffic stopped first).
 */
export function describeInProcess(
  title: (kind: StoreKind) => string,
  fn: (start: (o?: InProcessOptions) => Promise<InProcess>, kind: StoreKind) => void,
): void {
  for (const kind of ["sqlite", "postgres"] as StoreKind[]) {
    describeStore(kind, title(kind), () => {
      let env: InProcess | null = null;
      afterEach(async () => {
        env?.stack.traffic.stop();
        await env?.close();
        env = null;
      });
      fn(async (o) => {
        env = await startInProcess(kind, o);
        return env;
      }, kind);
    });
  }
}

/** The engine's JSON answer to an operator `GET path`, as `T` (no status check). */
export async function readJson<T>(e: E2EBase, path: string): Promise<T> {
  return (await (await e.api(path)).json()) as T;
}

/** Past running, paused and pending: the release has ended (or is compensating). */
export function ended(r: { state: string }): boolean {
  return !["running", "paused", "pending"].includes(r.state);
}

/** Paused with every step run settled and its reason naming promote: waiting for `promote`. */
export function waitsForPromote(r: RecordJson): boolean {
  return r.state === "paused" && settled(r) && Boolean(r.reason?.includes("promot"));
}

/**
 * Runs `command` on the embedded target over SSH (as an operator at the machine would);
 * returns its stdout. @throws Error with the command and its output unless it exits 0.
 */
export async function onTarget(e: E2EBase, command: string): Promise<string> {
  const t = e.fleet.target;
  const s = await connect(
    { host: t.host, port: t.port, user: t.user, hostKey: t.hostKeyPin },
    { privateKey: t.clientPrivateKey, connectTimeoutMs: 20_000 },
  );
  try {
    const r = await s.exec(command, 60_000);
    if (r.exit_code !== 0) throw new Error(`[test] ${command}: ${r.stdout}${r.stderr}`);
    return r.stdout;
  } finally {
    s.close();
  }
}

/** The image v2 of `twoReleases` runs (v1 runs the recipe's). */
export const V2_IMAGE = `ghcr.io/acme/summarizer:v8@sha256:${"8e".repeat(32)}`;

/**
 * Two releases of `e.recipe` succeed, v1 then v2 (image `V2_IMAGE`, previous image v1's), and
 * every lane serves v2; `timeoutMs` bounds each wait. Returns both recipes, their release ids
 * and the lane ids.
 */
export async function twoReleases(
  e: E2EBase,
  timeoutMs: number,
): Promise<{ v1: RecipeInput; v2: RecipeInput; r1: string; r2: string; lanes: string[] }> {
  const v1 = e.recipe;
  const lanes = (v1.lanes ?? []).map((l) => l.id);
  const r1 = await postRecipe(e.api, v1);
  await e.waitFor(r1, (r) => r.state === "succeeded", `${r1} succeeded`, timeoutMs);
  console.log(`[test] ${e.kind}: ${r1} succeeded`);
  const v2 = { ...structuredClone(v1), image: V2_IMAGE, previous_image: v1.image as string };
  const r2 = await postRecipe(e.api, v2);
  await e.waitFor(r2, (r) => r.state === "succeeded", `${r2} succeeded`, timeoutMs);
  for (const l of lanes) expect(await servedImage(e, l)).toBe(V2_IMAGE);
  console.log(`[test] ${e.kind}: ${r2} succeeded`);
  return { v1, v2, r1, r2, lanes };
}

/** `docker rmi` (a clean-up removed it) or `docker pull` (loaded again) of `image` on the target. */
export async function dockerOnTarget(
  e: E2EBase,
  verb: "rmi" | "pull",
  image: string,
): Promise<void> {
  await onTarget(e, `docker ${verb} ${shQuote(image)}`);
}

/** Asks the engine to roll `id` back as the tests' operator does; returns the raw answer. */
export function askRollback(e: E2EBase, id: string): Promise<Response> {
  return postJson(e, `/v1/releases/${id}/rollback`, { reason: "v8 answers wrong", actor: "alice" });
}

/** One rollback prerequisite row (API and release record). */
export interface PrerequisiteCheck {
  check: string;
  lane: string | null;
  outcome: string;
  message: string;
  fix: string | null;
}

/** States a release does not leave by itself (the e2e tests wait for one of them). */
export const TERMINAL = new Set([
  "succeeded",
  "rolled_back",
  "aborted",
  "needs_operator",
  "abandoned",
]);

/** Index of the step labelled `label` (e.g. `attach_queue_lane:lane-a`). @throws if none. */
export function stepIndex(m: Manifest, label: string): number {
  const s = m.steps.find((x) => stepLabel(x) === label);
  if (!s) throw new Error(`no step ${label}`);
  return s.index;
}

/** The example recipe cut to two lanes (50% then 100%), with `policy` as given (default: none). */
export function twoLaneRecipe(policy?: RecipeInput["policy"]): RecipeInput {
  const r = loadRecipe();
  const lanes = (r.lanes ?? []).slice(0, 2);
  const { policy: _drop, ...rest } = r;
  return {
    ...rest,
    lanes,
    rollout: {
      waves: [
        { lanes: [lanes[0]!.id], traffic: 50 },
        { lanes: [lanes[1]!.id], traffic: 100 },
      ],
    },
    ...(policy ? { policy } : {}),
  };
}

/**
 * The image the container answering `lane`'s health URL runs, as the stand-in's health body
 * reports it (`{"image": "name@sha256:…"}`); null when the URL does not answer 200.
 */
export async function servedImage(e: E2EBase, lane: string): Promise<string | null> {
  const url = e.fleet.lanes.get(lane)?.healthUrl;
  if (!url) throw new Error(`[e2e] no lane ${lane} in the fleet`);
  const res = await fetch(url).catch(() => null);
  if (res?.status !== 200) return null;
  return ((await res.json()) as { image?: string }).image ?? null;
}

/** What the control plane holds for `model` (`GET /v1/models/:model/traffic`): weights (%) and excluded lanes. */
export async function cpTraffic(
  e: E2EBase,
  model: string,
): Promise<{ weights: Record<string, number>; excluded: string[] }> {
  const res = await fetch(`${e.fleet.cp.url}/v1/models/${model}/traffic`);
  if (res.status !== 200) throw new Error(`[e2e] control plane traffic: HTTP ${res.status}`);
  return (await res.json()) as { weights: Record<string, number>; excluded: string[] };
}

/** One applied control-plane write (`GET /v1/history`). */
export interface CpChange {
  id: number;
  operation_key: string;
  release_id: string;
  kind: string;
  lane: string | null;
  before: unknown;
  after: unknown;
}

/** The control plane's applied writes of `releaseId`, in order (replays are not writes). */
export async function cpHistory(e: E2EBase, releaseId: string): Promise<CpChange[]> {
  const res = await fetch(`${e.fleet.cp.url}/v1/history?release_id=${releaseId}&limit=10000`);
  if (res.status !== 200) throw new Error(`[e2e] control plane history: HTTP ${res.status}`);
  return ((await res.json()) as { history: CpChange[] }).history;
}

/** Units the reference router splits over `model`'s lanes right now (`POST /v1/route`), per lane. */
export async function routed(
  e: E2EBase,
  model: string,
  requests: number,
): Promise<Record<string, number>> {
  const res = await fetch(`${e.fleet.cp.url}/v1/route`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, requests }),
  });
  if (res.status !== 200) throw new Error(`[e2e] control plane route: HTTP ${res.status}`);
  return ((await res.json()) as { counts: Record<string, number> }).counts;
}

/** POSTs `body` as JSON to the engine as the operator. */
export function postJson(e: E2EBase, path: string, body: unknown): Promise<Response> {
  return e.api(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

/** No step run in flight (every one settled): what a held release looks like at rest. */
export function settled(r: RecordJson): boolean {
  return r.step_runs.every(
    (s) => !["pending", "dispatched", "running", "applying"].includes(s.state),
  );
}

/**
 * POSTs the verb `verb` (`/v1/releases/:id/<verb>`, JSON `body`) that must be refused with
 * `status` (default 409); returns the refusal's message for the caller to check.
 */
export async function refused(
  e: E2EBase,
  id: string,
  verb: string,
  body: unknown = {},
  status = 409,
): Promise<string> {
  const res = await postJson(e, `/v1/releases/${id}/${verb}`, body);
  const text = await res.text();
  expect(res.status, `${verb}: ${text}`).toBe(status);
  return (JSON.parse(text) as { error: { message: string } }).error.message;
}

/** What answered requests sent through the reference router (`startLaneRouter`). */
export interface RouterAnswers {
  /** Requests answered 200, per image the answering container runs. */
  images: Record<string, number>;
  /** Per lane: the container instances that answered (`baton-instance-id`). */
  instances: Record<string, string[]>;
  /** Requests not answered 200 (no lane, a lane down). */
  failed: number;
}

/**
 * The reference router as an HTTP proxy (engine/src/control-plane/router-proxy.ts) in front of
 * the fleet: it splits each request of `model` by the control plane's weights as they are now
 * and forwards it to its lane's health endpoint on the embedded target, whose container answers
 * with the image it runs and its instance id. `answers(n)` sends `n` requests through it, one at
 * a time, and counts who answered: the witness is the lanes' own answers, not Baton's records.
 */
export async function startLaneRouter(
  e: E2EBase,
  model: string,
): Promise<{ answers(n: number): Promise<RouterAnswers>; close(): Promise<void> }> {
  const health = (lane: string) => e.fleet.lanes.get(lane)?.healthUrl ?? null;
  const router = await startRouterProxy({
    lanes: (m) => e.fleet.cp.core.lanes(m),
    upstream: (lane) => {
      const url = health(lane);
      return url ? new URL(url).origin : null;
    },
  });
  const path = new URL(health(e.manifest.lanes[0]?.id ?? "") ?? "http://x/healthz").pathname;
  return {
    async answers(n) {
      const out: RouterAnswers = { images: {}, instances: {}, failed: 0 };
      for (let i = 0; i < n; i++) {
        const res = await fetch(`${router.url}/route/${model}${path}`);
        const body = (await res.json().catch(() => ({}))) as { image?: string; lane?: string };
        if (res.status !== 200 || !body.image || !body.lane) {
          out.failed++;
          continue;
        }
        out.images[body.image] = (out.images[body.image] ?? 0) + 1;
        const seen = out.instances[body.lane] ?? [];
        const id = res.headers.get("baton-instance-id") ?? "(none)";
        if (!seen.includes(id)) out.instances[body.lane] = [...seen, id];
      }
      return out;
    },
    close: () => router.close(),
  };
}

/** The container instance answering `lane`'s health URL now (`baton-instance-id`), or null. */
export async function laneInstance(e: E2EBase, lane: string): Promise<string | null> {
  const url = e.fleet.lanes.get(lane)?.healthUrl;
  if (!url) throw new Error(`[e2e] no lane ${lane} in the fleet`);
  const res = await fetch(url).catch(() => null);
  if (res?.status !== 200) return null;
  await res.arrayBuffer();
  return res.headers.get("baton-instance-id");
}
