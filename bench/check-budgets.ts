/**
 * `npm run check:budgets`: the work-count budgets (docs/engine.md "Work-count budgets").
 * Runs the deterministic work-count run (bench/support/work-budget.ts) on SQLite and, when
 * BATON_TEST_DATABASE_URL is set, on Postgres, and the dashboard's (bench/support/dashboard-work.ts),
 * and compares each count per callback and per release page with `bench/budgets.json`. Exits 1 naming every count above its budget, and when the callback's
 * time over the raw conditional UPDATE's (measured interleaved, in this process) is above the
 * allowed ratio. Timings are printed, never compared with a fixed number of milliseconds.
 * `--measure` prints the counts only (to set budgets: at most 10% above what it prints).
 * Last line: `RESULT {"ok":…,"problems":[…],"stores":[{"store":…,"per_callback":{…},…}],"dashboard":{…},"load_avg_1m":…}`.
 */
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import path from "node:path";
import { type Budgets, dashboardOverBudget, overBudget } from "./support/budgets.ts";
import { measureDashboardWork } from "./support/dashboard-work.ts";
import { measureWork, type StoreKind } from "./support/work-budget.ts";

const budgets = JSON.parse(
  readFileSync(path.join(import.meta.dirname, "budgets.json"), "utf8"),
) as Budgets;
const measureOnly = process.argv.includes("--measure");
const pgUrl = process.env.BATON_TEST_DATABASE_URL;
const stores: StoreKind[] = pgUrl ? ["sqlite", "postgres"] : ["sqlite"];
if (!pgUrl) console.error("[budgets] BATON_TEST_DATABASE_URL is not set: SQLite only");

const problems: string[] = [];
const runs = [];
for (const kind of stores) {
  const run = await measureWork(kind, { pgUrl });
  runs.push(run);
  if (!measureOnly) problems.push(...overBudget(run, budgets));
}
const dashboard = await measureDashboardWork();
if (!measureOnly) problems.push(...dashboardOverBudget(dashboard, budgets));
for (const p of problems) console.error(`[budgets] ${p}`);
if (problems.length > 0) {
  console.error(
    "[budgets] a count rose above its budget in bench/budgets.json: find the extra work, or raise the budget in a reviewed change that says why",
  );
} else if (!measureOnly) console.error("[budgets] every count within its budget");
const load = Math.round((loadavg()[0] ?? Number.NaN) * 100) / 100;
console.log(
  `RESULT ${JSON.stringify({ ok: problems.length === 0, problems, stores: runs, dashboard, load_avg_1m: load })}`,
);
if (problems.length > 0) process.exit(1);
