/**
 * `baton check`'s notes on waves (engine/src/domain/wave-rounds.ts): a drain that leaves fewer
 * lanes with traffic than `min_serving` (the floor counts lanes not excluded, and a wave's
 * lanes are drained to weight 0 before any leaves service).
 */
import { describe, expect, it } from "vitest";
import { compileRecipe } from "../../engine/src/domain/compile.ts";
import { Recipe, type RecipeInput } from "../../engine/src/domain/recipe.ts";
import { drainCapacityNotes } from "../../engine/src/domain/wave-rounds.ts";
import { wideRecipe } from "./recipe-fixture.ts";

/** 6 lanes: wave 1 = lane-a at 10%, wave 2 = lane-b … lane-f at 100%, max_unavailable 4. */
function sixLanes(extra: Partial<RecipeInput>) {
  const r = { ...wideRecipe(6), ...extra } as RecipeInput;
  const second = r.rollout?.waves?.[1];
  if (second) second.max_unavailable = 4;
  return compileRecipe(Recipe.parse(r)).manifest;
}

describe("drainCapacityNotes", () => {
  it("notes a wave whose drain sends all traffic to fewer lanes than min_serving", () => {
    const m = sixLanes({ min_serving: 2 });
    const drain = m.steps.find((s) => s.name === "drain_wave" && s.wave === 1);
    // The drain really leaves one lane with traffic (what the note is about).
    expect(drain?.forward.kind === "control_plane" && drain.forward.request).toMatchObject({
      weights: { "lane-a": 100, "lane-b": 0, "lane-f": 0 },
    });
    const notes = drainCapacityNotes(m);
    expect(notes).toHaveLength(1);
    expect(notes[0]?.path).toBe("min_serving");
    expect(notes[0]?.message).toContain(
      "while wave 2 redeploys, its drain_wave sends all of the model's traffic to 1 lane (lane-a), fewer than min_serving 2",
    );
  });

  it("says nothing when the drain keeps min_serving lanes with traffic, or without min_serving", () => {
    expect(drainCapacityNotes(sixLanes({ min_serving: 1 }))).toEqual([]);
    expect(drainCapacityNotes(sixLanes({}))).toEqual([]);
    // Wave 1 (lane-a) drains to the five lanes of wave 2: five with traffic, floor 5.
    const m = sixLanes({ min_serving: 5 });
    const notes = drainCapacityNotes(m);
    expect(notes.map((n) => n.message.slice(0, 24))).toEqual(["while wave 2 redeploys, "]);
  });
});
