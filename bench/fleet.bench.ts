/**
 * Fleet benchmark (`npm run bench:fleet`), issue 15: the wall time of a parallel wave of 20
 * lanes against a wave of 1 lane, on the embedded default (one SSH target with many lanes, the
 * reference control plane over HTTP, the local runner running the bundled action and tools as
 * GitHub runners would, up to 20 runs at once), the engine on SQLite.
 *
 * Each run is one release of a recipe with `lanes + 1` lanes: wave 1 holds `lanes` lanes at 50%
 * with `max_unavailable: lanes` and `min_serving: 1` (the last lane), wave 2 the last lane at
 * 100%. `wave_wall_ms_N` = from wave 1's `drain_wave` step run created to its
 * `assert_traffic_observed` step run finished (the engine's own step runs, wall clock).
 * Observed from the environment every 20 ms during the wave, not from Baton's tables:
 *   max_concurrent       runner jobs executing at once (local runner events)
 *   max_out              lanes excluded at once on the control plane
 *   capacity_floor_held  lanes in service (not excluded) on the control plane never below 1
 *   overshoot_pct        candidate share of 10,000 requests routed by the control plane's
 *                        router (lanes labelled with the image the runner deployed) above the
 *                        declared percent in force (0 until wave 1's `set_traffic` applied)
 * The machine (2 cores, shared) runs every runner step as node processes (main and post of
 * the action, then the tool over SSH): 20 lanes mean 80 node processes competing for 2 cores,
 * which is what bounds the ratio here; on GitHub each job has its own runner.
 * Bounded: each run at most BENCH_FLEET_TIMEOUT_MS (default 240 s). Last line: RESULT {json}.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { loadRecipe, startStack } from "../engine/src/demo/stack.ts";
import type { RecipeInput } from "../engine/src/domain/recipe.ts";

const LANES = Math.min(40, Number(process.env.BENCH_FLEET_LANES ?? 20));
const TIMEOUT_MS = Number(process.env.BENCH_FLEET_TIMEOUT_MS ?? 240_000);
const TERMINAL = new Set(["succeeded", "rolled_back", "aborted", "needs_operator", "abandoned"]);

/** A recipe of `n + 1` lanes: wave 1 = n lanes in parallel at 50%, wave 2 = the last at 100%. */
function fleetRecipe(n: number): RecipeInput {
  const base = loadRecipe();
  const template = (base.lanes ?? [])[0];
  if (!template) throw new Error("[bench:fleet] the example recipe has no lane");
  const lanes = Array.from({ length: n + 1 }, (_, i) => ({
    ...template,
    id: `lane-${String(i).padStart(2, "0")}`,
    failure_domain: `rack-${i % 4}`,
  }));
  const wave = lanes.slice(0, n).map((l) => l.id);
  return {
    ...base,
    name: `fleet-${n}`,
    lanes,
    min_serving: 1,
    policy: { rerun_window_minutes: 0 },
    rollout: {
      waves: [
        { lanes: wave, traffic: 50, ...(n > 1 ? { max_unavailable: n } : {}) },
        { lanes: [lanes[n]?.id ?? "lane-00"], traffic: 100 },
      ],
    },
  };
}

interface Rec {
  state: string;
  reason?: string | null;
  step_runs: {
    id: string;
    state: string;
    last_error: string | null;
    step_index: number;
    direction: string;
    created_at: number;
    finished_at: number | null;
  }[];
}

interface RunResult {
  wall_ms: number;
  state: string;
  max_concurrent: number;
  max_out: number;
  min_in_service: number;
  overshoot_pct: number;
}

async function runWave(n: number): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), `baton-bench-fleet-${n}-`));
  let running = 0;
  let maxConcurrent = 0;
  const laneImage = new Map<string, string>();
  const t0 = Date.now();
  const stamp = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
  const DEBUG = process.env.BENCH_FLEET_DEBUG === "1";
  const lag = monitorEventLoopDelay({ resolution: 20 });
  lag.enable();
  const stack = await startStack({
    dir,
    ...(DEBUG
      ? {
          log: {
            info: (m: string) => console.error(stamp(), m),
            warn: (m: string) => console.error(stamp(), m),
            error: (m: string, e?: unknown) => console.error(stamp(), m, e),
          },
        }
      : {}),
    recipe: fleetRecipe(n),
    tickMs: 50,
    maxConcurrentRuns: Math.max(4, n),
    onRunEvent: (e) => {
      if (DEBUG)
        console.error(
          stamp(),
          `[run] ${e.type} ${e.run.stepRunId} ${e.run.payload.tool} ${e.run.conclusion ?? ""}`,
        );
      if (e.type === "started") maxConcurrent = Math.max(maxConcurrent, ++running);
      if (e.type === "finished" && e.run.startedAt !== undefined) running -= 1;
      if (e.type === "finished" && e.run.conclusion === "success") {
        const p = e.run.payload;
        const lane = (p.args as { lane?: { id?: string } }).lane?.id;
        const image = (p.args as { image?: string }).image;
        if (lane && image && p.tool !== "run-smoke") laneImage.set(lane, image);
      }
    },
  });
  const model = String(stack.manifest.model);
  for (const l of stack.manifest.lanes) laneImage.set(l.id, stack.manifest.previous_image);
  let maxOut = 0;
  let minInService = Number.POSITIVE_INFINITY;
  let overshoot = 0;
  const observe = () => {
    const core = stack.fleet.cp.core;
    const lanes = core.lanes(model);
    const out = lanes.filter((l) => l.excluded).length;
    maxOut = Math.max(maxOut, out);
    minInService = Math.min(minInService, lanes.length - out);
    // Percent in force: the highest forward traffic write applied (`set_traffic`, or a
    // `drain_wave` that moves a 100% wave's traffic first).
    let declared = 0;
    for (const h of core.history()) {
      const m = /:fwd:(?:drain:)?traffic=(\d+)$/.exec(h.operation_key);
      if (m) declared = Math.max(declared, Number(m[1]));
    }
    try {
      const routed = core.route(model, 10_000);
      const candidate = Object.entries(routed.counts)
        .filter(([id]) => laneImage.get(id) === stack.manifest.image)
        .reduce((a, [, c]) => a + c, 0);
      overshoot = Math.max(overshoot, candidate / 100 - declared);
    } catch {
      // No lane serving the model at this instant: nothing routed, no exposure.
    }
  };
  try {
    const res = await stack.api("/v1/releases", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: await stack.startBody(),
    });
    if (res.status !== 201 && res.status !== 200)
      throw new Error(`[bench:fleet] start answered ${res.status}: ${await res.text()}`);
    const { id } = (await res.json()) as { id: string };
    const until = Date.now() + TIMEOUT_MS;
    let rec: Rec | null = null;
    for (let i = 0; Date.now() < until && i < TIMEOUT_MS / 20; i++) {
      observe();
      if (i % 10 === 0) {
        rec = (await (await stack.api(`/v1/releases/${id}`)).json()) as Rec;
        if (rec && TERMINAL.has(rec.state)) break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    if (!rec) throw new Error("[bench:fleet] no release record");
    lag.disable();
    console.error(
      `[bench:fleet] ${n} lanes: engine process event-loop delay p50 ${(lag.percentile(50) / 1e6).toFixed(0)} ms, p99 ${(lag.percentile(99) / 1e6).toFixed(0)} ms, max ${(lag.max / 1e6).toFixed(0)} ms`,
    );
    if (rec.state !== "succeeded") {
      // Say why, so a failed run is diagnosable from the CI log alone.
      console.error(`[bench:fleet] release ended ${rec.state}: ${rec.reason ?? ""}`);
      for (const s of rec.step_runs.filter((x) => x.last_error).slice(0, 10))
        console.error(`[bench:fleet]   ${s.id} ${s.state}: ${s.last_error}`);
    }
    const steps = stack.manifest.steps;
    const first = steps.find((s) => s.wave === 0)?.index ?? 0;
    const last = steps.filter((s) => s.wave === 0).at(-1)?.index ?? 0;
    const at = (i: number) =>
      rec?.step_runs.find((s) => s.step_index === i && s.direction === "fwd");
    const start = at(first)?.created_at;
    const end = at(last)?.finished_at;
    return {
      wall_ms: start !== undefined && end != null ? end - start : Number.NaN,
      state: rec.state,
      max_concurrent: maxConcurrent,
      max_out: maxOut,
      min_in_service: minInService,
      overshoot_pct: Math.round(overshoot * 100) / 100,
    };
  } finally {
    await stack.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const one = await runWave(1);
console.error(`[bench:fleet] wave of 1 lane: ${JSON.stringify(one)}`);
const many = await runWave(LANES);
console.error(`[bench:fleet] wave of ${LANES} lanes: ${JSON.stringify(many)}`);
const ok = one.state === "succeeded" && many.state === "succeeded";
console.log(
  `RESULT ${JSON.stringify({
    lanes: LANES,
    wave_wall_ms_1: one.wall_ms,
    [`wave_wall_ms_${LANES}`]: many.wall_ms,
    ratio: Math.round((many.wall_ms / one.wall_ms) * 100) / 100,
    max_concurrent: many.max_concurrent,
    max_out: many.max_out,
    overshoot_pct: Math.max(one.overshoot_pct, many.overshoot_pct),
    capacity_floor_held: Math.min(one.min_in_service, many.min_in_service) >= 1,
    succeeded: ok,
    load_avg_1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
  })}`,
);
process.exit(ok ? 0 : 1);
