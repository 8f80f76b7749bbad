/**
 * Peer benchmark (`npm run bench:peer`): Baton's engine and DBOS Transact, the durable-workflow
 * library a TypeScript engineer would otherwise pick for a saga on Postgres, driving the same
 * release on the same Postgres server, in alternating rounds. How each side is set up is in
 * bench/support/peer-baton.ts and bench/support/peer-dbos.ts, and in docs/engine.md
 * "Benchmark against a peer".
 *
 * Each round runs both sides, one after the other (Baton first in even rounds, DBOS first in
 * odd ones), each in a process of its own with a fresh database of its own on the same server.
 * A side first drives `BENCH_PEER_WARMUP` releases (default 5, untimed), then `BENCH_PEER_RELEASES`
 * releases (default 100) started at once and driven to `succeeded` by the same simulated
 * runners (bench/support/release-world.ts). Over that timed span:
 *
 *   steps_per_s          steps of the timed releases (26 each) ÷ wall time from the first start
 *                        request to the last release succeeded
 *   node_cpu_ms_per_step the side's process CPU (user + system, `process.cpuUsage`) ÷ steps:
 *                        the engine, the HTTP handling, the simulated runners and control plane
 *   pg_cpu_ms_per_step   CPU of the Postgres backends serving the side's database (from
 *                        /proc/<pid>/stat of each backend `pg_stat_activity` lists for it,
 *                        sampled every 100 ms) ÷ steps; the server's background processes
 *                        (WAL writer, checkpointer, autovacuum) are not in it
 *   statements_per_step  statements Postgres ran in the side's database (`pg_stat_statements`,
 *                        top level, reset for that database before the span) ÷ steps
 *
 * The RESULT's ratios are Baton ÷ DBOS per round, then the median over rounds. Required:
 * `steps_per_s_ratio` ≥ 1.5 (`BENCH_PEER_MIN_STEPS_RATIO`; 1.0 at CI size) and `node_cpu_per_step_ratio` ≤ 1.0, and Baton's own
 * `statements_per_step` ≤ 2.6 in its least round (`baton_statements_per_step_min`, a work-count
 * budget: load only adds statements, a code change raises every round); the benchmark exits 1
 * otherwise, saying which. Postgres: BATON_TEST_DATABASE_URL when its server preloads
 * pg_stat_statements; otherwise a throwaway cluster (scripts/ci/pg-start.sh, with
 * BATON_PG_OPTIONS preloading it) on BENCH_PEER_PG_PORT (default 55441, next ones if taken).
 * `BENCH_PEER_ROUNDS` (default 5, at least 1), `BENCH_PEER_TIMEOUT_MS` (per side and round,
 * default 300 s). `load_avg_1m` is the 1-minute load average when each run ended: the machine
 * (2 cores) may be shared, so read the figures with it.
 * Last line: `RESULT {"ok",…,"problems",…,"steps_per_s_ratio",…,"rounds",…}`.
 */
import { execFileSync, fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import pg from "pg";
import type { SideFigures } from "./support/peer-side.ts";

const RELEASES = Number(process.env.BENCH_PEER_RELEASES ?? 100);
const WARMUP = Number(process.env.BENCH_PEER_WARMUP ?? 5);
const ROUNDS = Math.max(1, Number(process.env.BENCH_PEER_ROUNDS ?? 5));
const TIMEOUT_MS = Number(process.env.BENCH_PEER_TIMEOUT_MS ?? 300_000);
/**
 * What Baton must show against the peer (medians of per-round ratios), and its own work-count
 * budget: statements per step (measured 2.18-2.21; one more statement per commit would add
 * about 1.6: a release of 26 steps makes 42 commits).
 */
const REQUIRED = {
  // BENCH_PEER_MIN_STEPS_RATIO: CI size asks only that Baton is not behind the peer (1.0);
  // one or two rounds on a shared machine put the ratio anywhere in 1.18-2.35 (at a load of 2
  // to 17; scripts/ci/sizes.sh).
  steps_per_s_ratio: Number(process.env.BENCH_PEER_MIN_STEPS_RATIO ?? 1.5),
  node_cpu_per_step_ratio: 1.0,
};
// 2.26 measured before kill switches, incidents, drills and requalification joined the path
// (one read of the kill-switch book per capability write and per recovery verification; the
// incident, drill and dependency books read at each start): 2.46 after. A rise past this is a
// regression to explain.
const BATON_STATEMENTS_PER_STEP = 2.6;
const TICK_MS = 1000 / 100; // USER_HZ of /proc/<pid>/stat

type SideName = "baton" | "dbos";
const SCRIPTS: Record<SideName, string> = {
  baton: path.join(import.meta.dirname, "support/peer-baton.ts"),
  dbos: path.join(import.meta.dirname, "support/peer-dbos.ts"),
};

interface RunFigures {
  side: SideName;
  round: number;
  steps: number;
  steps_per_s: number;
  node_cpu_ms_per_step: number;
  pg_cpu_ms_per_step: number;
  statements_per_step: number;
  load_avg_1m: number;
}

const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** CPU ms (user + system) of a process from /proc/<pid>/stat; null when it is gone. */
function cpuMsOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) * TICK_MS;
  } catch {
    return null;
  }
}

/**
 * Follows the CPU time of the backends of one database: every `everyMs` it lists them
 * (`pg_stat_activity`) and reads each one's CPU; a backend's last reading stands once it is
 * gone. `stop()` returns the CPU ms they used since `start`.
 */
async function backendCpu(admin: pg.Client, datid: number, everyMs = 100) {
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  const sample = async () => {
    const { rows } = await admin.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datid = $1",
      [datid],
    );
    for (const { pid } of rows) {
      const ms = cpuMsOf(pid);
      if (ms === null) continue;
      if (!first.has(pid)) first.set(pid, started ? 0 : ms);
      last.set(pid, ms);
    }
  };
  let started = false;
  await sample();
  started = true;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await new Promise((r) => setTimeout(r, everyMs));
      await sample();
    }
  })();
  return async () => {
    stopped = true;
    await loop;
    await sample();
    let ms = 0;
    for (const [pid, end] of last) ms += end - (first.get(pid) ?? 0);
    return ms;
  };
}

/** A Postgres server with pg_stat_statements preloaded: the given one, or a throwaway one. */
function postgres(): { url: string; stop: () => void } {
  const given = process.env.BATON_TEST_DATABASE_URL;
  if (given) {
    const preload = execFileSync("psql", [given, "-Atc", "SHOW shared_preload_libraries"], {
      encoding: "utf8",
    });
    if (preload.includes("pg_stat_statements")) return { url: given, stop: () => {} };
    console.error(
      "[bench] BATON_TEST_DATABASE_URL's server does not preload pg_stat_statements; starting a throwaway cluster",
    );
  }
  const first = Number(process.env.BENCH_PEER_PG_PORT ?? 55441);
  let lastErr: unknown;
  for (let port = first; port < first + 5; port++) {
    try {
      const out = execFileSync("scripts/ci/pg-start.sh", [String(port)], {
        encoding: "utf8",
        env: {
          ...process.env,
          BATON_PG_OPTIONS: "-c shared_preload_libraries=pg_stat_statements",
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      const url = /BATON_TEST_DATABASE_URL=(\S+)/.exec(out)?.[1];
      const dir = /BATON_PG_DIR=(\S+)/.exec(out)?.[1];
      if (!url || !dir) throw new Error(`scripts/ci/pg-start.sh printed no URL: ${out}`);
      return { url, stop: () => execFileSync("scripts/ci/pg-stop.sh", [dir]) };
    } catch (e) {
      lastErr = e;
    }
  }
  throw new Error(
    `[bench] could not start Postgres with scripts/ci/pg-start.sh: ${String(lastErr)}`,
  );
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Runs one side once: a fresh database, warm-up, then the timed releases under observation. */
async function runSide(
  admin: pg.Client,
  url: string,
  side: SideName,
  r: number,
): Promise<RunFigures> {
  const db = `baton_peer_${side}_${process.pid}_${r}`;
  await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${db}`);
  const datid = Number(
    (await admin.query<{ oid: number }>("SELECT oid FROM pg_database WHERE datname = $1", [db]))
      .rows[0]?.oid,
  );
  const child = fork(SCRIPTS[side], {
    env: {
      ...process.env,
      PEER_DATABASE_URL: withDatabase(url, db),
      PEER_RELEASES: String(RELEASES),
      PEER_WARMUP: String(WARMUP),
      PEER_TIMEOUT_MS: String(TIMEOUT_MS),
      NO_COLOR: "1",
    },
    stdio: ["ignore", "pipe", "inherit", "ipc"],
  });
  // What the sides print (DBOS's start-up lines) goes to stderr: stdout carries the RESULT.
  child.stdout?.on("data", (b: Buffer) => process.stderr.write(b));
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const next = () =>
    new Promise<{ ready?: true; done?: SideFigures; error?: string }>((resolve, reject) => {
      const onExit = (code: number | null) =>
        reject(new Error(`[bench] ${side} exited (${code}) before answering`));
      child.once("exit", onExit);
      child.once("message", (m) => {
        child.off("exit", onExit);
        resolve(m as { ready?: true; done?: SideFigures; error?: string });
      });
    });
  try {
    const ready = await next();
    if (ready.error) throw new Error(`[bench] ${side} failed during warm-up: ${ready.error}`);
    await admin.query("SELECT pg_stat_statements_reset(0, $1::oid, 0)", [datid]);
    const stopCpu = await backendCpu(admin, datid);
    child.send("go");
    const m = await next();
    const pgCpuMs = await stopCpu();
    if (!m.done) throw new Error(`[bench] ${side} failed: ${m.error ?? "no figures"}`);
    const { rows } = await admin.query<{ calls: string }>(
      "SELECT coalesce(sum(calls), 0) AS calls FROM pg_stat_statements WHERE dbid = $1",
      [datid],
    );
    child.send("close");
    await exited;
    const f = m.done;
    return {
      side,
      round: r,
      steps: f.steps,
      steps_per_s: round(f.steps / (f.wall_ms / 1000), 1),
      node_cpu_ms_per_step: round(f.node_cpu_ms / f.steps, 4),
      pg_cpu_ms_per_step: round(pgCpuMs / f.steps, 4),
      statements_per_step: round(Number(rows[0]?.calls ?? 0) / f.steps, 2),
      load_avg_1m: round(loadavg()[0] ?? Number.NaN, 2),
    };
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
    await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`).catch(() => {});
  }
}

const server = postgres();
const admin = new pg.Client({ connectionString: withDatabase(server.url, "postgres") });
let failed = false;
try {
  await admin.connect();
  await admin.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
  const runs: RunFigures[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const order: SideName[] = r % 2 === 0 ? ["baton", "dbos"] : ["dbos", "baton"];
    for (const side of order) {
      const f = await runSide(admin, server.url, side, r);
      console.error(`[bench] ${JSON.stringify(f)}`);
      runs.push(f);
    }
  }
  const ratio = (field: keyof RunFigures) =>
    round(
      median(
        Array.from({ length: ROUNDS }, (_, r) => {
          const b = runs.find((x) => x.round === r && x.side === "baton")!;
          const d = runs.find((x) => x.round === r && x.side === "dbos")!;
          return (b[field] as number) / (d[field] as number);
        }),
      ),
      2,
    );
  const med = (side: SideName, field: keyof RunFigures) =>
    round(median(runs.filter((x) => x.side === side).map((x) => x[field] as number)), 4);
  const result = {
    steps_per_s_ratio: ratio("steps_per_s"),
    node_cpu_per_step_ratio: ratio("node_cpu_ms_per_step"),
    pg_cpu_per_step_ratio: ratio("pg_cpu_ms_per_step"),
    statements_per_step: [med("baton", "statements_per_step"), med("dbos", "statements_per_step")],
    // The work count judged: load only adds statements (passes that find nothing, retried
    // writes), and a change to the code raises every round, so the least round is the count.
    baton_statements_per_step_min: Math.min(
      ...runs.filter((x) => x.side === "baton").map((x) => x.statements_per_step),
    ),
    rounds: ROUNDS,
    releases_per_round: RELEASES,
    steps_per_release: runs[0]?.steps ? runs[0].steps / RELEASES : null,
    steps_per_s: [med("baton", "steps_per_s"), med("dbos", "steps_per_s")],
    node_cpu_ms_per_step: [
      med("baton", "node_cpu_ms_per_step"),
      med("dbos", "node_cpu_ms_per_step"),
    ],
    pg_cpu_ms_per_step: [med("baton", "pg_cpu_ms_per_step"), med("dbos", "pg_cpu_ms_per_step")],
    load_avg_1m: [
      Math.min(...runs.map((x) => x.load_avg_1m)),
      Math.max(...runs.map((x) => x.load_avg_1m)),
    ],
  };
  const short: string[] = [];
  if (!(result.steps_per_s_ratio >= REQUIRED.steps_per_s_ratio)) {
    short.push(`steps_per_s_ratio ${result.steps_per_s_ratio} < ${REQUIRED.steps_per_s_ratio}`);
  }
  if (!(result.node_cpu_per_step_ratio <= REQUIRED.node_cpu_per_step_ratio)) {
    short.push(
      `node_cpu_per_step_ratio ${result.node_cpu_per_step_ratio} > ${REQUIRED.node_cpu_per_step_ratio}`,
    );
  }
  const batonStatements = result.baton_statements_per_step_min;
  if (!(batonStatements <= BATON_STATEMENTS_PER_STEP)) {
    short.push(
      `Baton's statements_per_step ${batonStatements} in its least round > ${BATON_STATEMENTS_PER_STEP}`,
    );
  }
  console.log(`RESULT ${JSON.stringify({ ok: short.length === 0, problems: short, ...result })}`);
  if (short.length > 0) {
    console.error(`[bench] Baton misses what it must show: ${short.join("; ")}`);
    failed = true;
  }
} catch (e) {
  console.error((e as Error).message);
  failed = true;
} finally {
  await admin.end().catch(() => {});
  server.stop();
}
process.exit(failed ? 1 : 0);
