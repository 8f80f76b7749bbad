/**
 * The exposure rule through the reference router (issue 9): the compiled step table of
 * recipes/example.yaml (and generated variants) applied to the reference control plane one step
 * at a time, 10,000 requests routed after every step. The candidate image's share at the
 * router is never above the declared percent of the wave in force (0 before the first traffic
 * step), forward or backward, never rises during compensation, and compensation ends with every
 * lane in its baseline. The r17 exercise: the 10% canary gets 1,000 of 10,000, never more.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ControlPlaneCore } from "../../engine/src/control-plane/core.ts";
import { MemoryCpStore } from "../../engine/src/control-plane/memory-store.ts";
import type { Manifest, StepAction } from "../../engine/src/domain/types.ts";
import { actionOf } from "../../engine/src/protocol/control-plane.ts";
import { compileRecipeText } from "../../engine/src/recipes/compile-text.ts";

const REQUESTS = 10_000;
const example = compileRecipeText(
  readFileSync(join(import.meta.dirname, "../../recipes/example.yaml"), "utf8"),
  "example.yaml",
).manifest;

/** A fleet: the reference control plane plus what each lane runs (the target's truth). */
function fleet(m: Manifest) {
  const cp = new ControlPlaneCore(new MemoryCpStore(), () => 0);
  cp.seed(
    m.lanes.map((l) => ({
      id: l.id,
      model: m.model,
      weight: l.baseline_weight,
      capabilities: [...l.capabilities].sort(),
    })),
  );
  const image = new Map(m.lanes.map((l) => [l.id, m.previous_image]));
  const run = (a: StepAction, dir: "fwd" | "bwd", index: number) => {
    if (a.kind === "runner") {
      if (a.tool !== "run-smoke")
        image.set((a.args.lane as { id: string }).id, String(a.args.image));
      return;
    }
    const action = actionOf(a.request, m.model);
    if (action)
      cp.write(
        {
          operation_key: `r17:${index}:${dir}:${a.target}`,
          release_id: "r17",
          generation: dir === "fwd" ? 1 : 2,
        },
        action,
      );
  };
  /** Requests (of 10,000) the router sends to lanes running the new image. */
  const candidateRequests = () => {
    const routed = cp.route(m.model, REQUESTS);
    return Object.entries(routed.counts)
      .filter(([id]) => image.get(id) === m.image)
      .reduce((a, [, c]) => a + c, 0);
  };
  return { cp, image, run, candidateRequests };
}

/** Declared percent in force after forward step `i` ran (0 before the first traffic step). */
function declaredAfter(m: Manifest, i: number): number {
  let bound = 0;
  for (const s of m.steps.slice(0, i + 1)) {
    const a = s.forward;
    if (a.kind !== "control_plane" || a.request.op !== "set_traffic") continue;
    if (a.request.percent === m.waves[s.wave]!.traffic) bound = a.request.percent;
  }
  return bound;
}

function walk(m: Manifest) {
  const counts: number[] = [];
  for (let fail = 0; fail < m.steps.length; fail++) {
    const f = fleet(m);
    const before = structuredClone(f.cp.lanes(m.model));
    for (let i = 0; i <= fail; i++) {
      f.run(m.steps[i]!.forward, "fwd", i);
      const got = f.candidateRequests();
      expect(got, `after forward step ${i} ${m.steps[i]!.name}`).toBeLessThanOrEqual(
        (declaredAfter(m, i) * REQUESTS) / 100,
      );
      if (fail === m.steps.length - 1) counts.push(got);
    }
    if (fail === m.steps.length - 1) continue; // the release succeeded
    // Compensation from the failed step down, as the engine runs it.
    let last = f.candidateRequests();
    for (let j = fail; j >= 0; j--) {
      const back = m.steps[j]!.backward;
      if (!back) continue;
      f.run(back, "bwd", j);
      const got = f.candidateRequests();
      expect(got, `backward step ${j} rose from ${last}`).toBeLessThanOrEqual(last);
      last = got;
    }
    expect(last).toBe(0);
    expect(f.cp.lanes(m.model).map(({ updated_at: _, ...l }) => l)).toEqual(
      before.map(({ updated_at: _, ...l }) => l),
    );
    expect([...f.image.values()].every((img) => img === m.previous_image)).toBe(true);
  }
  return counts;
}

describe("exposure at the reference router, step by step", () => {
  it("r17: the 10% canary gets 1,000 of 10,000 requests, never more; 5,000 at 50%", () => {
    const counts = walk(example);
    const at = (name: string, target: string) =>
      counts[example.steps.findIndex((s) => s.name === name && s.forward.target === target)];
    expect(at("set_traffic", "traffic=10")).toBe(1_000);
    expect(at("set_traffic", "traffic=50")).toBe(5_000);
    expect(at("set_traffic", "traffic=100")).toBe(10_000);
    // While the 50% wave redeploys lane-b, the canary keeps its 1,000; lane-c is not overrun.
    expect(at("drain_wave", "drain:traffic=10")).toBe(1_000);
    expect(Math.max(...counts.slice(0, 8))).toBe(1_000);
  });

  it("holds for weighted baselines and uneven waves", () => {
    const text = readFileSync(join(import.meta.dirname, "../../recipes/example.yaml"), "utf8")
      .replace(
        "    capabilities: [summarize, summarize-long]\n    health_url: http://gpu-a1",
        "    capabilities: [summarize, summarize-long]\n    weight: 70\n    health_url: http://gpu-a1",
      )
      .replace(
        "    capabilities: [summarize, summarize-long]\n    health_url: http://gpu-b1",
        "    capabilities: [summarize, summarize-long]\n    weight: 20\n    health_url: http://gpu-b1",
      )
      .replace("    capabilities: [summarize]\n", "    capabilities: [summarize]\n    weight: 10\n")
      .replace(
        "    - lanes: [lane-b]\n      traffic: 50",
        "    - lanes: [lane-b, lane-c]\n      traffic: 100",
      )
      .replace("    - lanes: [lane-c]\n      traffic: 100\n", "");
    const m = compileRecipeText(text, "weighted.yaml").manifest;
    expect(m.lanes.map((l) => l.baseline_weight)).toEqual([70, 20, 10]);
    walk(m);
  });
});
