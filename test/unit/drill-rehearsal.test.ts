/**
 * When a rehearsal on the drill lanes is refused before any write (docs/recovery-actions.md
 * "Rehearsing on the drill lanes"): the pure judgement of the lanes read at the control plane.
 */
import { describe, expect, it } from "vitest";
import { rehearsalRefusal } from "../../engine/src/domain/drill-rehearsal.ts";

const lane = (id: string, weight: number, excluded = false) => ({ lane: id, weight, excluded });

describe("rehearsalRefusal", () => {
  it("passes drill lanes that serve, with another lane in routing to take their share", () => {
    expect(rehearsalRefusal("m", [lane("a", 50), lane("b", 50)], ["a"])).toBeNull();
  });

  it("refuses drill lanes that carry no traffic: the evacuation would move no request", () => {
    // A blue-green model after its switch: the marked blue lane is at weight 0.
    const p = rehearsalRefusal("m", [lane("a", 0), lane("c", 50), lane("d", 50)], ["a"]);
    expect(p?.path).toBe("drill_lanes");
    expect(p?.message).toContain("no drill lane of m (a) carries traffic");
    expect(p?.fix).toContain("mark `drill: true` on a lane that serves");
  });

  it("refuses when no other lane would take the drill lanes' share", () => {
    const p = rehearsalRefusal("m", [lane("a", 100), lane("b", 0)], ["a"]);
    expect(p?.message).toContain("would leave the model with none");
  });
});
