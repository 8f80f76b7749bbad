/**
 * `npm run test:chaos`: reliability of the running system under faults
 * (docs/guarantees.md says what is promised and how each promise is tested here).
 *
 * Scenarios, in order, within a time budget (BATON_CHAOS_BUDGET_S, default 540 s; .ci/run
 * bounds the whole command to 600 s):
 * 1. crash: the example release with the engine as its own process on SQLite, SIGKILLed at
 *    every enumerated kill point, or at BATON_CHAOS_KILL_POINTS of them chosen with the seed
 *    BATON_CHAOS_SEED (default: from the commit; printed), BATON_CHAOS_AT_ONCE releases
 *    (default 2) at a time (test/chaos/crash-scenario.ts);
 * 2. parallel: the example's three lanes in one parallel wave (max_unavailable 2, lane-a and
 *    lane-b in one failure domain, min_serving 1), two chained releases SIGKILLed at 8 kill
 *    points while two lanes are in flight, beside the uncrashed run; the limits are checked on
 *    the reference control plane's history (test/chaos/parallel-scenario.ts);
 * 3. many engines: three engine processes on one Postgres, 100 releases, callbacks to random
 *    instances (10% duplicated, 10% reordered), one instance SIGSTOPped past the lease
 *    (needs BATON_TEST_DATABASE_URL; skipped with a message without it unless CI=true);
 * 4. fuzz: hostile input against the engine's HTTP app (test/support/chaos-fuzz.ts).
 *
 * Prints a table and, last, `RESULT {"kill_points","kill_points_enumerated","duplicates",
 * "wrong_terminal","fuzz_cases","parallel_kill_points","parallel_max_out","limits_exceeded"}`
 * (kill_points counts every scenario's kill points reached; kill_points_enumerated those there
 * were to choose from).
 * Exits 1 on any duplicate, wrong terminal state or other problem.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fuzzEngine } from "../support/chaos-fuzz.ts";
import { crashScenario, type KillSample } from "./crash-scenario.ts";
import { manyEnginesScenario } from "./many-engines.ts";
import { parallelScenario } from "./parallel-scenario.ts";
import { formatTable, type Row } from "./table.ts";

/**
 * BATON_CHAOS_KILL_POINTS=N runs N kill points of the crash scenario chosen with a seed instead
 * of all of them: BATON_CHAOS_SEED, else one derived from the checked-out commit (so a commit's
 * CI run can be replayed, and successive commits cover different points). Unset: all of them.
 */
function killSample(): KillSample | undefined {
  const n = Number(process.env.BATON_CHAOS_KILL_POINTS);
  if (!process.env.BATON_CHAOS_KILL_POINTS) return undefined;
  if (!Number.isInteger(n) || n < 1)
    throw new Error(
      `[chaos] BATON_CHAOS_KILL_POINTS must be a whole number of kill points (1 or more), not ${JSON.stringify(process.env.BATON_CHAOS_KILL_POINTS)}`,
    );
  let seed = Number(process.env.BATON_CHAOS_SEED);
  if (!process.env.BATON_CHAOS_SEED || !Number.isInteger(seed)) {
    let head = "";
    try {
      head = execFileSync("git", ["rev-parse", "HEAD"], { encoding: "utf8" }).trim();
    } catch {
      // not a checkout: a fixed seed
    }
    seed = /^[0-9a-f]{8}/.test(head) ? Number.parseInt(head.slice(0, 8), 16) : 1;
  }
  return { points: n, seed };
}

async function main(): Promise<number> {
  const t0 = Date.now();
  const budgetS = Number(process.env.BATON_CHAOS_BUDGET_S ?? 540);
  const only = new Set((process.env.BATON_CHAOS_ONLY ?? "crash,parallel,engines,fuzz").split(","));
  const root = mkdtempSync(join(tmpdir(), "baton-chaos-"));
  const rows: Row[] = [];
  const problems: string[] = [];
  let killPoints = 0;
  let enumerated = 0;
  let duplicates = 0;
  let wrongTerminal = 0;
  let fuzzCases = 0;
  let parallelKills = 0;
  let parallelMaxOut = 0;
  let limitsExceeded = 0;
  try {
    if (only.has("crash")) {
      // Isolated kill runs stop starting once 45% of the budget is used (engines and fuzz follow).
      const crash = await crashScenario(join(root, "crash"), t0 + budgetS * 450, killSample());
      rows.push(...crash.rows);
      killPoints += crash.reached;
      enumerated += crash.enumerated;
      duplicates += crash.duplicates;
      wrongTerminal += crash.wrongTerminal;
      problems.push(...crash.problems);
      if (crash.reached < crash.killPoints)
        problems.push(
          `crash: only ${crash.reached} of ${crash.killPoints} kill points were reached`,
        );
    }
    if (only.has("parallel")) {
      const tp = Date.now();
      const par = await parallelScenario(join(root, "parallel"));
      console.log(`[chaos] parallel: scenario took ${((Date.now() - tp) / 1000).toFixed(1)} s`);
      rows.push(...par.rows);
      killPoints += par.reached;
      enumerated += par.reached;
      parallelKills += par.reached;
      parallelMaxOut = par.maxOut;
      duplicates += par.duplicates;
      wrongTerminal += par.wrongTerminal;
      limitsExceeded += par.limitViolations;
      problems.push(...par.problems);
    }
    if (only.has("engines")) {
      const pgUrl = process.env.BATON_TEST_DATABASE_URL;
      if (pgUrl) {
        const eng = await manyEnginesScenario(join(root, "engines"), pgUrl);
        rows.push(...eng.rows);
        duplicates += eng.duplicates;
        wrongTerminal += eng.wrongTerminal;
        problems.push(...eng.problems.map((p) => `engines: ${p}`));
      } else if (process.env.CI === "true") {
        problems.push(
          "engines: BATON_TEST_DATABASE_URL is not set under CI=true; .ci/run exports it",
        );
      } else {
        console.log(
          "[chaos] engines: skipped: set BATON_TEST_DATABASE_URL=postgres://… (scripts/ci/pg-start.sh starts one)",
        );
      }
    }
    if (only.has("fuzz")) {
      const f = await fuzzEngine(Number(process.env.BATON_CHAOS_FUZZ_RUNS ?? 500));
      fuzzCases += f.cases;
      rows.push({
        scenario: "hostile input (fast-check)",
        tried: f.cases,
        releases: 0,
        effects: 0,
        duplicates: 0,
        wrong: 0,
      });
      problems.push(...f.problems.map((p) => `fuzz: ${p}`));
      console.log(`[chaos] fuzz: ${f.cases} cases, ${f.problems.length} problems`);
    }
  } catch (e) {
    problems.push(`harness error: ${(e as Error).stack ?? String(e)}`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  console.log("");
  console.log(formatTable(rows));
  console.log("");
  for (const p of problems) console.log(`[chaos] PROBLEM ${p}`);
  console.log(`[chaos] finished in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  console.log(
    `RESULT ${JSON.stringify({ kill_points: killPoints, kill_points_enumerated: enumerated, duplicates, wrong_terminal: wrongTerminal, fuzz_cases: fuzzCases, parallel_kill_points: parallelKills, parallel_max_out: parallelMaxOut, limits_exceeded: limitsExceeded })}`,
  );
  return duplicates > 0 || wrongTerminal > 0 || problems.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e: Error) => {
    console.error(e.stack ?? e.message);
    process.exit(1);
  },
);
