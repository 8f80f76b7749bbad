/**
 * The dashboard's work counts behind the budgets (`bench/budgets.json` `dashboard`, checked by
 * `npm run check:budgets`; docs/engine.md "Work-count budgets"): deep copies of a release, and
 * the objects and arrays they allocated, and the HTML elements rendered through JSX (the page's
 * long parts are written with `markup` instead), per release page rendered through the
 * dashboard's Hono app in process. Two pages: bench:dashboard's long release (200 step runs × 3 attempts, 2,000
 * history events, rolled back: verify offered) and a running release (pause and abort offered).
 * Deterministic; no timing.
 */

import { jsx } from "hono/jsx/jsx-runtime";
import { countWorkInto, emptyWorkCounts } from "../../engine/src/domain/work-counts.ts";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import { bigRecord, fakeApi, runningRecord } from "../../test/support/dashboard-fixtures.ts";

/** Work per release page rendered. */
export interface PageWork {
  deep_copies: number;
  copied_nodes: number;
  /** HTML elements rendered through JSX (a node built and walked per element). */
  jsx_elements: number;
}

/**
 * Counts the HTML elements hono's JSX renders while `f` runs: its element node class (the
 * prototype of a `<div>`; components and fragments have their own) is wrapped for the while.
 */
async function countingJsxElements(f: () => Promise<void>): Promise<number> {
  const proto = Object.getPrototypeOf(jsx("div", {})) as {
    toStringToBuffer: (this: unknown, buffer: unknown) => void;
  };
  const original = proto.toStringToBuffer;
  let n = 0;
  proto.toStringToBuffer = function (buffer) {
    n++;
    original.call(this, buffer);
  };
  try {
    await f();
  } finally {
    proto.toStringToBuffer = original;
  }
  return n;
}

/** The larger of the two pages' counts (each page rendered once after a warm-up render). */
export async function measureDashboardWork(): Promise<PageWork> {
  const records = [bigRecord(200, 3, 2_000), runningRecord()];
  const app = dashboardApp({
    api: fakeApi(records),
    tokens: {},
    publicUrl: "http://127.0.0.1:8787",
    repository: "acme/models",
  });
  const worst: PageWork = { deep_copies: 0, copied_nodes: 0, jsx_elements: 0 };
  for (const { release } of records) {
    const url = `http://127.0.0.1:8787/releases/${release.id}`;
    await (await app.request(url)).text();
    const counts = emptyWorkCounts();
    countWorkInto(counts);
    let elements = 0;
    try {
      elements = await countingJsxElements(async () => {
        const res = await app.request(url);
        await res.text();
        if (res.status !== 200) throw new Error(`[budgets] ${url} answered ${res.status}`);
      });
    } finally {
      countWorkInto(null);
    }
    worst.deep_copies = Math.max(worst.deep_copies, counts.deep_copies);
    worst.copied_nodes = Math.max(worst.copied_nodes, counts.copied_nodes);
    worst.jsx_elements = Math.max(worst.jsx_elements, elements);
  }
  return worst;
}
