/**
 * Where a due recovery drill is shown (docs/recovery-actions.md "The drill schedule"): the
 * release page's banner and `baton status`, while the release's history holds a current
 * `drill_due`; neither once a `drill_due_cleared` entry follows.
 */
import { describe, expect, it } from "vitest";
import { releaseSummary } from "../../engine/src/cli/output.ts";
import {
  DRILL_DUE_CLEARED_KIND,
  DRILL_DUE_KIND,
  type DrillDue,
  drillDueMessage,
} from "../../engine/src/domain/drills.ts";
import type { HistoryEntry } from "../../engine/src/domain/types.ts";
import type { ReleaseRecord } from "../../engine/src/service/api.ts";
import { defaultRecords, releasePageHtml, visibleText } from "../support/dashboard-fixtures.ts";

const NOW = Date.UTC(2026, 10, 29, 12, 0, 0);
const DAY = 86_400_000;

const due: DrillDue = {
  model: "chat-model",
  release: "r2",
  every_days: 7,
  last: { drill: "d1", at: NOW - 9 * DAY },
  due_since: NOW - 2 * DAY,
  observed_at: NOW - 60_000,
};

const entry = (kind: string, at: number): HistoryEntry => ({
  release_id: "r2",
  at,
  kind,
  step_run_id: null,
  outcome: "accepted",
  message:
    kind === DRILL_DUE_KIND
      ? drillDueMessage(due)
      : "[drill] model chat-model: drill d2 passed; no drill is due",
  data: (kind === DRILL_DUE_KIND ? due : {}) as unknown as HistoryEntry["data"],
});

function records(...extra: HistoryEntry[]): ReleaseRecord[] {
  const all = defaultRecords();
  all[0]?.history.push(...extra);
  return all;
}

const asJson = (r: ReleaseRecord | undefined) =>
  ({ ...r?.release, history: r?.history, attempt_results: r?.attempt_results }) as never;

async function page(rs: ReleaseRecord[]): Promise<string> {
  return visibleText(await releasePageHtml(rs, "r2", NOW));
}

describe("a due recovery drill is shown", () => {
  it("on the release page: the last passed drill, the interval, how to record one", async () => {
    const t = await page(records(entry(DRILL_DUE_KIND, due.observed_at)));
    expect(t).toContain(
      "Drill due: model chat-model&#39;s recovery was last rehearsed by drill d1",
    );
    expect(t).toContain("policy.drill_every_days is 7: a drill is due since");
    expect(t).toContain("baton drill chat-model --record FILE");
    expect(t).toContain("baton drill chat-model --rehearse --reason");
  });

  it("by baton status, until it is cleared", () => {
    const [withDue] = records(entry(DRILL_DUE_KIND, due.observed_at));
    expect(
      releaseSummary(asJson(withDue), NOW).find((l) => l.startsWith("  DRILL DUE since ")),
    ).toMatch(
      /model chat-model: a recovery drill is due: its last passed drill \(d1\) is 8 days old; the recipe's policy\.drill_every_days is 7/,
    );
    const [cleared] = records(
      entry(DRILL_DUE_KIND, due.observed_at),
      entry(DRILL_DUE_CLEARED_KIND, due.observed_at + 60_000),
    );
    expect(releaseSummary(asJson(cleared), NOW).some((l) => l.includes("DRILL DUE"))).toBe(false);
  });

  it("on no page once it is cleared", async () => {
    const t = await page(
      records(entry(DRILL_DUE_KIND, due.observed_at), entry(DRILL_DUE_CLEARED_KIND, NOW)),
    );
    expect(t).not.toContain("Drill due:");
  });
});
