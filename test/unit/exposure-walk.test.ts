/**
 * The exposure rule through the reference router: the compiled step table of
 * recipes/example.yaml (and generated variants) applied to the reference control plane one step
 * at a time, 10,000 requests routed after every step. The candidate image's share at the
 * router is never above the declared percent of the wave in force (0 before the first traffic
 * step), forward or backward, never rises during compensation, and compensation ends with every
 * lane in its baseline. The r17 exercise: the 10% canary gets 1,000 of 10,000, never more.
 * Parallel waves: the lanes' rows interleave as the engine may walk them (seeded random
 * orders within max_unavailable, failure domains and min_serving), a failure after any of
 * them, compensation backwards by table index over what ran: the same ceiling at every step.
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

/**
 * A forward order the engine may walk `m` in: serial rows in table order; in a parallel wave,
 * lanes leave service in the wave's order while fewer than `max_unavailable` are out, passing
 * over a lane that would be the last of its failure domain in service, and lanes out advance one row at a time in a
 * random (seeded) interleaving.
 */
function parallelOrder(m: Manifest, seed: number): number[] {
  let x = seed >>> 0 || 1;
  const rand = (n: number) => {
    x = (x * 1103515245 + 12345) >>> 0;
    return (x >>> 8) % n;
  };
  const order: number[] = [];
  let i = 0;
  while (i < m.steps.length) {
    const step = m.steps[i]!;
    const k = m.waves[step.wave]?.max_unavailable ?? 1;
    if (step.lane === null || k <= 1) {
      order.push(i++);
      continue;
    }
    const wave = step.wave;
    const rows = new Map<string, number[]>();
    for (const s of m.steps) {
      if (s.wave === wave && s.lane !== null)
        rows.set(s.lane, [...(rows.get(s.lane) ?? []), s.index]);
    }
    const waiting = [...(m.waves[wave]?.lanes ?? [])];
    const out = new Map<string, number[]>(); // lane -> rows still to run
    const domainOf = (id: string) => m.lanes.find((l) => l.id === id)?.failure_domain;
    const mayLeave = (id: string) => {
      if (out.size >= k) return false;
      const d = domainOf(id);
      if (d === undefined) return true;
      const members = m.lanes.filter((l) => l.failure_domain === d).map((l) => l.id);
      return members.length <= 1 || members.filter((l) => out.has(l)).length + 1 < members.length;
    };
    for (let guard = 0; guard < 10_000 && (waiting.length > 0 || out.size > 0); guard++) {
      // The first waiting lane its limits let go (one its domain holds back lets later go).
      const next = waiting.findIndex((id) => mayLeave(id));
      const lanes = [...out.keys()];
      if (next >= 0 && (lanes.length === 0 || rand(3) === 0)) {
        const [id] = waiting.splice(next, 1) as [string];
        out.set(id, [...(rows.get(id) ?? [])]);
        order.push(out.get(id)!.shift()!);
        continue;
      }
      const id = lanes[rand(lanes.length)]!;
      const left = out.get(id)!;
      order.push(left.shift()!);
      if (left.length === 0) out.delete(id);
    }
    i = Math.max(...[...rows.values()].flat()) + 1;
  }
  return order;
}

/** The walk of `walk` over the forward order `order` (failure after each of its steps). */
function walkOrder(m: Manifest, order: number[]): { maxOut: number } {
  let maxOut = 0;
  const minServing = m.min_serving ?? 0;
  for (let fail = 0; fail < order.length; fail++) {
    const f = fleet(m);
    const before = structuredClone(f.cp.lanes(m.model));
    let declared = 0;
    const ran: number[] = [];
    for (const i of order.slice(0, fail + 1)) {
      const st = m.steps[i]!;
      f.run(st.forward, "fwd", i);
      ran.push(i);
      const a = st.forward;
      if (
        a.kind === "control_plane" &&
        a.request.op === "set_traffic" &&
        a.request.percent === m.waves[st.wave]!.traffic
      )
        declared = a.request.percent;
      const got = f.candidateRequests();
      expect(
        got,
        `after forward step ${i} ${st.name} ${st.lane ?? ""} (order ${order.join(",")})`,
      ).toBeLessThanOrEqual((declared * REQUESTS) / 100);
      const lanes = f.cp.lanes(m.model);
      const out = lanes.filter((l) => l.excluded).length;
      maxOut = Math.max(maxOut, out);
      expect(lanes.length - out, `in service after step ${i}`).toBeGreaterThanOrEqual(minServing);
      for (const d of new Set(
        m.lanes.flatMap((l) => (l.failure_domain ? [l.failure_domain] : [])),
      )) {
        const members = m.lanes.filter((l) => l.failure_domain === d).map((l) => l.id);
        if (members.length > 1)
          expect(
            members.every((id) => lanes.find((l) => l.id === id)?.excluded),
            `all of ${d} out after step ${i}`,
          ).toBe(false);
      }
    }
    if (fail === order.length - 1) continue;
    let last = f.candidateRequests();
    for (const j of [...ran].sort((a, b) => b - a)) {
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
  }
  return { maxOut };
}

describe("exposure at the reference router over parallel waves", () => {
  const base = readFileSync(join(import.meta.dirname, "../../recipes/example.yaml"), "utf8");
  /** Seven lanes: the canary, then six in parallel over two failure domains. */
  function parallelText(o: { max: number | string; minServing?: string; traffic: number[] }) {
    const extra = ["lane-d", "lane-e", "lane-f", "lane-g"]
      .map(
        (id, i) =>
          `  - id: ${id}\n    host: 10.20.4.${20 + i}\n    user: deploy\n    host_key: SHA256:SqbDbt6xh7sqJ9YN3uL+znBevZiH+YIo9i05LEjoBAU\n    queue: summarize\n    capabilities: [summarize]\n    failure_domain: ${i % 2 === 0 ? "rack-1" : "rack-2"}\n    health_url: http://10.20.4.${20 + i}:8080/healthz\n`,
      )
      .join("");
    return base
      .replace(
        "    queue: summarize-canary\n",
        "    queue: summarize-canary\n    failure_domain: rack-2\n",
      )
      .replace("    port: 2222\n", "    port: 2222\n    failure_domain: rack-1\n")
      .replace("    host: 10.20.4.17\n", "    host: 10.20.4.17\n    failure_domain: rack-2\n")
      .replace(
        "\nrollout:",
        `${extra}\n${o.minServing ? `min_serving: "${o.minServing}"\n` : ""}rollout:`,
      )
      .replace(
        /rollout:\n {2}waves:[\s\S]*?\n\npolicy:/,
        `rollout:\n  waves:\n    - lanes: [lane-a]\n      traffic: ${o.traffic[0]}\n    - lanes: [lane-b, lane-c, lane-d]\n      traffic: ${o.traffic[1]}\n      max_unavailable: ${JSON.stringify(o.max)}\n    - lanes: [lane-e, lane-f, lane-g]\n      traffic: 100\n      max_unavailable: ${JSON.stringify(o.max)}\n\npolicy:`,
      );
  }

  it("every interleaving tried keeps the ceiling, the limits and an exact compensation", () => {
    const cases = [
      { max: 3, traffic: [10, 50] },
      { max: "100%", minServing: "50%", traffic: [5, 40] },
      { max: 2, minServing: "60%", traffic: [20, 70] },
    ];
    let tried = 0;
    for (const c of cases) {
      const m = compileRecipeText(parallelText(c), "parallel.yaml").manifest;
      expect(m.waves[1]?.max_unavailable, JSON.stringify(c)).toBeGreaterThan(1);
      let maxOut = 0;
      for (let seed = 1; seed <= 3; seed++) {
        const order = parallelOrder(m, seed * 7919);
        expect([...order].sort((a, b) => a - b)).toEqual(m.steps.map((s) => s.index));
        maxOut = Math.max(maxOut, walkOrder(m, order).maxOut);
        tried += 1;
      }
      // The interleavings did take several lanes out together.
      expect(maxOut, JSON.stringify(c)).toBeGreaterThan(1);
    }
    expect(tried).toBe(9);
  });
});
