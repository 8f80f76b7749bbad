/**
 * Engine benchmark (`npm run bench:engine`). What each figure measures:
 *
 * For each store (a SQLite file; Postgres from BATON_TEST_DATABASE_URL, or a throwaway cluster
 * started with scripts/ci/pg-start.sh), in one run, on one store object (one SQLite connection,
 * or one `pg` pool of 10 connections):
 *
 * 1. Sequential phase (`transition_p50_ms`, `raw_update_p50_ms`, `overhead_ratio`).
 *    Releases are driven one at a time, nothing else running (the reconciler is stepped by
 *    hand between events, no eager runs). Each runner callback is applied by calling the
 *    service (`ReleaseService.callback`: load the release — from the service's cache, which
 *    holds the current version — pure transition, one conditional commit carrying the new
 *    release doc, history, the attempt result and any new outbox rows) and timed alone:
 *    `transition_p50_ms`. Right after each timed transition, one raw conditional UPDATE
 *    (`UPDATE releases SET resource_version = resource_version + 1, updated_at = ? WHERE id = ?
 *    AND resource_version = ?`, a prepared statement; on Postgres a named one like the commit)
 *    is timed on another release row through the SAME connection pool (Postgres) or the SAME
 *    connection (SQLite): `raw_update_p50_ms`. Interleaving the two keeps them under the same
 *    machine load. `overhead_ratio` = transition p50 ÷ raw update p50 (target ≤ 3 on Postgres).
 *    HTTP handling and the HMAC check are not part of it; they are in the load phase.
 *    `preflight_p50_ms` is the same measure for preflights (a lighter commit), for reference.
 * 2. Load phase (`callbacks_per_s`, `p50_ms`, `p99_ms`). 100 releases (4 lanes, 24 steps,
 *    8 runner steps each) are created at once and driven to `succeeded` by simulated runners
 *    through the Hono app in process (`app.request`: routing, body limit, HMAC over the raw
 *    body, parse, service, reply; no sockets), with the reconciler running eagerly after
 *    commits and control-plane steps served by an in-memory control plane. Runners preflight
 *    as soon as dispatched and hold their signed callbacks; held callbacks go out together
 *    (a burst of up to 100 concurrent callbacks, one per release) once every release waits on
 *    one, or nothing new arrived for 100 ms. `p50_ms`/`p99_ms` = latency of one callback
 *    request inside a burst (from sending to the 200 answer, queueing behind the other 99
 *    included); `callbacks_per_s` = callbacks ÷ time spent in bursts (target ≥ 1,000).
 *    The reconciler's work (dispatches, control-plane steps) triggered by the callbacks runs
 *    during the bursts and competes for the same CPU. `drive_wall_ms` and
 *    `end_to_end_callbacks_per_s` cover the whole drive, control-plane steps and preflights
 *    included. `node_cpu_ms_per_callback` = CPU time (user + system) of this Node process over
 *    the whole drive ÷ callbacks: the engine's own CPU cost per callback with everything it
 *    does for it (HTTP, preflights, dispatches, control-plane steps), plus the simulated
 *    runners' and control plane's share; the database server's CPU is not in it. It depends
 *    far less on other load on the machine than the rates do.
 *
 * `load_avg_1m` is the machine's 1-minute load average when the store's run ended: the
 * machine (2 cores) may be shared, so read the figures with it.
 * BENCH_STORES=sqlite|postgres runs one store only (e.g. for a CPU profile).
 * Last lines: `RESULT {"store":"sqlite",…}` and `RESULT {"store":"postgres",…}`.
 */

import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { MemoryControlPlane } from "../engine/src/adapters/memory/control-plane.ts";
import { MemoryDispatcher } from "../engine/src/adapters/memory/dispatcher.ts";
import { openPostgresStore } from "../engine/src/adapters/postgres/postgres-store.ts";
import { openSqliteStore } from "../engine/src/adapters/sqlite/sqlite-store.ts";
import type { EngineConfig } from "../engine/src/config.ts";
import type { ControlPlaneOp } from "../engine/src/domain/types.ts";
import { createEngine, type Engine } from "../engine/src/engine.ts";
import type { ControlPlane, WriteContext } from "../engine/src/ports/control-plane.ts";
import type { Store } from "../engine/src/ports/store.ts";
import { signBody } from "../engine/src/protocol/credential.ts";
import {
  CallbackBody,
  type DispatchPayload,
  PreflightRequest,
} from "../engine/src/protocol/messages.ts";
import { payloadDigestOf } from "../engine/src/protocol/payload-digest.ts";

const RELEASES = 100;
const LANES = 4;
/** Callbacks timed alone in the sequential phase (8 per release). */
const SEQ_CALLBACKS = 160;
const SECRET = "bench-callback-secret-0123456789";
const OPERATOR = "bench-operator-token-0123456789";
const SHA = "34f9bae4c170320dced1664d4321610c952e4b04";
const HOST_KEY = "SHA256:q4YbKWRnplKrKDOS5J7OTZmJqlBWdVB4z5qRddVIgJ4";
const IMAGE = `ghcr.io/acme/summarizer@sha256:${"6b".repeat(32)}`;
const PREVIOUS = `ghcr.io/acme/summarizer@sha256:${"dd".repeat(32)}`;

// The benchmark drives 100 concurrent releases of one recipe (each with its own in-memory
// control plane), so the one-release-per-lane rule, which a real fleet needs, is off here.
process.env.BATON_EXCLUSIVE_LANES = "off";

function recipe() {
  const lanes = Array.from({ length: LANES }, (_, i) => ({
    id: `lane-${i}`,
    host: `gpu-${i}.serving.acme.internal`,
    user: "deploy",
    host_key: HOST_KEY,
    queue: "summarize",
    capabilities: ["summarize"],
    health_url: `http://gpu-${i}.serving.acme.internal:8080/healthz`,
  }));
  return {
    name: "bench",
    model: "summarizer",
    image: IMAGE,
    previous_image: PREVIOUS,
    tool_revision: SHA,
    lanes,
    rollout: {
      waves: [
        { lanes: ["lane-0", "lane-1"], traffic: 50 },
        { lanes: ["lane-2", "lane-3"], traffic: 100 },
      ],
    },
  };
}

/** One in-memory control plane per release (releases in a benchmark share lane names). */
class PerReleaseControlPlane implements ControlPlane {
  private readonly cps = new Map<string, MemoryControlPlane>();
  private cp(id: string): MemoryControlPlane {
    let cp = this.cps.get(id);
    if (!cp) {
      cp = new MemoryControlPlane({ model: "summarizer" });
      cp.seed(Array.from({ length: LANES }, (_, i) => ({ id: `lane-${i}`, weight: 100 / LANES })));
      this.cps.set(id, cp);
    }
    return cp;
  }
  apply(op: ControlPlaneOp, ctx: WriteContext) {
    return this.cp(ctx.release_id).apply(op, ctx);
  }
  observe(op: ControlPlaneOp, ctx: WriteContext) {
    return this.cp(ctx.release_id).observe(op, ctx);
  }
}

function config(dataDir: string): EngineConfig {
  return {
    databaseUrl: null,
    dataDir,
    port: 8787,
    publicUrl: "http://127.0.0.1:8787",
    callbackSecrets: [SECRET],
    operatorToken: OPERATOR,
    viewerToken: null,
    controlPlaneUrl: null,
    dispatcher: "local",
    githubRepository: null,
    githubToken: null,
    githubApp: null,
    tickMs: 1000,
    sshKey: null,
  };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};
const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d;

let runSeq = 1;

/** The runner's preflight request and callback body for one dispatch (JSON text). */
function runnerBodies(p: DispatchPayload): { preflight: string; callback: string } {
  const run = { run_id: String(runSeq++), run_attempt: 1 };
  const preflight = JSON.stringify({
    step_run_id: p.step_run_id,
    release_id: p.release.id,
    generation: p.release.generation,
    manifest_digest: p.release.manifest_digest,
    dispatch: p.release.dispatch,
    ...run,
    sha: SHA,
    tool: p.tool,
    payload_digest: payloadDigestOf(p),
  });
  const callback = JSON.stringify({
    step_run_id: p.step_run_id,
    ...run,
    status: "succeeded",
    overall: "pass",
    checks: [{ name: "health", status: "passed", exit_code: 0, duration_ms: 12 }],
    log: "pulled\nstarted\nhealthy\nstopped old\n",
    log_truncated: false,
    timings: {},
  });
  return { preflight, callback };
}

/**
 * Plays the runner for one dispatch over HTTP (in process) up to its callback: sends the
 * signed preflight and returns a function that sends the signed callback and resolves to its
 * latency (ms); null if the preflight was refused.
 */
async function runner(engine: Engine, p: DispatchPayload): Promise<(() => Promise<number>) | null> {
  const { preflight, callback } = runnerBodies(p);
  const url = `/v1/releases/step-runs/${p.step_run_id}`;
  const r1 = await engine.app.request(`${url}/preflight`, {
    method: "POST",
    headers: { "content-type": "application/json", ...signBody(SECRET, preflight) },
    body: preflight,
  });
  if (r1.status !== 200) return null;
  // Signed now, as a runner does on its own machine before sending: only the engine's work
  // falls inside the timed request (the credential stays valid for 5 minutes).
  const headers = { "content-type": "application/json", ...signBody(SECRET, callback) };
  return async () => {
    const t0 = performance.now();
    const r2 = await engine.app.request(`${url}/callback`, {
      method: "POST",
      headers,
      body: callback,
    });
    const ms = performance.now() - t0;
    if (r2.status !== 200) throw new Error(`callback answered ${r2.status}: ${await r2.text()}`);
    return ms;
  };
}

async function createRelease(engine: Engine): Promise<string> {
  const res = await engine.app.request("/v1/releases", {
    method: "POST",
    headers: { authorization: `Bearer ${OPERATOR}`, "content-type": "application/json" },
    body: JSON.stringify(recipe()),
  });
  if (res.status !== 201) throw new Error(`create answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

async function waitAll(store: Store, n: number, limitMs: number): Promise<void> {
  const end = Date.now() + limitMs;
  while (Date.now() < end) {
    const done = await store.listReleases({ state: "succeeded", limit: 1000 });
    if (done.length >= n) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`[bench] releases did not all succeed within ${limitMs} ms`);
}

/** One raw conditional UPDATE of `releases` on the store's own connection(s). */
interface RawUpdater {
  /** Resolves to the number of rows updated (1, or 0 if `version` was not current). */
  update(id: string, version: number, now: number): Promise<number>;
}

const RAW_SQL =
  "UPDATE releases SET resource_version = resource_version + 1, updated_at = $1 WHERE id = $2 AND resource_version = $3";

function engineFor(store: Store, dir: string, dispatcher: MemoryDispatcher, eager: boolean) {
  return createEngine(config(dir), {
    store,
    dispatcher,
    controlPlane: new PerReleaseControlPlane(),
    eagerReconcile: eager,
    reconciler: { batch: 256, maxPasses: 8, maxInFlight: 512 },
    log: { info() {}, warn() {}, error: (m, e) => console.error(m, e) },
  });
}

/**
 * Phase 1: releases driven one at a time by calling the service; each runner event timed
 * alone, each followed by one timed raw conditional UPDATE of `rawRow` (see the header).
 */
async function sequential(store: Store, dir: string, raw: RawUpdater) {
  const dispatcher = new MemoryDispatcher();
  const engine = await engineFor(store, dir, dispatcher, false);
  const service = engine.service;
  let pending: DispatchPayload[] = [];
  dispatcher.onAccepted((p) => pending.push(p));
  const callbackMs: number[] = [];
  const preflightMs: number[] = [];
  const rawMs: number[] = [];
  let rawRow: { id: string; version: number } | null = null;
  const timedRaw = async () => {
    if (!rawRow) return;
    const t0 = performance.now();
    const n = await raw.update(rawRow.id, rawRow.version, Date.now());
    rawMs.push(performance.now() - t0);
    if (n !== 1) throw new Error("[bench] raw conditional update matched no row");
    rawRow.version++;
  };
  const drive = async (timed: boolean) => {
    const id = await createRelease(engine);
    for (let i = 0; i < 200; i++) {
      await engine.tick();
      const batch = pending;
      pending = [];
      for (const p of batch) {
        const { preflight, callback } = runnerBodies(p);
        const pre = PreflightRequest.parse(JSON.parse(preflight));
        const cb = CallbackBody.parse(JSON.parse(callback));
        let t0 = performance.now();
        const r1 = await service.preflight(p.step_run_id, pre);
        if (timed) preflightMs.push(performance.now() - t0);
        if (!r1.ok) throw new Error(`[bench] preflight refused: ${r1.reason}`);
        if (timed) await timedRaw();
        t0 = performance.now();
        const r2 = await service.callback(p.step_run_id, cb, callback);
        if (timed) callbackMs.push(performance.now() - t0);
        if (!r2.ok) throw new Error(`[bench] callback refused: ${r2.reason}`);
        if (timed) await timedRaw();
      }
      const r = await store.getRelease(id);
      if (r?.state === "succeeded") return r;
    }
    throw new Error(`[bench] sequential release ${id} did not succeed`);
  };
  // Warm-up (statement caches, JIT); its row is then the target of the raw updates.
  const warm = await drive(false);
  rawRow = { id: warm.id, version: warm.resource_version };
  for (let i = 0; i < 20; i++) await timedRaw();
  rawMs.length = 0;
  while (callbackMs.length < SEQ_CALLBACKS) await drive(true);
  await engine.close();
  return { callbackMs, preflightMs, rawMs, releases: Math.ceil(callbackMs.length / 8) + 1 };
}

/** Phase 2: 100 concurrent releases over HTTP in process, callbacks in bursts (see header). */
async function load(store: Store, dir: string) {
  const dispatcher = new MemoryDispatcher();
  const engine = await engineFor(store, dir, dispatcher, true);
  const lat: number[] = [];
  const held: (() => Promise<number>)[] = [];
  const inflight: Promise<void>[] = [];
  let lastHeld = performance.now();
  let burstMs = 0;
  let bursts = 0;
  dispatcher.onAccepted((p) => {
    inflight.push(
      new Promise<void>((resolve) => setImmediate(resolve))
        .then(() => runner(engine, p))
        .then((send) => {
          if (send) {
            held.push(send);
            lastHeld = performance.now();
          }
        }),
    );
  });
  let done = false;
  const coordinator = (async () => {
    while (!done) {
      await new Promise((r) => setTimeout(r, 2));
      const quiet = performance.now() - lastHeld > 100;
      if (held.length === 0 || (held.length < RELEASES && !quiet)) continue;
      const batch = held.splice(0);
      const b0 = performance.now();
      lat.push(...(await Promise.all(batch.map((f) => f()))));
      burstMs += performance.now() - b0;
      bursts++;
    }
  })();
  const before = (await store.listReleases({ state: "succeeded", limit: 1000 })).length;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: RELEASES }, () => createRelease(engine)));
  await waitAll(store, before + RELEASES, 300_000);
  done = true;
  await coordinator;
  await Promise.all(inflight);
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const stats = engine.reconciler.stats;
  await engine.close();
  return { lat, burstMs, bursts, wall, stats, cpuMs: (cpu.user + cpu.system) / 1000 };
}

async function bench(
  name: "sqlite" | "postgres",
  store: Store,
  raw: RawUpdater,
  dir: string,
): Promise<Record<string, unknown>> {
  const seq = await sequential(store, dir, raw);
  const l = await load(store, dir);
  console.error(`[bench] ${name}: ${l.bursts} bursts; reconciler ${JSON.stringify(l.stats)}`);
  const seqP50 = pct(seq.callbackMs, 50);
  const rawP50 = pct(seq.rawMs, 50);
  return {
    store: name,
    releases: RELEASES,
    callbacks: l.lat.length,
    callbacks_per_s: Math.round(l.lat.length / (l.burstMs / 1000)),
    p50_ms: round(pct(l.lat, 50)),
    p99_ms: round(pct(l.lat, 99)),
    transition_p50_ms: round(seqP50, 4),
    transition_p99_ms: round(pct(seq.callbackMs, 99), 4),
    preflight_p50_ms: round(pct(seq.preflightMs, 50), 4),
    raw_update_p50_ms: round(rawP50, 4),
    overhead_ratio: round(seqP50 / rawP50, 2),
    sequential_samples: seq.callbackMs.length,
    drive_wall_ms: Math.round(l.wall),
    end_to_end_callbacks_per_s: Math.round(l.lat.length / (l.wall / 1000)),
    node_cpu_ms_per_callback: round(l.cpuMs / l.lat.length, 3),
    transport: "in-process app.request",
    load_avg_1m: round(loadavg()[0] ?? Number.NaN, 2),
  };
}

async function sqliteRun() {
  const dir = mkdtempSync(path.join(tmpdir(), "baton-bench-"));
  try {
    const store = openSqliteStore(path.join(dir, "baton.sqlite"));
    await store.migrate();
    // Same connection as the store's commits; SQLite spells parameters `?`.
    const stmt = store.database.prepare(RAW_SQL.replace(/\$\d/g, "?"));
    const raw: RawUpdater = { update: async (id, v, now) => stmt.run(now, id, v).changes };
    const r = await bench("sqlite", store, raw, dir);
    await store.close();
    return r;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function postgresRun() {
  let url = process.env.BATON_TEST_DATABASE_URL;
  let started: string | null = null;
  if (!url) {
    const out = execFileSync("scripts/ci/pg-start.sh", ["55439"], { encoding: "utf8" });
    url = /BATON_TEST_DATABASE_URL=(\S+)/.exec(out)?.[1];
    started = /BATON_PG_DIR=(\S+)/.exec(out)?.[1] ?? null;
    if (!url) throw new Error("[bench] could not start Postgres with scripts/ci/pg-start.sh");
  }
  const schema = `bench_${process.pid}`;
  const dir = mkdtempSync(path.join(tmpdir(), "baton-bench-"));
  const store = openPostgresStore({ connectionString: url, schema, max: 10 });
  try {
    await store.migrate();
    // Same pool as the store's commits, and a named prepared statement like the commit's.
    const raw: RawUpdater = {
      update: async (id, v, now) =>
        (await store.pool.query({ name: "bench_raw_update", text: RAW_SQL, values: [now, id, v] }))
          .rowCount ?? 0,
    };
    return await bench("postgres", store, raw, dir);
  } finally {
    await store.pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
    await store.close();
    rmSync(dir, { recursive: true, force: true });
    if (started) execFileSync("scripts/ci/pg-stop.sh", [started]);
  }
}

const stores = (process.env.BENCH_STORES ?? "sqlite,postgres").split(",");
const results: Record<string, unknown>[] = [];
if (stores.includes("sqlite")) results.push(await sqliteRun());
if (stores.includes("postgres")) results.push(await postgresRun());
for (const r of results) console.log(`RESULT ${JSON.stringify(r)}`);
