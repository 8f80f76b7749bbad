/**
 * The parallel-wave scenario of `npm run test:chaos`: the example's three
 * lanes redeployed in ONE parallel wave (`max_unavailable: 2`; lane-a and lane-b share failure
 * domain rack-1, lane-c is rack-2; `min_serving: 1`; the wave lists lane-a, lane-c, lane-b, so
 * lane-a and lane-c leave service together and lane-b waits for both limits), the engine
 * SIGKILLed at kill points inside the wave's lane rows while two lanes are in flight, one
 * SIGKILL after another.
 *
 * The kill points are fault points of the wave's lane rows (a control-plane row: before and
 * after its write; a runner row: before and after its dispatch, before and after its
 * callback's commit), named by lane, row and point (`CHAINS`) and found in the compiled step
 * table, so the two chained runs start at once,
 * alongside the uncrashed dry run; the dry run's fault-point trace must then contain every one
 * of them. Each chained run is judged like the crash scenario (no effect twice at the control
 * plane or the target, the dry run's terminal state, lanes and images), and the reference
 * control plane's history of every run is replayed change by change: each time a lane leaves
 * service, at most `max_unavailable` lanes of the wave out, never every lane of a failure
 * domain, never fewer than `min_serving` lanes in service.
 */
import { join } from "node:path";
import { loadRecipe } from "../../engine/src/demo/stack.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { Manifest } from "../../engine/src/domain/types.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import type { Evidence } from "../support/chaos-world.ts";
import {
  type CaseResult,
  distinctPoints,
  expectedOf,
  judge,
  type KillPoint,
  killSpec,
  runCase,
} from "./crash.ts";
import { pool, type Row } from "./table.ts";

/** Failure domains of the scenario's lanes. */
export const DOMAINS: Record<string, string> = {
  "lane-a": "rack-1",
  "lane-b": "rack-1",
  "lane-c": "rack-2",
};
/** The parallel wave, in the order lanes leave service. */
export const WAVE = ["lane-a", "lane-c", "lane-b"];

/** The example recipe's lanes in one parallel wave with declared limits. */
export function parallelRecipe(): RecipeInput {
  const base = loadRecipe();
  const lanes = (base.lanes ?? []).map((l) => ({
    ...l,
    failure_domain: DOMAINS[l.id] as string,
  }));
  return {
    ...base,
    lanes,
    min_serving: 1,
    rollout: { waves: [{ lanes: WAVE, traffic: 100, max_unavailable: 2 }] },
  };
}

/** What the replay of one run's control-plane history showed. */
export interface LimitsSeen {
  /** Most lanes of a parallel wave out of service at once. */
  maxOut: number;
  /** Fewest of the recipe's lanes in service at once. */
  minServing: number;
  problems: string[];
}

/**
 * Replays the reference control plane's changes of the release in order and, each time one
 * takes a lane out of service (`excluded` false -> true), checks the manifest's limits: at most
 * the wave's `max_unavailable` lanes of a parallel wave out, never every lane of a failure
 * domain of several lanes, at least `min_serving` lanes in service. Lanes start as the first
 * change of each shows them (`before`), so a lane excluded at the start counts as out.
 */
export function checkLimits(ev: Evidence): LimitsSeen {
  const m: Manifest = ev.release.manifest;
  const ids = m.lanes.map((l) => l.id);
  const history = [...ev.cpHistory]
    .filter((h) => h.release_id === ev.release.id)
    .sort((a, b) => a.id - b.id);
  const excluded = new Map<string, boolean>();
  for (const id of ids) {
    const first = history.find((h) => h.lane === id);
    excluded.set(id, (first?.before as { excluded?: boolean } | null)?.excluded === true);
  }
  const waveOf = new Map(m.waves.flatMap((w, i) => w.lanes.map((id) => [id, i] as const)));
  const domainOf = new Map(m.lanes.map((l) => [l.id, l.failure_domain]));
  const problems: string[] = [];
  let maxOut = 0;
  let minServing = ids.filter((id) => !excluded.get(id)).length;
  for (const h of history) {
    if (h.lane === null || !excluded.has(h.lane)) continue;
    const was = excluded.get(h.lane) === true;
    const now = (h.after as { excluded?: boolean } | null)?.excluded === true;
    excluded.set(h.lane, now);
    const out = ids.filter((id) => excluded.get(id));
    minServing = Math.min(minServing, ids.length - out.length);
    if (was || !now) continue;
    const at = `after control-plane change ${h.id} (${h.operation_key}; lanes out: ${out.join(", ")})`;
    const w = waveOf.get(h.lane) ?? -1;
    const limit = m.waves[w]?.max_unavailable ?? 1;
    if (limit > 1) {
      const waveOut = out.filter((id) => waveOf.get(id) === w).length;
      maxOut = Math.max(maxOut, waveOut);
      if (waveOut > limit)
        problems.push(`${waveOut} lanes of wave ${w + 1} out, max_unavailable ${limit}, ${at}`);
      const d = domainOf.get(h.lane);
      const members = ids.filter((id) => d !== undefined && domainOf.get(id) === d);
      if (members.length > 1 && members.every((id) => excluded.get(id)))
        problems.push(`every lane of failure domain ${d} out ${at}`);
    }
    if (m.min_serving !== undefined && ids.length - out.length < m.min_serving)
      problems.push(
        `${ids.length - out.length} lanes in service, min_serving ${m.min_serving}, ${at}`,
      );
  }
  return { maxOut, minServing, problems };
}

/**
 * The kill points of the parallel wave's lane rows, in table order: a control-plane row's
 * write (before it, and after it before its outcome is committed), a runner row's dispatch
 * (the same two) and its callback (before and after the commit). Step run ids are those of
 * the first release of a fresh store (`r1`).
 */
export function waveKillPoints(m: Manifest): KillPoint[] {
  const out: KillPoint[] = [];
  for (const s of m.steps) {
    if (s.lane === null || (m.waves[s.wave]?.max_unavailable ?? 1) <= 1) continue;
    const step_run_id = `sr_1_${s.index}_f`;
    const effect = s.kind === "runner" ? "dispatch" : "control_plane";
    out.push({ name: "after_commit_before_effect", detail: { step_run_id, effect } });
    out.push({ name: "after_effect_before_outcome", detail: { step_run_id, effect } });
    if (s.kind === "runner") {
      out.push({ name: "in_callback_before_commit", detail: { step_run_id } });
      out.push({ name: "after_callback_commit", detail: { step_run_id } });
    }
  }
  return out;
}

export interface ParallelOutcome {
  rows: Row[];
  /** Kill points chosen (each armed in a chained run). */
  killPoints: number;
  /** Kill points whose SIGKILL happened. */
  reached: number;
  duplicates: number;
  wrongTerminal: number;
  /** Limit violations in any run (max_unavailable, failure domain, min_serving). */
  limitViolations: number;
  /** Most lanes of the wave out of service at once over every run. */
  maxOut: number;
  problems: string[];
}

/** A kill point of the wave: the fault point `name` on the forward step run of `lane`'s row `row`. */
interface Pick {
  lane: string;
  row: string;
  name: string;
}

/**
 * The two chains, each ordered so its points come one after the other whatever the timing:
 * chain 1 walks lane-a (out together with lane-c), then lane-b, which leaves service only once
 * lane-a is back (they share rack-1); chain 2 walks lane-c alone, from its exclusion to its
 * inclusion, while lane-a and then lane-b are out beside it. Together they cover the four
 * fault points, control-plane rows and runner rows (dispatch and callback).
 */
const CHAINS: Pick[][] = [
  [
    { lane: "lane-a", row: "exclude_lane", name: "after_effect_before_outcome" },
    { lane: "lane-a", row: "attach_queue_lane", name: "in_callback_before_commit" },
    { lane: "lane-b", row: "attach_queue_lane", name: "after_commit_before_effect" },
    { lane: "lane-b", row: "assert_smoke_passed", name: "after_callback_commit" },
  ],
  [
    { lane: "lane-c", row: "exclude_lane", name: "after_commit_before_effect" },
    { lane: "lane-c", row: "attach_queue_lane", name: "after_effect_before_outcome" },
    { lane: "lane-c", row: "assert_smoke_passed", name: "in_callback_before_commit" },
    { lane: "lane-c", row: "include_lane", name: "after_effect_before_outcome" },
  ],
];

/** The kill point of `p` among `points` (the wave's, from the step table). */
function pick(m: Manifest, points: KillPoint[], p: Pick): KillPoint {
  const step = m.steps.find((s) => s.lane === p.lane && s.name === p.row);
  const k = points.find(
    (x) => x.name === p.name && x.detail.step_run_id === `sr_1_${step?.index}_f`,
  );
  if (!k) throw new Error(`[chaos] parallel: no kill point ${p.name} on ${p.lane} ${p.row}`);
  return k;
}

/**
 * Runs the scenario under `root`: the dry run and the two chained releases (`CHAINS`, 8 kill
 * points), all three at once.
 */
export async function parallelScenario(root: string): Promise<ParallelOutcome> {
  const log = (s: string) => console.log(`[chaos] ${s}`);
  const recipe = parallelRecipe();
  const manifest = compileRecipeInput(recipe).manifest;
  const wave = manifest.waves[0];
  const all = waveKillPoints(manifest);
  const chains = CHAINS.map((c) => c.map((p) => pick(manifest, all, p)));
  const chosen = chains.flat();
  log(
    `parallel: one wave of ${WAVE.length} lanes (max_unavailable ${wave?.max_unavailable}, min_serving ${manifest.min_serving}, lane-a and lane-b in one failure domain); ${all.length} kill points in its lane rows, ${chosen.length} of them in ${chains.length} chained releases beside the dry run: ${chosen.map(killSpec).join(" ")}`,
  );
  const runs = await pool(
    chains.length + 1,
    [
      { label: "parallel dry", chain: [] as KillPoint[] },
      ...chains.map((chain, n) => ({ label: `parallel chain ${n + 1}`, chain })),
    ].map(
      (job, n) =>
        async (): Promise<{ label: string; chain: KillPoint[]; r: CaseResult | Error }> => {
          try {
            const r = await runCase({
              label: job.label,
              dir: join(root, `run-${n}`),
              failAt: null,
              chain: job.chain,
              recipe,
              // Three worlds share the machine: at load 38 the uncrashed run alone took 293 s,
              // and each of a chain's four restarts costs up to 25 s more (importing the engine).
              timeoutMs: 600_000,
              ...(n === 0 ? { traceFile: join(root, "trace.jsonl") } : {}),
            });
            return { ...job, r };
          } catch (e) {
            log(`${job.label}: FAILED: ${(e as Error).message.split("\n")[0]?.slice(0, 400)}`);
            return { ...job, r: e as Error };
          }
        },
    ),
  );

  const problems: string[] = [];
  const rows: Row[] = [];
  let limitViolations = 0;
  let maxOut = 0;
  let duplicates = 0;
  let wrongTerminal = 0;
  const reached = new Set<string>();
  const dry = runs[0]!;
  if (dry.r instanceof Error) {
    problems.push(`parallel dry: ${dry.r.message.slice(0, 800)}`);
    return {
      rows,
      killPoints: chosen.length,
      reached: 0,
      duplicates: 0,
      wrongTerminal: 1,
      limitViolations: 0,
      maxOut: 0,
      problems,
    };
  }
  const expected = { ...expectedOf(dry.r), state: "succeeded" };
  const traced = new Set(distinctPoints(dry.r.trace).map(killSpec));
  const missing = all.filter((k) => !traced.has(killSpec(k)));
  if (missing.length > 0)
    problems.push(
      `parallel: ${missing.length} kill points of the step table never fired in the dry run: ${missing.map(killSpec).join(" ")}`,
    );
  for (const { label, chain, r } of runs) {
    if (r instanceof Error) {
      wrongTerminal += 1;
      problems.push(`${label}: ${r.message.slice(0, 800)}`);
      rows.push({
        scenario: label,
        tried: chain.length,
        releases: 1,
        effects: 0,
        duplicates: 0,
        wrong: 1,
      });
      continue;
    }
    const v = judge(r, expected);
    const l = checkLimits(r.evidence);
    limitViolations += l.problems.length;
    maxOut = Math.max(maxOut, l.maxOut);
    duplicates += v.duplicates;
    if (v.wrongTerminal) wrongTerminal += 1;
    for (const k of r.killed) reached.add(killSpec(k));
    problems.push(...v.problems.map((p) => `${label}: ${p}`));
    problems.push(...l.problems.map((p) => `${label}: ${p}`));
    if (r.missed.length > 0) log(`${label}: not reached: ${r.missed.map(killSpec).join(" ")}`);
    log(
      `${label}: ${r.killed.length} kills, ${r.release.state}, ${v.applied} effects, ${v.duplicates} duplicates, at most ${l.maxOut} lanes of the wave out, at least ${l.minServing} in service, ${l.problems.length} limit violations, ${(r.ms / 1000).toFixed(1)} s`,
    );
    rows.push({
      scenario: `${label} (wave of ${WAVE.length}, max_unavailable ${wave?.max_unavailable})`,
      tried: r.killed.length,
      releases: 1,
      effects: v.applied,
      duplicates: v.duplicates,
      wrong: v.wrongTerminal ? 1 : 0,
    });
  }
  if (maxOut < 2)
    problems.push(`parallel: no run had two lanes of the wave out together (most ${maxOut})`);
  if (reached.size < chosen.length)
    problems.push(`parallel: only ${reached.size} of ${chosen.length} kill points were reached`);
  return {
    rows,
    killPoints: chosen.length,
    reached: reached.size,
    duplicates,
    wrongTerminal,
    limitViolations,
    maxOut,
    problems,
  };
}
