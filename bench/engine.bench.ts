/**
 * Engine benchmark (`npm run bench:engine`), issue 2.
 *
 * For each store (SQLite file; Postgres from BATON_TEST_DATABASE_URL, or a throwaway cluster
 * started with scripts/ci/pg-start.sh):
 * 1. sequential phase: one release driven step by step; each signed callback is timed alone
 *    (HTTP handling, HMAC over the raw body, load, transition, conditional commit), and in the
 *    same run one raw conditional `UPDATE releases … WHERE id = ? AND resource_version = ?` is
 *    timed on the same database. overhead_ratio = callback p50 ÷ raw update p50.
 * 2. load phase: 100 concurrent releases driven through all their steps by simulated runners
 *    (preflight + callback per runner step, signed), control-plane steps by the in-memory
 *    control plane; callbacks_per_s = callbacks ÷ wall time, p50/p99 = callback latency.
 * Requests go through the Hono app in process (`app.request`): no sockets, so the figures are
 * the engine's own cost, not the HTTP stack's.
 * Last lines: `RESULT {"store":"sqlite",…}` and `RESULT {"store":"postgres",…}`.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { MemoryControlPlane } from "../engine/src/adapters/memory/control-plane.ts";
import { MemoryDispatcher } from "../engine/src/adapters/memory/dispatcher.ts";
import { openPostgresStore } from "../engine/src/adapters/postgres/postgres-store.ts";
import { openStore } from "../engine/src/adapters/store-factory.ts";
import type { EngineConfig } from "../engine/src/config.ts";
import type { ControlPlaneOp } from "../engine/src/domain/types.ts";
import { createEngine, type Engine } from "../engine/src/engine.ts";
import type { ControlPlane, WriteContext } from "../engine/src/ports/control-plane.ts";
import type { Store } from "../engine/src/ports/store.ts";
import { signBody } from "../engine/src/protocol/credential.ts";
import type { DispatchPayload } from "../engine/src/protocol/messages.ts";

const RELEASES = 100;
const LANES = 4;
const RAW_UPDATES = 500;
const SECRET = "bench-callback-secret-0123456789";
const OPERATOR = "bench-operator-token-0123456789";
const SHA = "34f9bae4c170320dced1664d4321610c952e4b04";
const HOST_KEY = "SHA256:q4YbKWRnplKrKDOS5J7OTZmJqlBWdVB4z5qRddVIgJ4";
const IMAGE = `ghcr.io/acme/summarizer@sha256:${"6b".repeat(32)}`;
const PREVIOUS = `ghcr.io/acme/summarizer@sha256:${"dd".repeat(32)}`;

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

/**
 * Plays the runner for one dispatch up to its callback: sends the preflight and returns a
 * function that sends the callback and resolves to its latency (ms); null if refused.
 */
async function runner(engine: Engine, p: DispatchPayload): Promise<(() => Promise<number>) | null> {
  const run = { run_id: String(runSeq++), run_attempt: 1 };
  const pre = JSON.stringify({
    step_run_id: p.step_run_id,
    release_id: p.release.id,
    generation: p.release.generation,
    manifest_digest: p.release.manifest_digest,
    dispatch: p.release.dispatch,
    ...run,
    sha: SHA,
    tool: p.tool,
  });
  const url = `/v1/releases/step-runs/${p.step_run_id}`;
  const r1 = await engine.app.request(`${url}/preflight`, {
    method: "POST",
    headers: { "content-type": "application/json", ...signBody(SECRET, pre) },
    body: pre,
  });
  if (r1.status !== 200) return null;
  const cb = JSON.stringify({
    step_run_id: p.step_run_id,
    ...run,
    status: "succeeded",
    overall: "pass",
    checks: [{ name: "health", status: "passed", exit_code: 0, duration_ms: 12 }],
    log: "pulled\nstarted\nhealthy\nstopped old\n",
    log_truncated: false,
    timings: {},
  });
  return async () => {
    const t0 = performance.now();
    const r2 = await engine.app.request(`${url}/callback`, {
      method: "POST",
      headers: { "content-type": "application/json", ...signBody(SECRET, cb) },
      body: cb,
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
    const done = await store.listReleases({ state: "succeeded", limit: 200 });
    if (done.length >= n) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`[bench] releases did not all succeed within ${limitMs} ms`);
}

interface RawUpdater {
  update(id: string, version: number, now: number): Promise<number>;
  close(): Promise<void>;
}

async function bench(
  name: "sqlite" | "postgres",
  store: Store,
  raw: RawUpdater,
  dir: string,
): Promise<Record<string, unknown>> {
  const dispatcher = new MemoryDispatcher();
  const engine = await createEngine(config(dir), {
    store,
    dispatcher,
    controlPlane: new PerReleaseControlPlane(),
    eagerReconcile: true,
    reconciler: { batch: 256, maxPasses: 8, maxInFlight: 512 },
    log: { info() {}, warn() {}, error: (m, e) => console.error(m, e) },
  });

  // 1. Sequential: one release, each callback alone; then raw conditional updates.
  const seq: number[] = [];
  let pending: DispatchPayload[] = [];
  dispatcher.onAccepted((p) => pending.push(p));
  const first = await createRelease(engine);
  for (let i = 0; i < 200; i++) {
    await engine.service.tick();
    const batch = pending;
    pending = [];
    for (const p of batch) {
      const send = await runner(engine, p);
      if (send) seq.push(await send());
    }
    const r = await store.getRelease(first);
    if (r?.state === "succeeded") break;
  }
  const rel = await store.getRelease(first);
  if (rel?.state !== "succeeded") throw new Error(`[bench] warm-up release is ${rel?.state}`);
  let version = rel.resource_version;
  const rawMs: number[] = [];
  for (let i = 0; i < RAW_UPDATES; i++) {
    const t0 = performance.now();
    const n = await raw.update(first, version, Date.now());
    rawMs.push(performance.now() - t0);
    if (n !== 1) throw new Error("[bench] raw conditional update matched no row");
    version++;
  }

  // 2. Load: 100 concurrent releases. Runners preflight at once and hold their callbacks;
  // the held callbacks go out together (a burst of up to 100 concurrent signed callbacks)
  // once every release waits on one, or nothing new arrived for 100 ms.
  const lat: number[] = [];
  const held: (() => Promise<number>)[] = [];
  const inflight: Promise<void>[] = [];
  let lastHeld = performance.now();
  let burstMs = 0;
  let bursts = 0;
  dispatcher.onAccepted((p) => {
    if (p.release.id === first) return;
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
  const t0 = performance.now();
  await Promise.all(Array.from({ length: RELEASES }, () => createRelease(engine)));
  await waitAll(store, RELEASES + 1, 300_000);
  done = true;
  await coordinator;
  await Promise.all(inflight);
  const wall = performance.now() - t0;
  console.error(
    `[bench] ${name}: ${bursts} bursts; reconciler ${JSON.stringify(engine.service.reconciler.stats)}`,
  );
  await engine.close();
  await raw.close();

  const seqP50 = pct(seq, 50);
  const rawP50 = pct(rawMs, 50);
  return {
    store: name,
    releases: RELEASES,
    callbacks: lat.length,
    callbacks_per_s: Math.round(lat.length / (burstMs / 1000)),
    p50_ms: round(pct(lat, 50)),
    p99_ms: round(pct(lat, 99)),
    transition_p50_ms: round(seqP50),
    raw_update_p50_ms: round(rawP50, 4),
    overhead_ratio: round(seqP50 / rawP50, 2),
    drive_wall_ms: Math.round(wall),
    end_to_end_callbacks_per_s: Math.round(lat.length / (wall / 1000)),
    transport: "in-process app.request",
  };
}

async function sqliteRun() {
  const dir = mkdtempSync(path.join(tmpdir(), "baton-bench-"));
  try {
    const store = await openStore({ dataDir: dir });
    const db = new Database(path.join(dir, "baton.sqlite"));
    db.pragma("busy_timeout = 5000");
    const stmt = db.prepare(
      "UPDATE releases SET resource_version = resource_version + 1, updated_at = ? WHERE id = ? AND resource_version = ?",
    );
    const raw: RawUpdater = {
      update: async (id, v, now) => stmt.run(now, id, v).changes,
      close: async () => {
        db.close();
      },
    };
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
  try {
    const store = openPostgresStore({ connectionString: url, schema, max: 10 });
    await store.migrate();
    const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
    await client.connect();
    const raw: RawUpdater = {
      update: async (id, v, now) =>
        (
          await client.query(
            "UPDATE releases SET resource_version = resource_version + 1, updated_at = $1 WHERE id = $2 AND resource_version = $3",
            [now, id, v],
          )
        ).rowCount ?? 0,
      close: async () => {
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await client.end();
      },
    };
    const r = await bench("postgres", store, raw, dir);
    await store.close();
    return r;
  } finally {
    rmSync(dir, { recursive: true, force: true });
    if (started) execFileSync("scripts/ci/pg-stop.sh", [started]);
  }
}

const results = [await sqliteRun(), await postgresRun()];
for (const r of results) console.log(`RESULT ${JSON.stringify(r)}`);
