/**
 * The work-count budgets catch a regression (docs/engine.md "Work-count budgets"): the
 * deterministic run of `npm run check:budgets` with one deliberate extra piece of work — a
 * statement per commit, a second transition (and so a second deep copy) per event — goes over
 * `bench/budgets.json` and the check names the count. On SQLite, and on Postgres when
 * BATON_TEST_DATABASE_URL is set. No timing is asserted.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { type Budgets, overBudget } from "../../bench/support/budgets.ts";
import { measureWork, type StoreKind } from "../../bench/support/work-budget.ts";
import type { Store } from "../../engine/src/ports/store.ts";

const PG_URL = process.env.BATON_TEST_DATABASE_URL;
const KINDS: StoreKind[] = PG_URL ? ["sqlite", "postgres"] : ["sqlite"];
const budgets = JSON.parse(
  readFileSync(path.join(import.meta.dirname, "../../bench/budgets.json"), "utf8"),
) as Budgets;

/** Counts only: the timing ratio is left out (it is the check's, and never asserted here). */
const countsOver = (problems: string[]) => problems.filter((p) => p.includes("per callback"));

describe.each(KINDS)("work-count budgets on %s", (kind) => {
  it("the engine as it is stays within every count's budget", async () => {
    const run = await measureWork(kind, { pgUrl: PG_URL, releases: 1 });
    expect(countsOver(overBudget(run, budgets))).toEqual([]);
  }, 60_000);

  it("one extra statement per commit goes over the statements budget", async () => {
    const run = await measureWork(kind, {
      pgUrl: PG_URL,
      releases: 1,
      inject: {
        store: (store, extraStatement) =>
          new Proxy(store, {
            get(target, p) {
              const v = Reflect.get(target, p, target);
              if (p !== "commit") return typeof v === "function" ? v.bind(target) : v;
              return async (...args: Parameters<Store["commit"]>) => {
                await extraStatement();
                return target.commit(...args);
              };
            },
          }),
      },
    });
    expect(countsOver(overBudget(run, budgets))).toEqual([
      expect.stringMatching(new RegExp(`^${kind}: statements per callback [0-9.]+ > budget`)),
    ]);
  }, 60_000);

  it("a second transition per event (a second deep copy) goes over the copy budgets", async () => {
    const run = await measureWork(kind, {
      pgUrl: PG_URL,
      releases: 1,
      inject: {
        domain: (d) => ({
          ...d,
          transition: (r, e, now) => {
            d.transition(r, e, now);
            return d.transition(r, e, now);
          },
        }),
      },
    });
    const over = countsOver(overBudget(run, budgets));
    expect(over).toContainEqual(expect.stringMatching(/deep_copies per callback/));
    expect(over).toContainEqual(expect.stringMatching(/copied_nodes per callback/));
  }, 60_000);
});
