/**
 * Parallel waves in the transition function: effects of a parallel wave are
 * performed in a shuffled order (as concurrent runners and control-plane calls would answer),
 * and after every event the control plane's truth is checked: never more than
 * `max_unavailable` lanes excluded at once, never every lane of a failure domain, lanes of
 * the wave really in flight together, each step run begun once; failures compensate one lane at
 * a time (lanes out of service first, each lane's rows in reverse) back to the observed baseline.
 */
import { describe, expect, it } from "vitest";
import { compileRecipe } from "../../engine/src/domain/compile.ts";
import { Recipe, type RecipeInput } from "../../engine/src/domain/recipe.ts";
import { laneHighWaterMarks } from "../../engine/src/domain/transition/lanes.ts";
import { undoFrom } from "../../engine/src/domain/transition/plan.ts";
import { newRelease, transition } from "../../engine/src/domain/transition.ts";
import type {
  Effect,
  Manifest,
  ObservedBaseline,
  Release,
  ReleaseEvent,
} from "../../engine/src/domain/types.ts";
import { waveRoundNotes, waveRounds } from "../../engine/src/domain/wave-rounds.ts";
import { preflightOf } from "../support/sim/drive.ts";
import { wideRecipe } from "./recipe-fixture.ts";

const T0 = 1_800_000_000_000;

function manifestOf(
  n: number,
  k: number | string,
  domains?: (i: number) => string,
  rerunWindowMinutes?: number,
): Manifest {
  const r = wideRecipe(n) as RecipeInput;
  if (rerunWindowMinutes !== undefined) r.policy = { rerun_window_minutes: rerunWindowMinutes };
  const second = r.rollout?.waves?.[1];
  if (second) second.max_unavailable = k;
  if (domains) r.lanes = (r.lanes ?? []).map((l, i) => ({ ...l, failure_domain: domains(i) }));
  return compileRecipe(Recipe.parse(r)).manifest;
}

/**
 * `manifestOf(n, k)` compiled against an observed baseline in which the lanes `excluded` are
 * excluded on the control plane (weight 0); the other lanes share the traffic.
 */
function excludingAtStart(
  n: number,
  k: number,
  excluded: string[],
): { m: Manifest; baseline: ObservedBaseline } {
  const r = wideRecipe(n) as RecipeInput;
  const second = r.rollout?.waves?.[1];
  if (second) second.max_unavailable = k;
  const ids = (r.lanes ?? []).map((l) => l.id);
  const serving = ids.filter((id) => !excluded.includes(id));
  const baseline = (r.lanes ?? []).map((l) => {
    const out = excluded.includes(l.id);
    const i = serving.indexOf(l.id);
    const share = Math.floor(100 / serving.length) + (i === 0 ? 100 % serving.length : 0);
    return {
      id: l.id,
      weight: out ? 0 : share,
      excluded: out,
      capabilities: [...(l.capabilities ?? [])],
      advertised: false,
    };
  });
  return {
    m: compileRecipe(Recipe.parse(r), baseline).manifest,
    baseline: { read_at: T0, lanes: baseline, recipe_manifest_digest: "e".repeat(64) },
  };
}

/** A tiny seeded generator (mulberry32), so every shuffle is reproducible. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Pending {
  effect: Effect;
  phase: "send" | "preflight" | "callback";
}

/**
 * Drives a release to a terminal state; `failAt(lane, step name)` makes that callback fail.
 * `baseline`: the observed baseline the manifest was compiled against (`excludingAtStart`),
 * the control plane's state at start. `pick` chooses the pending effect performed next (index
 * into the queue; default: a seeded random one).
 */
function drive(
  m: Manifest,
  seed: number,
  failAt?: (lane: string, name: string) => boolean,
  opts: { baseline?: ObservedBaseline; pick?: (queue: readonly Pending[]) => number } = {},
) {
  const random = rng(seed);
  let r: Release = newRelease("r17", 17, m, "d".repeat(64), T0);
  if (opts.baseline) r = { ...r, baseline: opts.baseline };
  const excluded = new Set<string>(
    opts.baseline?.lanes.filter((l) => l.excluded).map((l) => l.id) ?? [],
  );
  // The rest of the control plane as the writes leave it (read back by a verification), from
  // the state the plan was compiled against (no observed baseline: the recipe's).
  let weights: Record<string, number> = Object.fromEntries(
    m.lanes.map((l) => [l.id, l.baseline_weight]),
  );
  const caps = new Map<string, { capabilities: string[]; advertised: boolean }>(
    m.lanes.map((l) => [l.id, { capabilities: [...l.capabilities].sort(), advertised: false }]),
  );
  const verifies: Extract<Effect, { type: "verify" }>[] = [];
  const keysApplied = new Map<string, number>();
  const queue: Pending[] = [];
  const reruns: Extract<Effect, { type: "deadline" }>[] = [];
  let maxOut = 0;
  let maxBusy = 0;
  let plannedUndo: number[] | null = null;
  const violations: string[] = [];
  const k = Math.max(...m.waves.map((w) => w.max_unavailable ?? 1));
  const apply = (e: ReleaseEvent) => {
    const res = transition(r, e, T0);
    if (!res.ok) throw new Error(`${e.type} refused: ${res.reason}`);
    r = res.release;
    // What a confirmation page lists as the undo when compensation begins.
    if (r.state === "compensating" && plannedUndo === null)
      plannedUndo = undoFrom(r, r.high_water_mark).map((p) => p.index);
    for (const eff of res.effects) {
      if (eff.type === "dispatch" || eff.type === "control_plane")
        queue.push({ effect: eff, phase: "send" });
      if (eff.type === "deadline" && eff.kind === "rerun") reruns.push(eff);
      if (eff.type === "verify") verifies.push(eff);
    }
    maxOut = Math.max(maxOut, excluded.size);
    if (excluded.size > k) violations.push(`${excluded.size} lanes excluded at once`);
    const domains = new Map<string, string[]>();
    for (const l of m.lanes)
      if (l.failure_domain)
        domains.set(l.failure_domain, [...(domains.get(l.failure_domain) ?? []), l.id]);
    for (const [d, ids] of domains)
      if (ids.length > 1 && ids.every((id) => excluded.has(id)))
        violations.push(`every lane of ${d} excluded at once`);
    const busy = new Set(
      r.step_runs
        .filter((s) => ["dispatching", "dispatched", "running", "applying"].includes(s.state))
        .map((s) => m.steps[s.step_index]?.lane),
    );
    maxBusy = Math.max(maxBusy, busy.size);
  };
  apply({ type: "start" });
  for (let guard = 0; guard < 20_000; guard++) {
    if (queue.length === 0) {
      // The undo's verification reads this control plane as the writes left it.
      const v = verifies.shift();
      if (v) {
        apply({
          type: "verified",
          seq: v.seq,
          generation: v.generation,
          reading: {
            at: T0,
            by: "the test's control plane",
            read_error: null,
            lanes: m.lanes.map((l) => ({
              id: l.id,
              control_plane: {
                weight: weights[l.id] ?? 0,
                excluded: excluded.has(l.id),
                capabilities: caps.get(l.id)?.capabilities ?? [],
                advertised: caps.get(l.id)?.advertised ?? false,
              },
              target: null,
              target_gap: "not observed in this test",
            })),
          },
        });
        continue;
      }
      // Nothing else in flight: the re-run windows pass without a re-run.
      const due = reruns.shift();
      if (!due) break;
      const { type: _, at: __, ...rest } = due;
      apply({ type: "deadline", ...rest });
      continue;
    }
    const at = opts.pick ? opts.pick(queue) : Math.floor(random() * queue.length);
    const [p] = queue.splice(at, 1);
    if (!p) break;
    const eff = p.effect;
    if (eff.type === "control_plane") {
      keysApplied.set(eff.operation_key, (keysApplied.get(eff.operation_key) ?? 0) + 1);
      const req = eff.request;
      if (req.op === "set_marker") {
        if (req.present) excluded.add(req.lane);
        else excluded.delete(req.lane);
      } else if (req.op === "set_traffic") {
        weights = Object.fromEntries(m.lanes.map((l) => [l.id, req.weights[l.id] ?? 0]));
      } else if (req.op === "set_capabilities") {
        caps.set(req.lane, {
          capabilities: [...new Set(req.capabilities)].sort(),
          advertised: req.advertised,
        });
      }
      apply({ type: "applied", step_run_id: eff.step_run_id, outcome: "ok", message: "applied" });
    } else if (eff.type === "dispatch") {
      const sr = r.step_runs.find((s) => s.id === eff.step_run_id);
      if (!sr || sr.dispatch !== eff.dispatch || sr.state === "failed") continue; // cancelled
      if (p.phase === "send") {
        apply({ type: "dispatch_accepted", step_run_id: sr.id, dispatch: eff.dispatch });
        queue.push({ effect: eff, phase: "preflight" });
      } else if (p.phase === "preflight") {
        const res = transition(r, preflightOf(r, sr.id, { run_id: `run-${sr.id}` }), T0);
        if (!res.ok) continue; // refused: the release no longer wants it (compensating)
        r = res.release;
        queue.push({ effect: eff, phase: "callback" });
      } else {
        const step = m.steps[sr.step_index];
        const fail = sr.direction === "fwd" && !!failAt?.(step?.lane ?? "", step?.name ?? "");
        apply({
          type: "callback",
          step_run_id: sr.id,
          run_id: `run-${sr.id}`,
          run_attempt: 1,
          status: fail ? "failed" : "succeeded",
          overall: fail ? "fail" : "pass",
        });
      }
    }
  }
  return { r, maxOut, maxBusy, violations, excluded, keysApplied, plannedUndo };
}

/**
 * The order compensation ran its backward step runs in: the table in reverse, except that the
 * lanes of a parallel wave are undone one lane at a time (each lane's rows in reverse), the
 * lanes out of service when it began (their `include_lane` never succeeded) before the lanes
 * back in service.
 */
function expectUndoOrder(r: Release) {
  const m = r.manifest;
  const bwd = r.step_runs.filter((s) => s.direction === "bwd").map((s) => s.step_index);
  const parallel = (i: number) => {
    const st = m.steps[i];
    return st?.lane != null && (m.waves[st.wave]?.max_unavailable ?? 1) > 1 ? st : null;
  };
  const serial = bwd.filter((i) => !parallel(i));
  expect(serial).toEqual([...serial].sort((a, b) => b - a));
  const lanes = bwd.flatMap((i) => parallel(i)?.lane ?? []);
  const runs = lanes.filter((l, i) => l !== lanes[i - 1]);
  expect(runs, "one lane at a time").toEqual([...new Set(runs)]);
  for (const lane of runs) {
    const rows = bwd.filter((i) => parallel(i)?.lane === lane);
    expect(rows).toEqual([...rows].sort((a, b) => b - a));
  }
  const back = (lane: string) => {
    const inc = m.steps.find((s) => s.lane === lane && s.name === "include_lane");
    return r.step_runs.some(
      (s) => s.step_index === inc?.index && s.direction === "fwd" && s.state === "succeeded",
    );
  };
  const firstBack = runs.findIndex(back);
  if (firstBack >= 0) expect(runs.slice(firstBack).every(back), runs.join(",")).toBe(true);
}

describe("parallel waves in the transition", () => {
  it("runs lanes of a wave concurrently within max_unavailable, every step run once", () => {
    const m = manifestOf(13, 4);
    for (const seed of [1, 2, 3, 4, 5]) {
      const out = drive(m, seed);
      expect(out.violations).toEqual([]);
      expect(out.r.state).toBe("succeeded");
      expect(out.maxOut).toBeGreaterThan(1);
      expect(out.maxOut).toBeLessThanOrEqual(4);
      expect(out.maxBusy).toBeGreaterThan(1);
      expect(out.r.step_runs.filter((s) => s.direction === "fwd")).toHaveLength(m.steps.length);
      expect([...out.keysApplied.values()].every((n) => n === 1)).toBe(true);
      expect(out.excluded.size).toBe(0);
      const hwms = laneHighWaterMarks(out.r);
      expect(Object.keys(hwms)).toHaveLength(12);
    }
  });

  it("never takes every lane of a failure domain out together", () => {
    // Two racks of 2 lanes and one of 8: with max_unavailable 6 the small racks go one by one.
    const m = manifestOf(13, 6, (i) =>
      i >= 1 && i <= 2 ? "rack-a" : i <= 4 ? "rack-b" : "rack-c",
    );
    for (const seed of [7, 8, 9]) {
      const out = drive(m, seed);
      expect(out.violations).toEqual([]);
      expect(out.r.state).toBe("succeeded");
      expect(out.maxOut).toBeGreaterThan(1);
    }
  });

  it("waveRounds' at_once is the most lanes the engine takes out at once; the note names the held domains", () => {
    // Lane 0 (wave 1) is in rack-0, so rack-0 is not held; racks 1-3 have all 3 lanes in wave 2.
    const held = manifestOf(13, 12, (i) => `rack-${i % 4}`);
    expect(waveRounds(held)).toEqual([
      {
        wave: 2,
        lanes: 12,
        max_unavailable: 12,
        at_once: 9,
        held_domains: ["rack-1", "rack-2", "rack-3"],
        min_rounds: 2,
      },
    ]);
    const [note, ...more] = waveRoundNotes(held);
    expect(more).toEqual([]);
    expect(note?.path).toBe("rollout.waves.1.max_unavailable");
    expect(note?.message).toContain(
      "at most 9 of its 12 lanes out of service at once, not 12: failure domains",
    );
    expect(note?.message).toContain("failure domains rack-1, rack-2, rack-3 have every lane");
    expect(note?.message).toContain("at least 2 rounds");
    // No domains: max_unavailable alone bounds the wave, and there is nothing to note.
    const free = manifestOf(13, 4);
    expect(waveRounds(free)).toEqual([
      {
        wave: 2,
        lanes: 12,
        max_unavailable: 4,
        at_once: 4,
        held_domains: [],
        min_rounds: 3,
      },
    ]);
    expect(waveRoundNotes(free)).toEqual([]);
    expect(waveRounds(manifestOf(13, 1))).toEqual([]);
    // What the engine really does: never more than at_once lanes excluded on the control plane
    // or in flight, and at_once lanes in flight together when the wave begins (lane-j, the last
    // of rack-1 in service, lets lane-k and lane-l go first).
    for (const [m, atOnce] of [
      [held, 9],
      [free, 4],
      [manifestOf(13, 12, (i) => (i === 0 ? "solo" : `zone-${i % 2}`)), 10],
    ] as const) {
      expect(waveRounds(m)[0]?.at_once).toBe(atOnce);
      for (const seed of [31, 32, 33]) {
        const out = drive(m, seed);
        expect(out.violations).toEqual([]);
        expect(out.r.state).toBe("succeeded");
        expect(out.maxOut).toBeLessThanOrEqual(atOnce);
        expect(out.maxBusy).toBe(atOnce);
      }
    }
  });

  it("a failing lane compensates every lane, lanes out of service first, each lane's rows in reverse, limits held", () => {
    const m = manifestOf(13, 4);
    for (const seed of [11, 12, 13, 14]) {
      const out = drive(
        m,
        seed,
        (lane, name) => lane === "lane-f" && name === "assert_smoke_passed",
      );
      expect(out.violations).toEqual([]);
      expect(
        out.r.state,
        `${out.r.reason} ${JSON.stringify(out.r.step_runs.filter((s) => s.state !== "succeeded").map((s) => [s.id, s.state]))}`,
      ).toBe("rolled_back");
      expect(out.excluded.size).toBe(0);
      expectUndoOrder(out.r);
      expect(out.r.step_runs.some((s) => s.direction === "bwd")).toBe(true);
      expect([...out.keysApplied.values()].every((n) => n === 1)).toBe(true);
    }
  });

  it("compensation at once (no re-run window) waits for lanes in flight and cancels unbound dispatches", () => {
    const m = manifestOf(13, 5, undefined, 0);
    for (const seed of [21, 22, 23, 24, 25, 26]) {
      const out = drive(m, seed, (lane, name) => lane === "lane-e" && name === "attach_queue_lane");
      expect(out.violations).toEqual([]);
      expect(out.r.state).toBe("rolled_back");
      expect(out.excluded.size).toBe(0);
      expectUndoOrder(out.r);
      expect([...out.keysApplied.values()].every((n) => n === 1)).toBe(true);
    }
  });

  it("compensation undoes the lanes out of service first, a lane excluded before the start last: max_unavailable holds", () => {
    // Wave 2 is lane-b, lane-c, lane-d (max_unavailable 2); lane-d is excluded on the control
    // plane when the release starts. lane-d begins at once and lane-b beside it; lane-c goes
    // when lane-d is back. lane-b's runner is slow: c and d are back in service on the new
    // image before its smoke check fails. Undoing in table order would exclude lane-d again
    // (its baseline) and then lane-c while lane-b is still out: 3 lanes of the wave out.
    const { m, baseline } = excludingAtStart(4, 2, ["lane-d"]);
    expect(m.waves[1]?.max_unavailable).toBe(2);
    const laneOf = (p: Pending) => {
      const id =
        p.effect.type === "dispatch" || p.effect.type === "control_plane"
          ? p.effect.step_run_id
          : "";
      return r0.manifest.steps[Number(/^sr_\d+_(\d+)_/.exec(id)?.[1])]?.lane ?? null;
    };
    const r0 = newRelease("r17", 17, m, "d".repeat(64), T0);
    const out = drive(m, 1, (lane, name) => lane === "lane-b" && name === "assert_smoke_passed", {
      baseline,
      // lane-b's effects wait while any other effect can be performed.
      pick: (queue) =>
        Math.max(
          0,
          queue.findIndex((p) => laneOf(p) !== "lane-b"),
        ),
    });
    expect(out.violations).toEqual([]);
    expect(out.maxOut).toBe(2);
    expect(out.r.state, `${out.r.reason}`).toBe("rolled_back");
    // Back to the observed baseline: lane-d excluded, the others in service.
    expect([...out.excluded]).toEqual(["lane-d"]);
    // lane-c and lane-d were back on the new image when lane-b failed.
    const include = (lane: string) =>
      m.steps.find((s) => s.lane === lane && s.name === "include_lane")?.index;
    for (const lane of ["lane-c", "lane-d"])
      expect(
        out.r.step_runs.find((s) => s.step_index === include(lane) && s.direction === "fwd")?.state,
      ).toBe("succeeded");
    // Undone lane by lane: lane-b (out of service), lane-c, then lane-d (excluded at start).
    const undone = out.r.step_runs
      .filter((s) => s.direction === "bwd")
      .map((s) => m.steps[s.step_index]?.lane)
      .filter((l) => l !== null && l !== "lane-a");
    expect(undone.filter((l, i) => l !== undone[i - 1])).toEqual(["lane-b", "lane-c", "lane-d"]);
    // The undo the plan listed when compensation began is the one that ran.
    expect(out.plannedUndo).toEqual(
      out.r.step_runs.filter((s) => s.direction === "bwd").map((s) => s.step_index),
    );
    expect([...out.keysApplied.values()].every((n) => n === 1)).toBe(true);
  });

  it("a serial wave (no max_unavailable) never has two lanes in flight", () => {
    const m = manifestOf(6, 1);
    const out = drive(m, 3);
    expect(out.r.state).toBe("succeeded");
    expect(out.maxBusy).toBe(1);
    expect(out.maxOut).toBe(1);
  });
});
