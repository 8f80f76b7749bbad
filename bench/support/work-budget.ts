/**
 * The work-count run behind the budgets (`bench/budgets.json`, `npm run check:budgets`,
 * docs/engine.md "Work-count budgets"). Deterministic: the benchmark release (26 steps, 8
 * runner steps) is driven on a real store by hand — the reconciler stepped with `tick()`, no
 * eager runs, a clock that moves only between steps — with the runners' preflights and
 * callbacks going through the HTTP app in process (routing, HMAC, parsing, service). One
 * release warms up; the next `releases` are counted. Counts per callback (whole drive ÷
 * callbacks: creation, control-plane steps, dispatches, preflights, ticks included):
 *
 *   statements        SQL statements the store's driver ran (Postgres: every `pg` query,
 *                     BEGIN/COMMIT of Kysely transactions included; SQLite: every prepared
 *                     statement run and `exec`; its BEGIN/COMMIT are not visible and not counted)
 *   commits           `Store.commit` calls (one conditional write of a transition each)
 *   claims            `Store.claimDue` calls
 *   deep_copies       deep copies of a release made by transitions (domain/work-counts.ts)
 *   copied_nodes      objects and arrays those copies allocated
 *   bytes_serialised  UTF-8 bytes of JSON text the store built to write
 *
 * Also timed (printed; only their ratio is checked): each callback request, and right after it
 * one raw conditional UPDATE of another release row on the same connection(s) (the fixed
 * reference workload of bench:engine), `callback_ratio` = p50 ÷ p50.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import { openPostgresStore } from "../../engine/src/adapters/postgres/postgres-store.ts";
import { openSqliteStore } from "../../engine/src/adapters/sqlite/sqlite-store.ts";
import { countWorkInto, emptyWorkCounts } from "../../engine/src/domain/work-counts.ts";
import { createEngine } from "../../engine/src/engine.ts";
import type { Clock } from "../../engine/src/ports/clock.ts";
import type { Store } from "../../engine/src/ports/store.ts";
import { signBody } from "../../engine/src/protocol/credential.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { type Domain, defaultDomain } from "../../engine/src/service/domain.ts";
import {
  benchConfig,
  benchRecipe,
  OPERATOR,
  PerReleaseControlPlane,
  runnerBodies,
  SECRET,
} from "./release-world.ts";

export type StoreKind = "sqlite" | "postgres";

/** Work per callback (see the header). */
export interface CallbackWork {
  statements: number;
  commits: number;
  claims: number;
  deep_copies: number;
  copied_nodes: number;
  bytes_serialised: number;
}

export interface WorkRun {
  store: StoreKind;
  callbacks: number;
  per_callback: CallbackWork;
  callback_p50_ms: number;
  raw_update_p50_ms: number;
  /** callback_p50_ms ÷ raw_update_p50_ms, measured interleaved in this process. */
  callback_ratio: number;
}

/** What a test may change to show a regression being caught (never used by the check). */
export interface Injection {
  /** Wraps the store the engine uses (e.g. one extra statement per commit). */
  store?: (store: Store, extraStatement: () => Promise<void>) => Store;
  /** Wraps the domain (e.g. an extra deep copy per transition). */
  domain?: (d: Domain) => Domain;
}

const RAW_SQL =
  "UPDATE releases SET resource_version = resource_version + 1, updated_at = $1 WHERE id = $2 AND resource_version = $3";

/** Counts statements run by the drivers while `on` (patched once per process). */
const statementCounter = { on: false, n: 0 };
let patched = false;

function patchDrivers(): void {
  if (patched) return;
  patched = true;
  const count = <F extends (...a: never[]) => unknown>(f: F): F =>
    function (this: unknown, ...args: Parameters<F>) {
      if (statementCounter.on) statementCounter.n++;
      return f.apply(this, args);
    } as F;
  const client = pg.Client.prototype as unknown as { query: (...a: never[]) => unknown };
  client.query = count(client.query);
  const probe = new Database(":memory:");
  const stmt = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<
    string,
    (...a: never[]) => unknown
  >;
  for (const m of ["run", "get", "all", "iterate"]) stmt[m] = count(stmt[m]!);
  const db = Database.prototype as unknown as { exec: (...a: never[]) => unknown };
  db.exec = count(db.exec);
  probe.close();
}

const pct50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

/**
 * Drives `1 + releases` benchmark releases on a fresh store of `kind` and returns the work per
 * callback of the last `releases`. Postgres needs `pgUrl` (a schema of its own is made and
 * dropped). `inject` is for tests that show the budget check failing.
 */
export async function measureWork(
  kind: StoreKind,
  o: { pgUrl?: string; releases?: number; inject?: Injection } = {},
): Promise<WorkRun> {
  patchDrivers();
  process.env.BATON_EXCLUSIVE_LANES = "off";
  const releases = o.releases ?? 2;
  const dir = mkdtempSync(path.join(tmpdir(), "baton-budget-"));
  const schema = `budget_${process.pid}_${Math.floor(Math.random() * 1e9)}`;
  let base: Store;
  let raw: (id: string, v: number) => Promise<number>;
  let extra: () => Promise<void>;
  let drop = async () => {};
  if (kind === "sqlite") {
    const s = openSqliteStore(path.join(dir, "baton.sqlite"));
    // Prepared on first use (the table exists only after `migrate`), then reused.
    let stmt: Database.Statement | null = null;
    raw = async (id, v) => {
      stmt ??= s.database.prepare(RAW_SQL.replace(/\$\d/g, "?"));
      return stmt.run(Date.now(), id, v).changes;
    };
    extra = async () => {
      s.database.prepare("SELECT 1").get();
    };
    base = s;
  } else {
    if (!o.pgUrl) throw new Error("[budgets] Postgres needs BATON_TEST_DATABASE_URL");
    const s = openPostgresStore({ connectionString: o.pgUrl, schema, max: 10 });
    raw = async (id, v) =>
      (await s.pool.query({ name: "bench_raw_update", text: RAW_SQL, values: [Date.now(), id, v] }))
        .rowCount ?? 0;
    extra = async () => {
      await s.pool.query("SELECT 1");
    };
    drop = async () => {
      await s.pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    };
    base = s;
  }
  await base.migrate();
  const calls = { commits: 0, claims: 0 };
  const counting = new Proxy(base, {
    get(target, p) {
      const v = Reflect.get(target, p, target);
      if (typeof v !== "function") return v;
      if (p === "commit") {
        return (...a: unknown[]) => {
          calls.commits++;
          return (v as (...a: unknown[]) => unknown).apply(target, a);
        };
      }
      if (p === "claimDue") {
        return (...a: unknown[]) => {
          calls.claims++;
          return (v as (...a: unknown[]) => unknown).apply(target, a);
        };
      }
      return v.bind(target);
    },
  }) as Store;
  const store = o.inject?.store ? o.inject.store(counting, extra) : counting;
  let t = Date.now();
  const clock: Clock = { now: () => t };
  const dispatcher = new MemoryDispatcher();
  let pending: DispatchPayload[] = [];
  dispatcher.onAccepted((p) => pending.push(p));
  const engine = await createEngine(benchConfig(dir), {
    store,
    dispatcher,
    controlPlane: new PerReleaseControlPlane(),
    clock,
    eagerReconcile: false,
    domain: o.inject?.domain ? o.inject.domain(defaultDomain) : defaultDomain,
    dashboard: false,
    log: { info() {}, warn() {}, error: (m, e) => console.error(m, e) },
  });
  const callbackMs: number[] = [];
  const rawMs: number[] = [];
  let rawRow: { id: string; version: number } | null = null;
  const post = async (url: string, body: string, headers: Record<string, string>) => {
    const res = await engine.app.request(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
    });
    const text = await res.text();
    if (res.status !== 200 && res.status !== 201) {
      throw new Error(`[budgets] ${url} answered ${res.status}: ${text}`);
    }
    return text;
  };
  const drive = async (timed: boolean) => {
    const created = await post("/v1/releases", JSON.stringify(benchRecipe()), {
      authorization: `Bearer ${OPERATOR}`,
    });
    const id = (JSON.parse(created) as { id: string }).id;
    let callbacks = 0;
    for (let i = 0; i < 400; i++) {
      t += 1;
      await engine.tick();
      const batch = pending;
      pending = [];
      for (const p of batch) {
        const { preflight, callback } = runnerBodies(p);
        const url = `/v1/releases/step-runs/${p.step_run_id}`;
        await post(`${url}/preflight`, preflight, signBody(SECRET, preflight));
        const headers = signBody(SECRET, callback);
        const t0 = performance.now();
        await post(`${url}/callback`, callback, headers);
        if (timed) callbackMs.push(performance.now() - t0);
        callbacks++;
        if (timed && rawRow) {
          statementCounter.on = false;
          const r0 = performance.now();
          if ((await raw(rawRow.id, rawRow.version)) !== 1) {
            throw new Error("[budgets] the raw conditional UPDATE matched no row");
          }
          rawMs.push(performance.now() - r0);
          rawRow.version++;
          statementCounter.on = true;
        }
      }
      // Whether the release is done: the harness's own read, left out of the count.
      const counted = statementCounter.on;
      statementCounter.on = false;
      const r = await base.getRelease(id);
      statementCounter.on = counted;
      if (r?.state === "succeeded") return { id, version: r.resource_version, callbacks };
      if (r && r.state !== "running")
        throw new Error(`[budgets] release ${id} is ${r.state}: ${r.reason}`);
    }
    throw new Error(`[budgets] release ${id} did not succeed in 400 ticks`);
  };
  try {
    const warm = await drive(false);
    rawRow = { id: warm.id, version: warm.version };
    const counts = emptyWorkCounts();
    calls.commits = 0;
    calls.claims = 0;
    statementCounter.n = 0;
    statementCounter.on = true;
    countWorkInto(counts);
    let callbacks = 0;
    try {
      for (let i = 0; i < releases; i++) callbacks += (await drive(true)).callbacks;
    } finally {
      countWorkInto(null);
      statementCounter.on = false;
    }
    const per = (n: number) => Math.round((n / callbacks) * 100) / 100;
    const p50 = pct50(callbackMs);
    const rawP50 = pct50(rawMs);
    return {
      store: kind,
      callbacks,
      per_callback: {
        statements: per(statementCounter.n),
        commits: per(calls.commits),
        claims: per(calls.claims),
        deep_copies: per(counts.deep_copies),
        copied_nodes: per(counts.copied_nodes),
        bytes_serialised: per(counts.bytes_serialised),
      },
      callback_p50_ms: Math.round(p50 * 1e4) / 1e4,
      raw_update_p50_ms: Math.round(rawP50 * 1e4) / 1e4,
      callback_ratio: Math.round((p50 / rawP50) * 100) / 100,
    };
  } finally {
    await engine.close();
    await drop().catch(() => {});
    await base.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
