/**
 * `npm run bench:fuzz`: hostile input from outside (test/chaos/fuzz-outside.ts): the engine as
 * its own process over a real socket, on SQLite and, with BATON_TEST_DATABASE_URL, on Postgres;
 * BATON_FUZZ_RUNS fast-check cases per property (default 100). Prints one line per store, then
 * `RESULT {"fuzz_cases","server_errors","half_written","crashes","stuck_releases",
 * "max_healthz_ms","healthz_polls","stores"}` last. Exits 1 when any of server_errors,
 * half_written, crashes, stuck_releases is above 0 or max_healthz_ms reaches 1000.
 */
import { fuzzFromOutside } from "./fuzz-outside.ts";

const runs = Number(process.env.BATON_FUZZ_RUNS ?? 100);
const pgUrl = process.env.BATON_TEST_DATABASE_URL;
const stores: ("sqlite" | "postgres")[] = ["sqlite"];
if (pgUrl) stores.push("postgres");
else if (process.env.CI === "true") {
  console.error("[fuzz] BATON_TEST_DATABASE_URL is not set under CI=true; .ci/run exports it");
  process.exitCode = 1;
}
const total = {
  fuzz_cases: 0,
  server_errors: 0,
  half_written: 0,
  crashes: 0,
  stuck_releases: 0,
  max_healthz_ms: 0,
  healthz_polls: 0,
};
for (const kind of stores) {
  const t0 = Date.now();
  const r = await fuzzFromOutside(kind, runs, pgUrl);
  total.fuzz_cases += r.cases;
  total.server_errors += r.serverErrors;
  total.half_written += r.halfWritten;
  total.crashes += r.crashes;
  total.stuck_releases += r.stuckReleases;
  total.max_healthz_ms = Math.max(total.max_healthz_ms, r.maxHealthzMs);
  total.healthz_polls += r.healthzPolls;
  for (const p of r.problems.slice(0, 20)) console.log(`[fuzz] ${kind} PROBLEM ${p}`);
  console.log(
    `[fuzz] ${kind}: ${r.cases} cases in ${((Date.now() - t0) / 1000).toFixed(1)} s, ${r.serverErrors} server errors, ${r.crashes} crashes, ${r.halfWritten} half-written, ${r.stuckReleases} stuck releases, /healthz slowest ${r.maxHealthzMs} ms of ${r.healthzPolls} polls; answers ${JSON.stringify(r.statuses)}`,
  );
}
const bad =
  total.server_errors > 0 ||
  total.half_written > 0 ||
  total.crashes > 0 ||
  total.stuck_releases > 0 ||
  total.max_healthz_ms >= 1000;
if (bad) process.exitCode = 1;
console.log(`RESULT ${JSON.stringify({ ...total, stores })}`);
process.exit(process.exitCode ?? 0);
