/**
 * The limit check of the chaos parallel-wave scenario (`checkLimits`,
 * test/chaos/parallel-scenario.ts) on hand-written control-plane histories: it must pass the
 * walk the engine takes and name each limit a history breaks (max_unavailable, a whole failure
 * domain out, min_serving), so `limits_exceeded: 0` in `npm run test:chaos` means something.
 */
import { describe, expect, it } from "vitest";
import type { ChangeRecord } from "../../engine/src/control-plane/model.ts";
import type { Release } from "../../engine/src/domain/types.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { checkLimits, parallelRecipe } from "../chaos/parallel-scenario.ts";
import type { Evidence } from "../support/chaos-world.ts";

/** Evidence holding only what `checkLimits` reads: the manifest and the control plane's changes. */
function evidenceOf(changes: [lane: string, excluded: boolean][], minServing = 1): Evidence {
  const manifest = { ...compileRecipeInput(parallelRecipe()).manifest, min_serving: minServing };
  const state = new Map<string, boolean>();
  const cpHistory: ChangeRecord[] = changes.map(([lane, excluded], i) => {
    const before = { excluded: state.get(lane) ?? false };
    state.set(lane, excluded);
    return {
      id: i + 1,
      at: i,
      operation_key: `r1:${i}:fwd:lane=${lane}:excluded=${excluded}`,
      release_id: "r1",
      generation: 1,
      kind: "set_marker",
      lane,
      model: null,
      before,
      after: { excluded },
    };
  });
  return { release: { id: "r1", manifest } as Release, cpHistory } as Evidence;
}

describe("chaos parallel-wave limit check", () => {
  it("passes the engine's walk: lane-a and lane-c out together, lane-b once lane-a is back", () => {
    const seen = checkLimits(
      evidenceOf([
        ["lane-a", true],
        ["lane-c", true],
        ["lane-a", false],
        ["lane-b", true],
        ["lane-c", false],
        ["lane-b", false],
      ]),
    );
    expect(seen.problems).toEqual([]);
    expect(seen.maxOut).toBe(2);
    expect(seen.minServing).toBe(1);
  });

  it("names three lanes out (max_unavailable 2), a whole failure domain out, and min_serving", () => {
    const three = checkLimits(
      evidenceOf(
        [
          ["lane-a", true],
          ["lane-c", true],
          ["lane-b", true],
        ],
        0,
      ),
    );
    expect(three.maxOut).toBe(3);
    expect(three.problems.join("\n")).toContain("3 lanes of wave 1 out, max_unavailable 2");
    const domain = checkLimits(
      evidenceOf([
        ["lane-a", true],
        ["lane-b", true],
      ]),
    );
    expect(domain.problems.join("\n")).toContain("every lane of failure domain rack-1 out");
    const floor = checkLimits(
      evidenceOf(
        [
          ["lane-a", true],
          ["lane-c", true],
        ],
        2,
      ),
    );
    expect(floor.problems.join("\n")).toContain("1 lanes in service, min_serving 2");
  });
});
