/**
 * `npm run bench:fuzz`: the hostile-input harness (test/support/chaos-fuzz.ts) on SQLite and,
 * with BATON_TEST_DATABASE_URL, on Postgres. Prints one line per store, then
 * `RESULT {"fuzz_cases","server_errors","stores","half_written"}` last. Exit 1 on a problem.
 */
import { fuzzEngine } from "../support/chaos-fuzz.ts";

const runs = Number(process.env.BATON_FUZZ_RUNS ?? 100);
const stores: ("sqlite" | "postgres")[] = ["sqlite"];
if (process.env.BATON_TEST_DATABASE_URL) stores.push("postgres");
else if (process.env.CI === "true") {
  console.error("[fuzz] BATON_TEST_DATABASE_URL is not set under CI=true; .ci/run exports it");
  process.exitCode = 1;
}
let cases = 0;
let serverErrors = 0;
let halfWritten = 0;
let problems = 0;
for (const kind of stores) {
  const r = await fuzzEngine(runs, kind);
  cases += r.cases;
  serverErrors += r.serverErrors;
  halfWritten += r.halfWritten;
  problems += r.problems.length;
  for (const p of r.problems.slice(0, 20)) console.log(`[fuzz] ${kind} PROBLEM ${p.slice(0, 300)}`);
  console.log(
    `[fuzz] ${kind}: ${r.cases} cases, ${r.serverErrors} server errors, ${r.halfWritten} half-written, ${r.problems.length} problems`,
  );
}
if (problems > 0) process.exitCode = 1;
console.log(
  `RESULT ${JSON.stringify({ fuzz_cases: cases, server_errors: serverErrors, stores, half_written: halfWritten })}`,
);
process.exit(process.exitCode ?? 0);
