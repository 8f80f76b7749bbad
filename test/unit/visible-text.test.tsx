/**
 * Runner-supplied text (check names and messages, logs, the raw callback) is shown with its
 * control and bidirectional characters escaped, on the dashboard and in the CLI: stored and
 * shown as they were, an ANSI escape repainted a terminal and U+202E reversed a line.
 */
import { describe, expect, it } from "vitest";
import { releaseSummary } from "../../engine/src/cli/output.ts";
import { visible } from "../../engine/src/domain/visible-text.ts";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import { recordJson } from "../../engine/src/http/routes/releases.ts";
import type { ReleaseRecord } from "../../engine/src/service/api.ts";
import { compensatedRecord, fakeApi } from "../support/dashboard-fixtures.ts";

const ANSI = "\u001b[31mred\u001b[0m\u001b]0;title\u0007";
const BIDI = "ok \u202eexe.txt\u202c";

function hostileRecord(): ReleaseRecord {
  const r = compensatedRecord();
  const a = r.attempt_results[0];
  if (!a) throw new Error("fixture has no attempt result");
  const checks = a.checks as { name: string; status: string; message?: string }[];
  const first = checks.find((c) => c.status === "failed");
  if (!first) throw new Error("fixture has no failing check");
  first.name = `health ${ANSI}`;
  first.message = `answered ${BIDI}`;
  a.log = `step output ${ANSI}\nsecond line ${BIDI}\n`;
  a.raw_callback = JSON.stringify({ log: a.log, name: BIDI });
  return r;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: the raw characters are what must not appear
const RAW = /[\u001b\u0007\u202e\u202c]/;

describe("visible", () => {
  it("escapes C0/C1 controls, DEL and bidi formatting; keeps tab, newline and text", () => {
    expect(visible(`a\u001b[1mb\u0085c\u007f\u061c\u200e\u2066d\te\nf`)).toBe(
      "a\\x1b[1mb\\x85c\\x7f\\u061c\\u200e\\u2066d\te\nf",
    );
    expect(visible("plain café 日本 \\ back")).toBe("plain café 日本 \\ back");
  });
});

describe("runner text on the dashboard", () => {
  it("the step-run page shows check names, messages, the log and the raw callback escaped", async () => {
    const app = dashboardApp({
      api: fakeApi([hostileRecord()]),
      tokens: {},
      publicUrl: "http://127.0.0.1:8787",
    });
    const html = await (await app.request("http://127.0.0.1:8787/step-runs/sr_3_2_f")).text();
    expect(html).toContain("health \\x1b[31mred\\x1b[0m\\x1b]0;title\\x07");
    expect(html).toContain("answered ok \\u202eexe.txt\\u202c");
    expect(html).toContain("step output \\x1b[31mred");
    expect(html).not.toMatch(RAW);
    const page = await (await app.request("http://127.0.0.1:8787/releases/r3")).text();
    expect(page).toContain("\\x1b[31mred");
    expect(page).not.toMatch(RAW);
  });
});

describe("runner text in the CLI", () => {
  it("baton status prints the failing check escaped", () => {
    const lines = releaseSummary(recordJson(hostileRecord()) as never, Date.now());
    const text = lines.join("\n");
    expect(text).toContain("\\x1b[31mred");
    expect(text).not.toMatch(RAW);
  });
});
