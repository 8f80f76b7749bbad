/**
 * History labels on the release page: built from the entry's outcome and kind, never
 * "refused: refused", never the operator's own abort reason as a refusal reason, and a reason
 * that repeats itself ("aborted by operator: aborted by operator") read once.
 */
import { describe, expect, it } from "vitest";
import type { HistoryEntry } from "../../engine/src/domain/types.ts";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import {
  historyLabel,
  housekeepingLine,
  isHousekeeping,
  readOnce,
  refusalReason,
} from "../../engine/src/views/history-label.ts";
import { compensatedRecord, fakeApi } from "../support/dashboard-fixtures.ts";

const BASE = "http://127.0.0.1:8787";
const base: Omit<HistoryEntry, "kind" | "message" | "data" | "outcome"> = {
  release_id: "r3",
  at: Date.UTC(2026, 10, 29, 6, 0, 0),
  step_run_id: null,
};
const refusedAbort: HistoryEntry = {
  ...base,
  kind: "abort",
  outcome: "refused",
  message: "[engine] release r3 is rolled_back; undoing a finished release is a new release",
  data: { type: "abort", actor: "operator", reason: "aborted by operator" },
};
const refusedSilent: HistoryEntry = {
  ...base,
  kind: "tick",
  outcome: "refused",
  message: "[engine] something the dashboard has no word for",
  data: {},
};

describe("historyLabel", () => {
  it("derives the label from outcome and kind", () => {
    expect(historyLabel({ ...refusedAbort, outcome: "accepted" })).toBe("accepted");
    expect(historyLabel(refusedAbort)).toBe("abort refused");
    expect(historyLabel(refusedSilent)).toBe("tick refused");
    expect(historyLabel(refusedSilent)).not.toMatch(/refused: refused/);
    expect(
      historyLabel({
        ...refusedSilent,
        kind: "callback",
        message: "[engine] step run sr_3_2_f is fenced: attempt 1 < 2",
      }),
    ).toBe("callback refused: fenced");
    expect(
      historyLabel({ ...refusedSilent, kind: "callback", data: { reason: "bad signature" } }),
    ).toBe("callback refused: bad signature");
  });

  it("never reads an operator's own words (reason or quoted message) as the engine's refusal reason, for any operator verb", () => {
    for (const kind of ["abort", "pause", "promote", "release", "resolve", "abandon", "verify"]) {
      const e: HistoryEntry = {
        ...base,
        kind,
        outcome: "refused",
        message: `[engine] ${kind} needs a reason; the pause said "p99 latency on lane-a doubled, forged by the engine"`,
        data: { type: kind, actor: "operator", reason: "forged by the engine - ignore" },
      };
      expect(historyLabel(e)).toBe(`${kind} refused`);
    }
    expect(
      historyLabel({
        ...refusedAbort,
        data: { ...(refusedAbort.data as object), code: "reason_required" },
      }),
    ).toBe("abort refused: reason_required");
  });

  it("matches the engine's refusal words whole: 'latency' is not 'late'", () => {
    const m = (message: string) => refusalReason({ ...refusedSilent, kind: "callback", message });
    expect(m("[engine] p99 latency doubled; the latest template")).toBeNull();
    expect(m("[engine] callback for sr_1_2_f is late: the step run is succeeded")).toBe("late");
  });

  it("never reports the operator's abort reason as the refusal reason", () => {
    expect(refusalReason(refusedAbort)).toBeNull();
    expect(historyLabel(refusedAbort)).not.toContain("aborted by operator");
  });
});

describe("readOnce", () => {
  it("reads a repeated reason once and keeps a real one", () => {
    expect(readOnce("aborted by operator: aborted by operator")).toBe("aborted by operator");
    expect(
      readOnce("[engine] release r3 aborted (by operator: aborted by operator); nothing to undo"),
    ).toBe("[engine] release r3 aborted (by operator); nothing to undo");
    expect(readOnce("aborted by operator: wrong image")).toBe("aborted by operator: wrong image");
    expect(readOnce("late: late")).toBe("late");
  });
});

describe("release page timeline", () => {
  it("shows the labels and the reason once", async () => {
    const rec = compensatedRecord();
    rec.release.reason = "aborted by operator: aborted by operator";
    rec.history.push(
      { ...refusedAbort, release_id: rec.release.id },
      { ...refusedSilent, release_id: rec.release.id },
    );
    const app = dashboardApp({
      api: fakeApi([rec]),
      tokens: {},
      publicUrl: BASE,
      repository: "acme/models",
      now: () => Date.UTC(2026, 10, 29, 12, 0, 0),
    });
    const html = await (await app.request(`${BASE}/releases/${rec.release.id}?only=all`)).text();
    expect(html).toContain("abort refused");
    expect(html).toContain("tick refused");
    expect(html).not.toContain("refused: refused");
    expect(html).not.toContain("refused: aborted by operator");
    expect(html).not.toContain("aborted by operator: aborted by operator");
    expect(html).toContain("aborted by operator");
    // The existing refusals keep their reasons.
    expect(html).toContain("refused: late");
    expect(html).toContain("refused: fenced");
  });
});

describe("housekeeping refusals", () => {
  const late: HistoryEntry = {
    ...base,
    kind: "callback",
    step_run_id: "sr_3_2_f",
    outcome: "refused",
    message:
      "[engine] callback for sr_3_2_f attempt 1 is late: the step run is succeeded and release r3 is rolled_back",
    data: { type: "callback", step_run_id: "sr_3_2_f", run_id: "9001", run_attempt: 1 },
  };

  it("a late callback is housekeeping, said in plain words; an operator's refused abort is not", () => {
    expect(isHousekeeping(late)).toBe(true);
    expect(housekeepingLine(late)).toBe(
      "late callback from attempt 1 for sr_3_2_f refused; it changed nothing",
    );
    expect(isHousekeeping(refusedAbort)).toBe(false);
    expect(isHousekeeping({ ...late, outcome: "accepted" })).toBe(false);
  });

  it("the release page shows an operator's refused action by default and the engine's housekeeping as such", async () => {
    const rec = compensatedRecord();
    rec.history.push(
      { ...refusedAbort, release_id: rec.release.id },
      { ...late, release_id: rec.release.id },
    );
    const app = dashboardApp({
      api: fakeApi([rec]),
      tokens: {},
      publicUrl: BASE,
      now: () => Date.UTC(2026, 10, 29, 12, 0, 0),
    });
    const page = async (q: string) =>
      (await app.request(`${BASE}/releases/${rec.release.id}${q}`)).text();
    const main = await page("");
    // The operator's refusal is not hidden.
    expect(main).toContain("abort refused");
    // The engine's own refusals are hidden by default, and counted as housekeeping.
    expect(main).not.toContain("late callback from attempt 1");
    expect(main.replaceAll("&#39;", "'")).toMatch(/\d+ by the engine's own housekeeping/);
    expect(main).toContain("1 operator action (shown)");
    const all = await page("?only=all");
    expect(all).toContain("late callback from attempt 1 for sr_3_2_f refused; it changed nothing");
    expect(all).toContain("engine housekeeping: callback");
    // Not styled as a failure: the red label is kept for the operator's refusal.
    const row =
      /<tr class="housekeeping">(?:(?!<\/tr>).)*late callback from attempt 1(?:(?!<\/tr>).)*<\/tr>/s.exec(
        all,
      )?.[0] ?? "";
    expect(row).not.toBe("");
    expect(row).not.toContain("st-failed");
  });
});
