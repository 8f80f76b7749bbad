/**
 * The work-count budgets' file (`bench/budgets.json`) and the comparison the check makes.
 */
import type { PageWork } from "./dashboard-work.ts";
import type { CallbackWork, StoreKind, WorkRun } from "./work-budget.ts";

/** `bench/budgets.json`: per store, the most work per callback allowed, and why. */
export interface Budgets {
  /** Why the budgets are what they are (a change to them says why, in review). */
  reason: string;
  stores: Record<
    StoreKind,
    {
      per_callback: CallbackWork;
      /**
       * Largest allowed callback p50 ÷ raw conditional UPDATE p50 in the same run; null: not
       * checked (the ratio is printed only).
       */
      callback_ratio: number | null;
    }
  >;
  /** The most work per dashboard release page (bench/support/dashboard-work.ts). */
  dashboard: { reason: string; per_page: PageWork };
}

/** One sentence per count of `run` above its budget (none: within budget). */
export function overBudget(run: WorkRun, budgets: Budgets): string[] {
  const b = budgets.stores[run.store];
  if (!b) return [`no budget for store ${run.store} in bench/budgets.json`];
  const out: string[] = [];
  for (const [k, limit] of Object.entries(b.per_callback) as [keyof CallbackWork, number][]) {
    const got = run.per_callback[k];
    if (got > limit) out.push(`${run.store}: ${k} per callback ${got} > budget ${limit}`);
  }
  if (b.callback_ratio !== null && !(run.callback_ratio <= b.callback_ratio)) {
    out.push(
      `${run.store}: callback time ÷ raw UPDATE time ${run.callback_ratio} > allowed ${b.callback_ratio} (callback p50 ${run.callback_p50_ms} ms, raw UPDATE p50 ${run.raw_update_p50_ms} ms)`,
    );
  }
  return out;
}

/** One sentence per dashboard count above its budget (none: within budget). */
export function dashboardOverBudget(work: PageWork, budgets: Budgets): string[] {
  const b = budgets.dashboard?.per_page;
  if (!b) return ["no dashboard budget in bench/budgets.json"];
  return (Object.entries(b) as [keyof PageWork, number][])
    .filter(([k, limit]) => work[k] > limit)
    .map(([k, limit]) => `dashboard: ${k} per release page ${work[k]} > budget ${limit}`);
}
