/** The releases list names the current step from 1, as the release page and `baton status`. */
import { describe, expect, it } from "vitest";
import type { ReleaseState } from "../../engine/src/domain/states.ts";
import { currentStep } from "../../engine/src/http/dashboard/releases-page.tsx";
import type { ReleaseSummary } from "../../engine/src/ports/store.ts";

const row = (state: ReleaseState, cursor: number): ReleaseSummary => ({
  id: "r1",
  state,
  recipe_name: "x",
  model: "m",
  high_water_mark: cursor,
  cursor,
  step_count: 24,
  created_at: 0,
  updated_at: 0,
});

describe("currentStep", () => {
  it("numbers steps from 1 and says what is not started or undone", () => {
    expect(currentStep(row("running", 0))).toBe("step 1 of 24");
    expect(currentStep(row("running", 10))).toBe("step 11 of 24");
    expect(currentStep(row("pending", 0))).toBe("not started (24 steps)");
    expect(currentStep(row("compensating", 10))).toBe("undoing step 11 of 24");
    expect(currentStep(row("rolled_back", -1))).toBe("undone");
    expect(currentStep(row("succeeded", 24))).toBe("all 24 done");
  });
});
