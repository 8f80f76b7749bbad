/**
 * Engines benchmark (`npm run bench:engines`): the same
 * work driven through 1, 2 and 3 engine processes on one Postgres database.
 *
 * For each engine count, on a fresh database of one Postgres server (BATON_TEST_DATABASE_URL,
 * or a throwaway cluster started with scripts/ci/pg-start.sh): `BENCH_ENGINES_RELEASES`
 * (default 150) releases of a one-lane recipe (7 steps: 2 runner steps, 5 control-plane
 * steps) are started at once, spread over the engines, and driven to `succeeded`. Each engine
 * is its own Node process (test/support/chaos-engine.ts: the engine's Node entry with the
 * GitHub dispatcher), dispatching through a GitHub stand-in to a driver that plays the
 * runners: it preflights as soon as a dispatch arrives and calls back at once, each request
 * to the engine its release id hashes to (the recommended load balancer, docs/engine.md
 * "Several engines on one database"; starts go to the next engine in turn). The engine counts
 * in `BENCH_ENGINES_ROUND_ROBIN` (default "3"; "" for none) run once more with every request
 * to the next engine in turn (`round_robin` in the RESULT line). Control-plane steps go to
 * the reference control plane over HTTP.
 *
 *   callbacks_per_s   runner callbacks answered 200 ÷ wall time from the first start to the
 *                     last release `succeeded` (everything the release needs is in that time:
 *                     dispatches, preflights, control-plane steps, the outbox)
 *   cpu_ms_per_callback   CPU time (user + system) per callback of the engine processes
 *                     (`engines`), of the Postgres server (`postgres`: its processes, /proc),
 *                     of the stand-ins' process (`standins`: the control plane and the GitHub
 *                     stand-in, bench/support/engines-standins.ts) and of this driver process
 *                     (`driver`: the runners' preflights and callbacks, HMAC and HTTP)
 *   machine_busy_pct  share of the machine's CPU time (all cores, /proc/stat) busy during the
 *                     run, whoever used it: the machine may be shared
 *
 * `load_avg_1m` is the 1-minute load average at the end of each run. With
 * `BENCH_ENGINES_CPU_PROF_DIR=<dir>` each engine process writes a V8 CPU profile
 * (`node --cpu-prof`) under `<dir>/engines-<count>/` when it stops. Bounded: each run at most
 * BENCH_ENGINES_TIMEOUT_MS (default 300 s; a run that does not finish reports
 * `"complete":false`). Last line: `RESULT {"engines":[1,2,3],"callbacks_per_s":[a,b,c],…}`.
 */
import { execFileSync, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { signBody } from "../engine/src/protocol/credential.ts";
import { payloadDigestOf } from "../engine/src/protocol/payload-digest.ts";
import { type EngineProcess, spawnEngineOnFreshPort } from "../test/support/chaos-process.ts";
import { type OneLaneFleet, oneLaneRecipe } from "../test/support/one-lane-fleet.ts";
import type { PayloadLike } from "../test/support/preflight-request.ts";

const RELEASES = Math.min(200, Number(process.env.BENCH_ENGINES_RELEASES ?? 150));
const COUNTS = (process.env.BENCH_ENGINES_COUNTS ?? "1,2,3").split(",").map(Number);
/** Engine counts run a second time with round-robin routing ("" for none). */
const RR_COUNTS = (process.env.BENCH_ENGINES_ROUND_ROBIN ?? "3")
  .split(",")
  .filter((x) => x.trim() !== "")
  .map(Number);
const TIMEOUT_MS = Number(process.env.BENCH_ENGINES_TIMEOUT_MS ?? 300_000);
const PROFILE_DIR = process.env.BENCH_ENGINES_CPU_PROF_DIR;
const TICKS = 1000 / 100; // USER_HZ of /proc/<pid>/stat (100 on Linux)

const FLEET: OneLaneFleet = { name: "bench", lane: "b" };

/** Fields after the command name of /proc/<pid>/stat (index 0 = state); null when gone. */
function statOf(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

/** CPU ms (user + system) of a process, from /proc/<pid>/stat; 0 when it is gone. */
function cpuMsOf(pid: number): number {
  const f = statOf(pid);
  return f ? (Number(f[11]) + Number(f[12])) * TICKS : 0;
}

/**
 * CPU ms of a Postgres server: the postmaster's own and its exited children's (cutime,
 * cstime), plus each live child's (backends, background workers).
 */
function postgresCpuMs(postmaster: number): number {
  const f = statOf(postmaster);
  if (!f) return 0;
  let ms = (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * TICKS;
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    const c = statOf(Number(d));
    if (c && Number(c[1]) === postmaster) ms += (Number(c[11]) + Number(c[12])) * TICKS;
  }
  return ms;
}

/** Busy and total jiffies of the whole machine (/proc/stat first line). */
function machineTicks(): { busy: number; total: number } {
  const f = readFileSync("/proc/stat", "utf8")
    .split("\n")[0]!
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  return { busy: total - idle, total };
}

/** How the driver spreads a release's requests over the engines. */
type Routing = "release" | "round-robin";

interface RunFigures {
  engines: number;
  routing: Routing;
  complete: boolean;
  releases: number;
  callbacks: number;
  wall_ms: number;
  callbacks_per_s: number;
  cpu_ms_per_callback: { engines: number; postgres: number; standins: number; driver: number };
  engine_cpu_pct: number[];
  postgres_cpu_pct: number;
  standins_cpu_pct: number;
  driver_cpu_pct: number;
  machine_busy_pct: number;
  conflicts: { resource_version: number; outbox_claim: number };
  load_avg_1m: number;
  start_retries: number;
}

/** FNV-1a of a string (what a load balancer's `hash` on a path segment stands for). */
function hashOf(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

async function run(base: string, n: number, routing: Routing): Promise<RunFigures> {
  const name = `baton_bench_engines_${process.pid}_${n}_${routing === "release" ? "r" : "rr"}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  const u = new URL(base);
  u.pathname = `/${name}`;
  const root = mkdtempSync(join(tmpdir(), "baton-bench-engines-"));
  const db = new pg.Client({ connectionString: u.toString() });
  const secret = randomBytes(24).toString("hex");
  const operatorToken = randomBytes(24).toString("hex");
  const token = `ghp_${randomBytes(18).toString("hex")}`;
  const engines: EngineProcess[] = [];
  let next = 0;
  /**
   * The engine a request goes to: with `release` routing, the one its release id hashes to
   * (as a load balancer hashing on the path would, docs/engine.md "Several engines"), the
   * next on a retry; with `round-robin` routing, the next in turn.
   */
  const pick = (releaseId?: string, attempt = 0) =>
    routing === "release" && releaseId
      ? engines[(hashOf(releaseId) + attempt) % engines.length]!
      : engines[next++ % engines.length]!;
  let callbacks = 0;
  const problems: string[] = [];
  const inflight = new Set<Promise<unknown>>();

  /** POSTs a signed body to the next engine; on no answer or 5xx, to the next (bounded). */
  const post = async (path: string, body: unknown, releaseId: string) => {
    const bytes = Buffer.from(JSON.stringify(body));
    for (let i = 0; i < 10; i++) {
      try {
        const res = await fetch(`${pick(releaseId, i).url}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", ...signBody(secret, bytes) },
          body: bytes,
          signal: AbortSignal.timeout(30_000),
        });
        const text = await res.text();
        if (res.status < 500) return { status: res.status, text };
      } catch {
        // no answer: try the next engine
      }
      await new Promise((r) => setTimeout(r, 100 * (i + 1)));
    }
    return { status: 0, text: "" };
  };
  let runSeq = 1000;
  const playRun = async (p: Record<string, unknown>) => {
    const release = p.release as Record<string, unknown>;
    const runId = String(++runSeq);
    const srId = String(p.step_run_id);
    const pre = await post(
      `/v1/releases/step-runs/${srId}/preflight`,
      {
        step_run_id: srId,
        release_id: release.id,
        generation: release.generation,
        manifest_digest: release.manifest_digest,
        dispatch: release.dispatch,
        run_id: runId,
        run_attempt: 1,
        sha: "0000000",
        tool: p.tool,
        payload_digest: payloadDigestOf(p as unknown as PayloadLike),
      },
      String(release.id),
    );
    if (pre.status !== 200) {
      problems.push(`preflight of ${srId}: HTTP ${pre.status} ${pre.text.slice(0, 200)}`);
      return;
    }
    const cb = await post(
      `/v1/releases/step-runs/${srId}/callback`,
      {
        step_run_id: srId,
        run_id: runId,
        run_attempt: 1,
        status: "succeeded",
        overall: "pass",
        checks: [{ name: String(p.tool), status: "ok" }],
        log: `bench driver ran ${String(p.tool)}\n`,
      },
      String(release.id),
    );
    if (cb.status === 200) callbacks += 1;
    else problems.push(`callback of ${srId}: HTTP ${cb.status} ${cb.text.slice(0, 200)}`);
  };
  // The control plane and the GitHub stand-in run in a process of their own (their CPU is
  // measured apart); each accepted dispatch comes back over IPC and is played here.
  const standins = fork(join(import.meta.dirname, "support/engines-standins.ts"), {
    env: {
      ...process.env,
      STANDINS_FLEET: JSON.stringify(FLEET),
      STANDINS_LANES: String(RELEASES),
      STANDINS_TOKEN: token,
    },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const standinsGone = new Promise<void>((ok) => standins.once("exit", () => ok()));
  const { cpUrl, cpWriteToken, githubBaseUrl } = await new Promise<{
    cpUrl: string;
    cpWriteToken: string;
    githubBaseUrl: string;
  }>((ok, fail) => {
    const t = setTimeout(() => fail(new Error("[bench:engines] stand-ins did not start")), 120_000);
    standins.once("exit", (code) => fail(new Error(`[bench:engines] stand-ins exited ${code}`)));
    standins.on("message", (m: { ready?: never; dispatch?: Record<string, unknown> }) => {
      if (m.ready) {
        clearTimeout(t);
        ok(m.ready);
      }
      if (m.dispatch) {
        const task = playRun(m.dispatch).catch((e: Error) => problems.push(e.message));
        inflight.add(task);
        void task.finally(() => inflight.delete(task));
      }
    });
  });
  try {
    for (let i = 0; i < n; i++) {
      engines.push(
        await spawnEngineOnFreshPort(
          {
            DATABASE_URL: u.toString(),
            BATON_CALLBACK_SECRETS: secret,
            BATON_OPERATOR_TOKEN: operatorToken,
            BATON_ADMISSION: "off",
            BATON_CONTROL_PLANE_URL: cpUrl,
            BATON_CONTROL_PLANE_TOKEN: cpWriteToken,
            GITHUB_REPOSITORY: "acme/models",
            GITHUB_TOKEN: token,
            // This measures the engines, not GitHub's limits (test/integration/github-pacing).
            BATON_GITHUB_DISPATCH_PER_MINUTE: "100000",
            BATON_GITHUB_DISPATCH_PER_HOUR: "1000000",
            CHAOS_GITHUB_API_URL: githubBaseUrl,
            CHAOS_LEASE_MS: "60000",
            CHAOS_OWNER: `engine-${i + 1}`,
            BATON_TICK_MS: "200",
          },
          120_000,
          PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}/engines-${n}`] : [],
        ),
      );
    }
    const backend = (await admin.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!
      .pid;
    const postmaster = Number(statOf(backend)?.[1] ?? 0);
    const pg0 = postgresCpuMs(postmaster);
    await db.connect();
    const cpu0 = engines.map((e) => cpuMsOf(e.child.pid ?? 0));
    const standins0 = cpuMsOf(standins.pid ?? 0);
    const driver0 = process.cpuUsage();
    const m0 = machineTicks();
    const t0 = performance.now();
    const ids: string[] = [];
    const todo = Array.from({ length: RELEASES }, (_, i) => i);
    let startRetries = 0;
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        for (let i = todo.shift(); i !== undefined; i = todo.shift()) {
          // A 503 wrote nothing ("start again"): a busy machine may make the control plane's
          // baseline read or the store time out; try again, at most 5 times.
          for (let t = 1; ; t++) {
            const res = await fetch(`${pick().url}/v1/releases`, {
              method: "POST",
              headers: {
                "content-type": "application/json",
                authorization: `Bearer ${operatorToken}`,
              },
              body: JSON.stringify(oneLaneRecipe(FLEET, i)),
            });
            const body = (await res.json()) as { id?: string };
            if (res.status === 201 && body.id) {
              ids.push(body.id);
              break;
            }
            if (res.status !== 503 || t >= 5)
              throw new Error(`[bench:engines] start: HTTP ${res.status} ${JSON.stringify(body)}`);
            startRetries += 1;
            await new Promise((r) => setTimeout(r, 500 * t));
          }
        }
      }),
    );
    let complete = false;
    let wallMs = 0;
    const until = Date.now() + TIMEOUT_MS;
    for (let i = 0; Date.now() < until && i < TIMEOUT_MS / 100; i++) {
      // Read from the database, so that watching costs the engines nothing.
      const states = (
        await db.query<{ state: string; n: string }>(
          "SELECT state, count(*) AS n FROM releases GROUP BY state",
        )
      ).rows;
      const count = (st: string[]) =>
        states.filter((r) => st.includes(r.state)).reduce((a, r) => a + Number(r.n), 0);
      if (count(["succeeded"]) === ids.length) {
        complete = true;
        wallMs = performance.now() - t0;
        break;
      }
      const bad = count(["rolled_back", "aborted", "needs_operator", "abandoned"]);
      if (bad > 0) {
        problems.push(`${bad} releases ended without success`);
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    if (!complete) wallMs = performance.now() - t0;
    const driver = process.cpuUsage(driver0);
    const m1 = machineTicks();
    const engineMs = engines.map((e, i) => cpuMsOf(e.child.pid ?? 0) - (cpu0[i] ?? 0));
    const pgMs = postgresCpuMs(postmaster) - pg0;
    const standinsMs = cpuMsOf(standins.pid ?? 0) - standins0;
    const driverMs = (driver.user + driver.system) / 1000;
    const stats = await Promise.all(
      engines.map(async (e) => {
        const res = await fetch(`${e.url}/chaos/stats`).catch(() => null);
        return (res ? await res.json() : {}) as Record<string, number>;
      }),
    );
    const sum = (k: string) => stats.reduce((a, s) => a + (s[k] ?? 0), 0);
    const per = (ms: number) => Math.round((ms / Math.max(1, callbacks)) * 100) / 100;
    const pct = (ms: number) => Math.round((ms / wallMs) * 100);
    for (const p of problems.slice(0, 5)) console.error(`[bench:engines] ${p}`);
    return {
      engines: n,
      routing,
      complete,
      releases: ids.length,
      callbacks,
      wall_ms: Math.round(wallMs),
      callbacks_per_s: Math.round((callbacks / wallMs) * 1000 * 10) / 10,
      cpu_ms_per_callback: {
        engines: per(engineMs.reduce((a, b) => a + b, 0)),
        postgres: per(pgMs),
        standins: per(standinsMs),
        driver: per(driverMs),
      },
      engine_cpu_pct: engineMs.map(pct),
      postgres_cpu_pct: pct(pgMs),
      standins_cpu_pct: pct(standinsMs),
      driver_cpu_pct: pct(driverMs),
      machine_busy_pct: Math.round(((m1.busy - m0.busy) / Math.max(1, m1.total - m0.total)) * 100),
      conflicts: { resource_version: sum("resource_version"), outbox_claim: sum("outbox_claim") },
      load_avg_1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
      start_retries: startRetries,
    };
  } finally {
    for (const e of engines) await e.stop();
    await db.end().catch(() => {});
    await Promise.allSettled([...inflight]);
    standins.send("close");
    await Promise.race([standinsGone, new Promise((r) => setTimeout(r, 10_000))]);
    standins.kill("SIGKILL");
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    await admin.end();
    rmSync(root, { recursive: true, force: true });
  }
}

let base = process.env.BATON_TEST_DATABASE_URL;
let started: string | null = null;
if (!base) {
  const out = execFileSync("scripts/ci/pg-start.sh", ["55441"], { encoding: "utf8" });
  base = /BATON_TEST_DATABASE_URL=(\S+)/.exec(out)?.[1];
  started = /BATON_PG_DIR=(\S+)/.exec(out)?.[1] ?? null;
  if (!base)
    throw new Error("[bench:engines] could not start Postgres with scripts/ci/pg-start.sh");
}
const runs: RunFigures[] = [];
const rrRuns: RunFigures[] = [];
try {
  for (const n of COUNTS) {
    const r = await run(base, n, "release");
    console.error(`[bench:engines] ${JSON.stringify(r)}`);
    runs.push(r);
  }
  for (const n of RR_COUNTS) {
    const r = await run(base, n, "round-robin");
    console.error(`[bench:engines] ${JSON.stringify(r)}`);
    rrRuns.push(r);
  }
} finally {
  if (started) execFileSync("scripts/ci/pg-stop.sh", [started]);
}
console.log(
  `RESULT ${JSON.stringify({
    engines: runs.map((r) => r.engines),
    callbacks_per_s: runs.map((r) => r.callbacks_per_s),
    complete: runs.every((r) => r.complete),
    cpu_ms_per_callback: runs.map((r) => r.cpu_ms_per_callback),
    machine_busy_pct: runs.map((r) => r.machine_busy_pct),
    cores: cpus().length,
    load_avg_1m: runs.map((r) => r.load_avg_1m),
    conflicts: runs.map((r) => r.conflicts.resource_version),
    routing: "release",
    round_robin: {
      engines: rrRuns.map((r) => r.engines),
      callbacks_per_s: rrRuns.map((r) => r.callbacks_per_s),
      cpu_ms_per_callback: rrRuns.map((r) => r.cpu_ms_per_callback),
      conflicts: rrRuns.map((r) => r.conflicts.resource_version),
      load_avg_1m: rrRuns.map((r) => r.load_avg_1m),
    },
  })}`,
);
process.exit([...runs, ...rrRuns].every((r) => r.complete) ? 0 : 1);
