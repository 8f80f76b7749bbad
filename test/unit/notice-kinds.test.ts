/**
 * Which notice a state change gets: every kind the dashboard's on-call reader needs,
 * decided from the release before and after the change. The end-to-end deliveries are in
 * test/integration/notifier.test.ts; this covers the gate's hold, which needs `Release.gate`.
 */
import { describe, expect, it } from "vitest";
import { buildNotice, noticeKindFor } from "../../engine/src/domain/notifications.ts";
import type { Release } from "../../engine/src/domain/types.ts";
import { pausedRecord, runningRecord } from "../support/dashboard-fixtures.ts";

const running = (): Release => runningRecord().release;
const paused = (extra: Record<string, unknown> = {}): Release =>
  ({ ...pausedRecord().release, ...extra }) as Release;

describe("notice kinds", () => {
  it("paused, waiting for a re-run, waiting for promotion", () => {
    expect(noticeKindFor(running(), paused(), null)).toBe("paused");
    const rerun = paused({ rerun_deadline: Date.UTC(2026, 10, 29, 7, 45) });
    expect(noticeKindFor(running(), rerun, null)).toBe("waiting_for_rerun");
    expect(buildNotice("waiting_for_rerun", running(), rerun, { url: "u", at: 0 }).summary).toMatch(
      /^r5 failed; waiting for a re-run until 2026-11-29 07:45 UTC: step 2 /,
    );
    const gate = paused({
      gate: { wave: 0, phase: "gate" },
      reason: "gate of wave 1 is inconclusive",
    });
    expect(noticeKindFor(running(), gate, null)).toBe("waiting_for_promotion");
    expect(
      buildNotice("waiting_for_promotion", running(), gate, { url: "u", at: 0 }).summary,
    ).toContain("waits for an operator to promote or abort: gate of wave 1 is inconclusive");
  });

  it("abandoned, and no notice when the state does not change", () => {
    const stuck = { ...running(), state: "needs_operator" } as Release;
    const gone = {
      ...stuck,
      state: "abandoned",
      reason: "abandoned by alice: fixed by hand",
      abandoned: { actor: "alice", reason: "fixed by hand", at: 0, lanes: { "lane-1": "none" } },
    } as Release;
    expect(noticeKindFor(stuck, gone, null)).toBe("abandoned");
    expect(buildNotice("abandoned", stuck, gone, { url: "u", at: 0 }).summary).toContain(
      "confirmed lane-1 runs none",
    );
    expect(noticeKindFor(running(), running(), null)).toBeNull();
  });
});
