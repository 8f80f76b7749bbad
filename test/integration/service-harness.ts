/**
 * Test harness for the engine's application layer: a real engine (`createEngine`) on a real
 * store (SQLite in a temp dir, or Postgres in its own schema), the in-memory dispatcher and
 * control-plane doubles, a fake clock, and a simulated runner that preflights and calls back
 * through the HTTP app (`app.request`, in process) with signed bodies.
 */

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import { openStore } from "../../engine/src/adapters/store-factory.ts";
import type { AdmissionConfig } from "../../engine/src/admission/policy.ts";
import type { EngineConfig } from "../../engine/src/config.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { createEngine, type Engine } from "../../engine/src/engine.ts";
import type { Clock } from "../../engine/src/ports/clock.ts";
import type { ControlPlane } from "../../engine/src/ports/control-plane.ts";
import type { MetricsSource } from "../../engine/src/ports/metrics-source.ts";
import type { Notifier } from "../../engine/src/ports/notifier.ts";
import type { Store } from "../../engine/src/ports/store.ts";
import type { TargetProbe } from "../../engine/src/ports/target-probe.ts";
import { signBody } from "../../engine/src/protocol/credential.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import type { Domain } from "../../engine/src/service/domain.ts";
import { preflightRequestFor } from "../support/preflight-request.ts";
import { IMAGE, lane, laneId, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";

export const SECRET = "callback-secret-0123456789abcdef";
export const OLD_SECRET = "callback-secret-old-0123456789ab";
export const OPERATOR = "operator-token-0123456789abcdef";
export const VIEWER = "viewer-token-0123456789abcdefgh";
export const T0 = 1_800_000_000_000;
export const SHA = "34f9bae4c170320dced1664d4321610c952e4b04";
export const PG_URL = process.env.BATON_TEST_DATABASE_URL;

/** A clock tests move by hand. */
export class FakeClock implements Clock {
  constructor(public t = T0) {}
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

/** A recipe with `n` lanes, one wave per lane, the traffic rising to 100 in the last wave. */
export function recipe(n = 2, extra: Partial<RecipeInput> = {}): RecipeInput {
  const lanes = Array.from({ length: n }, (_, i) => lane(i));
  const waves = lanes.map((l, i) => ({
    lanes: [l.id],
    traffic: i === n - 1 ? 100 : Math.round(((i + 1) * 100) / n / 2),
  }));
  return {
    name: "svc-test",
    model: "summarizer-v7",
    image: IMAGE,
    previous_image: PREVIOUS_IMAGE,
    tool_revision: SHA,
    lanes,
    rollout: { waves },
    ...extra,
  };
}

export function config(dataDir: string, over: Partial<EngineConfig> = {}): EngineConfig {
  return {
    databaseUrl: null,
    dataDir,
    port: 8787,
    publicUrl: "http://127.0.0.1:8787",
    callbackSecrets: [SECRET, OLD_SECRET],
    operatorToken: OPERATOR,
    viewerToken: VIEWER,
    controlPlaneUrl: null,
    dispatcher: "local",
    githubRepository: null,
    githubToken: null,
    githubApp: null,
    tickMs: 1000,
    sshKey: null,
    ...over,
  };
}

export type StoreKind = "sqlite" | "postgres";
export const STORE_KINDS: StoreKind[] = ["sqlite", "postgres"];

/**
 * True when the suite for `kind` must be skipped: Postgres without BATON_TEST_DATABASE_URL.
 * In CI (CI=true) that is an error instead: the Postgres half must run there.
 */
export function skipStore(kind: StoreKind): boolean {
  if (kind !== "postgres" || PG_URL) return false;
  if (process.env.CI === "true") {
    throw new Error(
      "[test] BATON_TEST_DATABASE_URL is not set in CI: the Postgres suites must run",
    );
  }
  console.warn(
    "[test] skipping Postgres suites: set BATON_TEST_DATABASE_URL (scripts/ci/pg-start.sh)",
  );
  return true;
}

const pgSchemas = new WeakMap<Store, string>();

/** Drops the schema of a Postgres test store (no-op for SQLite). */
async function dropTestSchema(store: Store): Promise<void> {
  const schema = pgSchemas.get(store);
  if (!schema || !PG_URL) return;
  const { default: pg } = await import("pg");
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await c.end();
  }
}

export interface Harness {
  engine: Engine;
  dispatcher: MemoryDispatcher;
  cp: MemoryControlPlane;
  clock: FakeClock;
  store: Store;
  dir: string;
  /** Stops the engine; `keep` leaves the store open and the directory in place (restart tests). */
  close(keep?: boolean): Promise<void>;
}

let schemaSeq = 0;

/** Opens a store of `kind` (Postgres: a fresh schema). Returns null when Postgres is not configured. */
export async function openTestStore(kind: StoreKind, dir: string): Promise<Store | null> {
  if (kind === "sqlite") return openStore({ dataDir: dir });
  if (!PG_URL) return null;
  const { openPostgresStore } = await import(
    "../../engine/src/adapters/postgres/postgres-store.ts"
  );
  const schema = `svc_${process.pid}_${Date.now() % 1e8}_${schemaSeq++}`;
  const s = openPostgresStore({ connectionString: PG_URL, schema });
  await s.migrate();
  pgSchemas.set(s, schema);
  return s;
}

/**
 * A second handle on the database of `store` (opened by `openTestStore` in `dir`): SQLite opens
 * the same file again, Postgres a new pool on the same schema. What a second engine process
 * sharing the database holds; the caller closes it (the schema is dropped with `store`).
 */
export async function openSecondHandle(kind: StoreKind, dir: string, store: Store): Promise<Store> {
  if (kind === "sqlite") return openStore({ dataDir: dir });
  const schema = pgSchemas.get(store);
  if (!schema || !PG_URL) throw new Error("[test] not a Postgres test store of openTestStore");
  const { openPostgresStore } = await import(
    "../../engine/src/adapters/postgres/postgres-store.ts"
  );
  return openPostgresStore({ connectionString: PG_URL, schema });
}

/** Lanes of `r` seeded into the control-plane double with equal baseline weights. */
export function seedControlPlane(cp: MemoryControlPlane, r: RecipeInput): void {
  const lanes = r.lanes ?? [];
  const base = Math.floor(100 / lanes.length);
  cp.seed(
    lanes.map((l, i) => ({
      id: l.id,
      weight: i === 0 ? 100 - base * (lanes.length - 1) : base,
      capabilities: [],
      advertised: false,
      excluded: false,
    })),
  );
}

/**
 * A running engine on fresh doubles. `eager: false` (default) means the reconciler runs only
 * when a test calls `tick`.
 */
export async function makeHarness(
  o: {
    kind?: StoreKind;
    dir?: string;
    store?: Store;
    clock?: FakeClock;
    dispatcher?: MemoryDispatcher;
    cp?: MemoryControlPlane;
    /** What the engine gets as its control plane instead of `cp` (e.g. lanes read over HTTP). */
    controlPlane?: ControlPlane;
    seed?: RecipeInput;
    eager?: boolean;
    domain?: Domain;
    /** Notifiers of the engine (none by default) and config overrides (e.g. `notify`). */
    notifiers?: Notifier[];
    config?: Partial<EngineConfig>;
    /** Admission mode (default off: a config built by hand). */
    admission?: AdmissionConfig;
    /** Where gates read their numbers (default none). */
    metrics?: MetricsSource;
    /** Outbox claim lease of the reconciler, ms (default 60 s). */
    leaseMs?: number;
    /** Ask rollback prerequisites by a runner probe step per lane (default off). */
    runnerProbe?: boolean;
    /** The engine's log (default: silent). */
    log?: { info(m: string): void; warn(m: string): void; error(m: string, e?: unknown): void };
    /** What the engine asks lanes' machines through (default none: runner reports). */
    targetProbe?: TargetProbe;
  } = {},
): Promise<Harness> {
  const dir = o.dir ?? mkdtempSync(path.join(tmpdir(), "baton-svc-"));
  const clock = o.clock ?? new FakeClock();
  const store = o.store ?? (await openTestStore(o.kind ?? "sqlite", dir));
  if (!store) throw new Error("Postgres not configured: set BATON_TEST_DATABASE_URL");
  const dispatcher = o.dispatcher ?? new MemoryDispatcher();
  const cp = o.cp ?? new MemoryControlPlane({ model: "summarizer-v7", now: () => clock.now() });
  if (!o.cp) seedControlPlane(cp, o.seed ?? recipe());
  const engine = await createEngine(
    config(dir, { ...o.config, ...(o.admission ? { admission: o.admission } : {}) }),
    {
      store,
      ...(o.notifiers ? { notifiers: o.notifiers } : {}),
      ...(o.metrics ? { metrics: o.metrics } : {}),
      dispatcher,
      controlPlane: o.controlPlane ?? cp,
      clock,
      eagerReconcile: o.eager ?? false,
      ...(o.domain ? { domain: o.domain } : {}),
      reconciler: { leaseMs: o.leaseMs ?? 60_000 },
      ...(o.runnerProbe ? { runnerProbe: true } : {}),
      ...(o.targetProbe ? { targetProbe: o.targetProbe } : {}),
      log: o.log ?? { info() {}, warn() {}, error() {} },
    },
  );
  return {
    engine,
    dispatcher,
    cp,
    clock,
    store,
    dir,
    async close(keep = false) {
      await engine.close();
      if (!keep) {
        await store.close();
        await dropTestSchema(store).catch(() => {});
        if (!o.dir) rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Operator request through the app. */
export function op(
  h: Harness,
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  return h.engine.app.request(url, {
    method,
    headers: {
      authorization: `Bearer ${OPERATOR}`,
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
      ...headers,
    },
    ...(body !== undefined ? { body: typeof body === "string" ? body : JSON.stringify(body) } : {}),
  });
}

/** Creates a release from `r` through the API; returns its id. */
export async function createRelease(h: Harness, r: RecipeInput = recipe()): Promise<string> {
  const res = await op(h, "POST", "/v1/releases", r);
  if (res.status !== 201) throw new Error(`create failed ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

/** Sends exact `body` bytes signed with `secret` at the fake clock's time. */
export function signedPost(
  h: Harness,
  url: string,
  body: string | Uint8Array,
  secret = SECRET,
  at = h.clock.now(),
): Promise<Response> {
  return Promise.resolve(
    h.engine.app.request(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...signBody(secret, body, at) },
      body: body as BodyInit,
    }),
  );
}

/** Run identity of a simulated workflow run. */
export interface RunIdentity {
  run_id: string;
  run_attempt: number;
}

export function preflightBody(
  p: DispatchPayload,
  run: RunIdentity,
  over: Record<string, unknown> = {},
) {
  return JSON.stringify(preflightRequestFor(p, run, SHA, over));
}

export function callbackBody(
  stepRunId: string,
  run: RunIdentity,
  overall: "pass" | "fail" = "pass",
  over: Record<string, unknown> = {},
) {
  return JSON.stringify({
    step_run_id: stepRunId,
    run_id: run.run_id,
    run_attempt: run.run_attempt,
    status: overall === "pass" ? "succeeded" : "failed",
    overall,
    // A failure as the deploy tool records one: the health probe's answer and body.
    checks: [
      overall === "pass"
        ? { name: "health", status: "passed", exit_code: 0 }
        : {
            name: "health",
            status: "failed",
            exit_code: 1,
            http_status: 503,
            body: "model not loaded: CUDA OOM",
            message: "not healthy within 2s (1 probes): 503: model not loaded: CUDA OOM",
          },
    ],
    log: `ran ${stepRunId}\n`,
    log_truncated: false,
    timings: {},
    ...over,
  });
}

export const preflightUrl = (id: string) => `/v1/releases/step-runs/${id}/preflight`;
export const callbackUrl = (id: string) => `/v1/releases/step-runs/${id}/callback`;

/**
 * Ticks the engine (at most 50 times) until its first runner dispatch is accepted, past the
 * control-plane steps before it; returns that dispatch. Throws when none came.
 */
export async function firstDispatch(h: Harness): Promise<DispatchPayload> {
  for (let i = 0; i < 50 && h.dispatcher.accepted.length === 0; i++) await h.engine.tick();
  const p = h.dispatcher.accepted[0];
  if (!p) throw new Error("no runner dispatch within 50 ticks");
  return p;
}

let runSeq = 1000;

/** Plays one runner for `p`: preflight, then callback with `overall`. Returns both answers. */
export async function runStep(
  h: Harness,
  p: DispatchPayload,
  overall: "pass" | "fail" = "pass",
  run: RunIdentity = { run_id: String(runSeq++), run_attempt: 1 },
): Promise<{ preflight: Response; callback: Response | null; run: RunIdentity }> {
  const pre = await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run));
  if (pre.status !== 200) return { preflight: pre, callback: null, run };
  const cb = await signedPost(
    h,
    callbackUrl(p.step_run_id),
    callbackBody(p.step_run_id, run, overall),
  );
  return { preflight: pre, callback: cb, run };
}

/**
 * Drives releases: ticks the reconciler and answers every new accepted dispatch with a
 * passing runner (or `decide`'s verdict), until nothing is left to do. Bounded.
 */
export async function drive(
  h: Harness,
  decide: (p: DispatchPayload) => "pass" | "fail" | "skip" = () => "pass",
  maxRounds = 400,
  beforeTick?: () => Promise<void> | void,
  until?: () => Promise<unknown> | unknown,
): Promise<void> {
  for (let round = 0; round < maxRounds; round++) {
    if (until && (await until())) return;
    await beforeTick?.();
    const { t, fresh } = await pumpOnce(h, decide);
    if (t.performed === 0 && t.failed === 0 && fresh.length === 0) {
      // Backoff rows wait on the clock: move it on once there is nothing due now. A paused
      // release's stop-condition checks go on for ever: they do not keep the drive going.
      const pending = await h.store.pendingOutbox();
      const watched = new Map<string, boolean>();
      for (const r of pending) {
        if (r.effect.type !== "stop_check" || watched.has(r.release_id)) continue;
        watched.set(r.release_id, (await h.store.getRelease(r.release_id))?.state === "running");
      }
      const next = pending
        .filter((r) => r.effect.type !== "deadline")
        .filter((r) => r.effect.type !== "stop_check" || watched.get(r.release_id) === true)
        .map((r) => r.due_at)
        .sort((a, b) => a - b)[0];
      if (next === undefined) return;
      h.clock.t = Math.max(h.clock.t, next);
    }
  }
  throw new Error(`drive: still busy after ${maxRounds} rounds`);
}

const handledCount = new WeakMap<Harness, number>();

/**
 * One reconciler pass, then a runner for every dispatch accepted since the last pump of this
 * harness (each dispatch is answered once, whoever pumps).
 */
export async function pumpOnce(
  h: Harness,
  decide: (p: DispatchPayload) => "pass" | "fail" | "skip" = () => "pass",
) {
  const t = await h.engine.tick();
  const handled = handledCount.get(h) ?? 0;
  const fresh = h.dispatcher.accepted.slice(handled);
  handledCount.set(h, h.dispatcher.accepted.length);
  for (const p of fresh) {
    const v = decide(p);
    if (v !== "skip") await runStep(h, p, v);
  }
  return { t, fresh };
}

/**
 * Drives release `id` to its end (at most 400 rounds): every runner dispatch is preflighted
 * and answered with a callback of overall pass whose checks.json is `checksOf(p)`; when nothing
 * is due now, the clock moves to the next due outbox row. Returns the record.
 */
export async function driveReportingChecks(
  h: Harness,
  id: string,
  checksOf: (p: DispatchPayload) => unknown,
) {
  let n = 5000;
  for (let i = 0; i < 400; i++) {
    const { t, fresh } = await pumpOnce(h, () => "skip");
    for (const p of fresh) {
      const run = { run_id: String(n++), run_attempt: 1 };
      await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run));
      const cb = await signedPost(
        h,
        callbackUrl(p.step_run_id),
        callbackBody(p.step_run_id, run, "pass", { checks: checksOf(p) }),
      );
      if (cb.status !== 200)
        throw new Error(`callback of ${p.step_run_id}: HTTP ${cb.status} ${await cb.text()}`);
    }
    if (t.performed === 0 && fresh.length === 0 && !(await skipToNextDue(h, id))) break;
  }
  return getRecord(h, id);
}

/**
 * Moves the fake clock to release `id`'s next due outbox row that is not a deadline (a
 * deadline firing is what the caller waits for, never what it skips to). False when none is due.
 */
export async function skipToNextDue(h: Harness, id: string): Promise<boolean> {
  const due = (await h.store.pendingOutbox(id))
    .filter((r) => r.effect.type !== "deadline")
    .map((r) => r.due_at)
    .sort((a, b) => a - b)[0];
  if (due === undefined) return false;
  h.clock.t = Math.max(h.clock.t, due);
  return true;
}

/** `rounds` pumps without moving the clock (never throws for work left). */
export async function pump(h: Harness, rounds: number): Promise<void> {
  for (let i = 0; i < rounds; i++) await pumpOnce(h);
}

export async function getRecord(h: Harness, id: string) {
  const res = await op(h, "GET", `/v1/releases/${id}`);
  return (await res.json()) as {
    id: string;
    state: string;
    high_water_mark: number;
    cursor: number;
    generation: number;
    step_runs: {
      id: string;
      state: string;
      step_index: number;
      direction: string;
      dispatch: number;
      last_error: string | null;
      attempts: { n: number; state: string; run_attempt: number }[];
    }[];
    history: {
      kind: string;
      outcome: string;
      step_run_id: string | null;
      message: string;
      data: unknown;
    }[];
    attempt_results: {
      step_run_id: string;
      attempt: number;
      checks: unknown;
      log: string;
      log_truncated: boolean;
      raw_callback: string;
    }[];
    manifest: { steps: { index: number; name: string; kind: string }[] };
  };
}

export { laneId };

type Rec = Awaited<ReturnType<typeof getRecord>>;

/** The step run of `index` in direction `dir` (`fwd`/`bwd`), or undefined. */
export function stepRun(rec: Rec, index: number, dir: "fwd" | "bwd" = "fwd") {
  return rec.step_runs.find((s) => s.step_index === index && s.direction === dir);
}
