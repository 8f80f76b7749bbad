/**
 * A release in a list (the dashboard's releases page, `baton status`): how far it got, steps
 * counted from 1, and what took effect for an ended one (never `0/24` for a rolled-back one).
 */
import { describe, expect, it } from "vitest";
import type { ReleaseState } from "../../engine/src/domain/states.ts";
import { stepProgress } from "../../engine/src/views/list-row.ts";

const row = (state: ReleaseState, cursor: number, hwm = cursor) => ({
  state,
  high_water_mark: hwm,
  cursor,
  step_count: 24,
});

describe("stepProgress", () => {
  it("numbers steps from 1 and says what is not started or undone", () => {
    expect(stepProgress(row("running", 0))).toBe("step 1 of 24");
    expect(stepProgress(row("running", 10))).toBe("step 11 of 24");
    expect(stepProgress(row("pending", 0, -1))).toBe("not started (24 steps)");
    expect(stepProgress(row("compensating", 10))).toBe("undoing step 11 of 24");
    expect(stepProgress(row("succeeded", 24, 23))).toBe("all 24 done");
  });

  it("says what a rolled-back release undid, not where its backward cursor ended", () => {
    // Compensation ends with the cursor below step 1; the high-water mark says how far it got.
    expect(stepProgress(row("rolled_back", -1, 8))).toBe("undone: steps 1–9 of 24");
    expect(stepProgress(row("rolled_back", -1, 0))).toBe("undone: step 1 of 24");
    expect(stepProgress(row("rolled_back", -1, -1))).toBe("nothing took effect (24 steps)");
    expect(stepProgress(row("aborted", 0, -1))).toBe("nothing took effect (24 steps)");
    expect(stepProgress(row("aborted", 12, 12))).toBe(
      "aborted after steps 1–13 of 24 (left as they are)",
    );
  });
});
