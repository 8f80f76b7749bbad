/**
 * The dashboard's work-count budget (docs/engine.md "Work-count budgets"): a release page
 * rendered as `npm run check:budgets` renders it stays within `bench/budgets.json`'s
 * `dashboard` counts, a deep copy per offered action goes over them, and so does a step table
 * rendered with a JSX node per element again. No timing is asserted.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type Budgets, dashboardOverBudget } from "../../bench/support/budgets.ts";
import type * as Exits from "../../engine/src/domain/transition/exits.ts";
import type * as StepTable from "../../engine/src/http/dashboard/step-table.ts";

const budgets = JSON.parse(
  readFileSync(path.join(import.meta.dirname, "../../bench/budgets.json"), "utf8"),
) as Budgets;
const EXITS = "../../engine/src/domain/transition/exits.ts";
const STEP_TABLE = "../../engine/src/http/dashboard/step-table.ts";

describe("dashboard work-count budget", () => {
  afterEach(() => {
    vi.doUnmock(EXITS);
    vi.doUnmock(STEP_TABLE);
    vi.resetModules();
  });

  it("the release pages as they are stay within the budget", async () => {
    const { measureDashboardWork } = await import("../../bench/support/dashboard-work.ts");
    expect(dashboardOverBudget(await measureDashboardWork(), budgets)).toEqual([]);
  });

  it("a deep copy per offered action goes over the deep-copy budget", async () => {
    vi.resetModules();
    vi.doMock(EXITS, async (importOriginal) => {
      const real = await importOriginal<typeof Exits>();
      const { transition } = await import("../../engine/src/domain/transition.ts");
      return {
        ...real,
        availableActions: (...args: Parameters<typeof real.availableActions>) => {
          const out = real.availableActions(...args);
          // Asks the transition again, on a fresh copy, for each action offered.
          for (const a of out) transition(args[0], { type: "verify", actor: a.action }, 0);
          return out;
        },
      };
    });
    const { measureDashboardWork } = await import("../../bench/support/dashboard-work.ts");
    expect(dashboardOverBudget(await measureDashboardWork(), budgets)).toContainEqual(
      expect.stringMatching(/^dashboard: deep_copies per release page \d+ > budget 1$/),
    );
  });

  it("a step table with a JSX node per element goes over the JSX-element budget", async () => {
    vi.resetModules();
    vi.doMock(STEP_TABLE, async (importOriginal) => {
      const real = await importOriginal<typeof StepTable>();
      const { jsx } = await import("hono/jsx/jsx-runtime");
      return {
        ...real,
        stepTableHtml: (...args: Parameters<typeof real.stepTableHtml>) => {
          // Each step's row built as JSX again (a row, five cells), then the real markup.
          for (const step of args[0].manifest.steps) {
            const cells = Array.from({ length: 5 }, () => jsx("td", { children: step.name }));
            String(jsx("tr", { children: cells }));
          }
          return real.stepTableHtml(...args);
        },
      };
    });
    const { measureDashboardWork } = await import("../../bench/support/dashboard-work.ts");
    expect(dashboardOverBudget(await measureDashboardWork(), budgets)).toContainEqual(
      expect.stringMatching(/^dashboard: jsx_elements per release page \d+ > budget 560$/),
    );
  });
});
