/**
 * A control-plane write that timed out may still land later (rule 5). During compensation every
 * backward write carries the same generation, so the control plane's fence (rule 7) cannot
 * order them: if the engine took a matching read as the end of such a step run, the late
 * request could land after the next backward write and undo it. The engine re-sends the
 * identical keyed write first, so the late copy is only a replay. Both scenarios run the
 * pure simulator (test/support/sim) on recipes/example.yaml and assert on the control plane.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { newRelease } from "../../engine/src/domain/transition.ts";
import { compileRecipeText } from "../../engine/src/recipes/compile-text.ts";
import { T0 } from "../support/sim/drive.ts";
import { finalViolations } from "../support/sim/invariants.ts";
import { World } from "../support/sim/world.ts";

const example = compileRecipeText(
  readFileSync(join(import.meta.dirname, "../../recipes/example.yaml"), "utf8"),
  "example.yaml",
);
const world = () =>
  new World(newRelease("r17", 17, example.manifest, example.manifest_digest, T0), T0);
const pendingOf = (w: World, id: string) => {
  const row = w
    .pending("effect")
    .find((r) => "step_run_id" in r.effect && r.effect.step_run_id === id);
  if (!row) throw new Error(`no pending effect of ${id}`);
  return row;
};
const backwardKeys = (w: World) =>
  w.log.filter((a) => a.direction === "bwd").map((a) => a.operation_key);
/** Fault codes of `World.perform` for a control-plane apply: 0 answers, 5 times out in flight. */
const ANSWERED = 0;
const IN_FLIGHT = 5;

describe("a timed-out backward write that lands late", () => {
  it("property counterexample (seed 1344925060): step 1's late write no longer lands after step 0's", () => {
    const w = world();
    w.commit({ type: "start" });
    // The shrunk command list fast-check reported, replayed as is.
    const commands = [
      { k: 0, a: 0, b: 0 },
      { k: 5, a: 0, b: 0 },
      { k: 16, a: 0, b: 0 },
      { k: 0, a: 0, b: 693 },
      { k: 0, a: 0, b: 117 },
      { k: 0, a: 0, b: 256 },
      { k: 0, a: 0, b: 0 },
      { k: 15, a: 9, b: 0 },
      ...Array.from({ length: 10 }, () => ({ k: 0, a: 0, b: 0 })),
    ];
    for (const c of commands) w.apply(c);
    expect(w.drain(3000)).toBeGreaterThanOrEqual(0);
    expect(w.release.state).toBe("rolled_back");
    expect(backwardKeys(w)).toEqual([
      "r17:1:bwd:lane=lane-a:excluded=false",
      "r17:0:bwd:traffic=0",
    ]);
    expect(finalViolations(w)).toEqual([]);
  });

  it("a late 'exclude lane-a' of step 5's backward write cannot leave lane-a out of service after rolled_back", () => {
    const w = world();
    w.commit({ type: "start" });
    // Forward without faults until step 5 (include lane-a) has its apply due.
    for (
      let i = 0;
      i < 500 &&
      !w
        .pending("effect")
        .some((r) => "step_run_id" in r.effect && r.effect.step_run_id === "sr_17_5_f");
      i++
    ) {
      const row = w.pending("effect")[0];
      const run = w.runs.find((x) => x.phase !== "done");
      if (row) w.perform(row, ANSWERED, false);
      else if (run) w.stepRun(run, 0);
    }
    w.commit({ type: "abort", actor: "ops", reason: "regression" });
    w.perform(pendingOf(w, "sr_17_5_f"), IN_FLIGHT, false); // never answered
    w.perform(pendingOf(w, "sr_17_5_b"), IN_FLIGHT, false); // "exclude lane-a": in flight
    w.perform(pendingOf(w, "sr_17_5_b"), ANSWERED, false); // the read: lane-a is excluded already
    expect(w.drain(3000)).toBeGreaterThanOrEqual(0);
    expect(w.release.state).toBe("rolled_back");
    expect(w.cp.excluded.has("lane-a")).toBe(false);
    // Now the two requests that timed out land.
    const late = w.ghosts.map((g) =>
      w.cp.apply(g.row.request, g.row.operation_key, g.row.generation),
    );
    expect(late).toEqual(["refused_stale", "replayed"]);
    expect(w.cp.excluded.has("lane-a")).toBe(false);
    expect(w.cp.weights).toEqual({ "lane-a": 34, "lane-b": 33, "lane-c": 33 });
    expect(backwardKeys(w)).toEqual([
      "r17:5:bwd:lane=lane-a:excluded=true",
      "r17:4:bwd:lane=lane-a:capabilities=withdrawn",
      "r17:2:bwd:lane=lane-a:image=dd1bac8aae5f",
      "r17:1:bwd:lane=lane-a:excluded=false",
      "r17:0:bwd:traffic=0",
    ]);
    expect(finalViolations(w)).toEqual([]);
  });
});
