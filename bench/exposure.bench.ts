/**
 * Exposure benchmark (docs/guarantees.md "Exposure, baseline and read-back"): drives
 * BATON_EXPOSURE_RELEASES (default 200) generated releases with failures (runner failures
 * forward and backward, re-runs inside and after the window, lying and failing control-plane
 * answers, aborts, operator resolves) through a real engine (SQLite) and the embedded reference
 * control plane (test/support/exposure-world.ts) to their end. The release count is the goal:
 * starts refused with 422 (generated recipes the control plane disagrees with) do not count,
 * so each of the three worker processes (BATON_EXPOSURE_SHARDS) takes every third generated
 * scenario until it has driven its share (ceil(releases / shards)). A time cap,
 * BATON_EXPOSURE_BUDGET_MS (default 600 s from the benchmark's start), is only a safety net:
 * no worker starts a release after it, and the RESULT line then says `"complete":false`.
 * Every figure is measured from the environment: the control plane's history replayed through
 * the router, the target's ledger and the adapter's wire log — never the engine's tables.
 * Prints the outcome counts and the first problems, then `RESULT {...}` last:
 * releases (started and driven to their end), steps_checked (points at which the router's
 * exposure was measured), max_overshoot_pct (largest candidate share above the declared percent
 * in force, or rise during compensation), restore_mismatches (lanes neither in their observed
 * baseline nor in the declared state at the end), unread_writes (2xx writes with no read of
 * them sent, or whose reads all went unanswered and whose step compensation did not replace),
 * parallel_releases (driven releases with a parallel wave), max_out (most lanes of one parallel
 * wave out of service at once), limits_exceeded (a lane taken out beyond `max_unavailable`, a
 * whole failure domain or `min_serving`), problems (every broken rule counted, those four and
 * any release that did not end), complete (the goal reached inside the time cap).
 * max_overshoot_pct, restore_mismatches, unread_writes, limits_exceeded and problems must be 0:
 * otherwise the benchmark exits 1 after its RESULT line. Hitting the time cap alone does not.
 */
import { spawn } from "node:child_process";
import fc from "fast-check";
import { ExposureWorld, type RunReport, scenarioArb } from "../test/support/exposure-world.ts";

const RELEASES = Number(process.env.BATON_EXPOSURE_RELEASES ?? 200);
const BUDGET_MS = Number(process.env.BATON_EXPOSURE_BUDGET_MS ?? 600_000);
const SEED = Number(process.env.BATON_EXPOSURE_SEED ?? 20261201);
const SHARDS = Number(process.env.BATON_EXPOSURE_SHARDS ?? 3);
const SHARD = process.env.BATON_EXPOSURE_SHARD;
/** Epoch ms after which no worker starts another release (the budget counts from the parent's start). */
const DEADLINE = Number(process.env.BATON_EXPOSURE_DEADLINE ?? Date.now() + BUDGET_MS);

/** Driven releases (not refused at start) each worker must reach. */
const QUOTA = Math.ceil(RELEASES / SHARDS);
/** Scenarios generated: enough that every worker meets its quota despite refused starts. */
const SCENARIOS = RELEASES * 4;

interface Partial {
  /** Each release's report, its problems replaced by their count. */
  reports: (Omit<RunReport, "problems"> & { problemCount: number })[];
  problems: string[];
  /** True when the worker stopped at the time cap before reaching its quota. */
  capped: boolean;
}

/** One worker: every SHARDS-th generated release, from `shard`. */
async function work(shard: number): Promise<Partial> {
  const world = await ExposureWorld.open("sqlite");
  const scenarios = fc.sample(scenarioArb, { numRuns: SCENARIOS, seed: SEED });
  const out: Partial = { reports: [], problems: [], capped: false };
  let driven = 0;
  try {
    for (let i = shard; i < scenarios.length && driven < QUOTA; i += SHARDS) {
      if (Date.now() > DEADLINE) {
        out.capped = true;
        break;
      }
      const { problems, ...r } = await world.run(scenarios[i]!);
      out.reports.push({ ...r, problemCount: problems.length });
      out.problems.push(...problems.slice(0, 3));
      if (r.outcome !== "refused") driven++;
    }
  } finally {
    await world.close();
  }
  return out;
}

if (SHARD !== undefined) {
  const part = await work(Number(SHARD));
  console.log(`PART ${JSON.stringify(part)}`);
  process.exit(0);
}

const started = Date.now();
const parts = await Promise.all(
  Array.from(
    { length: SHARDS },
    (_, i) =>
      new Promise<Partial>((resolve, reject) => {
        const child = spawn(process.execPath, ["--import", "tsx", import.meta.filename], {
          env: {
            ...process.env,
            BATON_EXPOSURE_SHARD: String(i),
            BATON_EXPOSURE_DEADLINE: String(DEADLINE),
          },
          stdio: ["ignore", "pipe", "inherit"],
        });
        let text = "";
        child.stdout.on("data", (d) => {
          text += String(d);
        });
        child.once("exit", (code) => {
          const line = text.split("\n").find((l) => l.startsWith("PART "));
          if (!line) reject(new Error(`[bench] worker ${i} exited ${code} without a result`));
          else resolve(JSON.parse(line.slice(5)) as Partial);
        });
      }),
  ),
);
const reports = parts.flatMap((p) => p.reports);
const problems = parts.flatMap((p) => p.problems);
const outcomes: Record<string, number> = {};
const paths: Record<string, number> = {};
for (const r of reports) {
  outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
  for (const p of r.paths) paths[p] = (paths[p] ?? 0) + 1;
}
const driven = reports.filter((r) => r.outcome !== "refused").length;
const capped = parts.some((p) => p.capped);
console.log(
  `[bench] ${reports.length} generated releases (${driven} driven, goal ${RELEASES}) in ${Date.now() - started} ms`,
);
if (capped)
  console.log(`[bench] the time cap (${BUDGET_MS} ms) was reached before the goal: incomplete`);
console.log(
  `[bench] outcomes ${JSON.stringify(outcomes)} (refused: 422 at start, nothing written)`,
);
console.log(`[bench] on the way ${JSON.stringify(paths)}`);
for (const p of problems.slice(0, 10)) console.log(`[bench] problem: ${p}`);
const result = {
  releases: driven,
  steps_checked: reports.reduce((a, r) => a + r.stepsChecked, 0),
  max_overshoot_pct: Math.round(Math.max(0, ...reports.map((r) => r.maxOvershootPct)) * 100) / 100,
  restore_mismatches: reports.reduce((a, r) => a + r.restoreMismatches, 0),
  unread_writes: reports.reduce((a, r) => a + r.unreadWrites, 0),
  parallel_releases: reports.filter((r) => r.parallel && r.outcome !== "refused").length,
  max_out: Math.max(0, ...reports.map((r) => r.maxOut)),
  limits_exceeded: reports.reduce((a, r) => a + r.limitViolations, 0),
  problems: reports.reduce((a, r) => a + r.problemCount, 0),
  complete: driven >= RELEASES && !capped,
};
console.log(`RESULT ${JSON.stringify(result)}`);
// A broken rule fails the benchmark (after the RESULT line); a slow machine that hit the time
// cap does not (`complete` says so).
if (result.problems > 0) {
  console.error(
    `[bench] FAILED: ${result.problems} problems (overshoot ${result.max_overshoot_pct}%, ${result.restore_mismatches} restore mismatches, ${result.unread_writes} unread writes, ${result.limits_exceeded} limits exceeded)`,
  );
  process.exit(1);
}
