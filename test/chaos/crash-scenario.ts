/**
 * The crash scenario of `npm run test:chaos`: dry runs, kill-point enumeration, chained and
 * isolated kill runs, each judged against the uncrashed run of its scenario.
 */
import { join } from "node:path";
import {
  type CaseResult,
  distinctPoints,
  type Expected,
  expectedOf,
  judge,
  type KillPoint,
  killSpec,
  runCase,
} from "./crash.ts";
import { pool, type Row, rng, sample } from "./table.ts";

/**
 * Forward runner step whose health check fails in the compensation scenario: attach_queue_lane
 * of lane-b (0-based index 10 of the example table; each wave starts with a drain_wave step).
 * The chaos world refuses an index that is not a runner step.
 */
export const FAIL_AT = 10;

/**
 * Crash releases run at the same time, each with its own engine process, store and fleet
 * (BATON_CHAOS_AT_ONCE, default 2): a kill point is a call the engine makes, not a moment, so
 * how many run side by side changes the time taken, not which points are reached.
 */
function releasesAtOnce(): number {
  const raw = process.env.BATON_CHAOS_AT_ONCE;
  if (raw === undefined || raw === "") return 2;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(
      `[chaos] BATON_CHAOS_AT_ONCE must be a whole number of releases (1 or more), not ${JSON.stringify(raw)}`,
    );
  return n;
}

interface Job {
  label: string;
  failAt: number | null;
  chain: KillPoint[];
  scenario: "forward" | "compensation";
}

/** A seeded choice of kill points instead of all of them (CI's size). */
export interface KillSample {
  /** How many kill points, at most. */
  points: number;
  /** Seed of the choice (printed: the same seed on the same code chooses the same points). */
  seed: number;
}

export interface CrashOutcome {
  rows: Row[];
  /** Kill points enumerated in the dry runs. */
  enumerated: number;
  /** Kill points run: every one enumerated, or the sample's. */
  killPoints: number;
  reached: number;
  duplicates: number;
  wrongTerminal: number;
  problems: string[];
}

/** Class of a kill point for the isolated subset: point × effect × direction. */
function classOf(k: KillPoint): string {
  const dir = String(k.detail.step_run_id ?? "").endsWith("_b") ? "bwd" : "fwd";
  return `${k.name}/${k.detail.effect ?? "callback"}/${dir}`;
}

/** The middle member of each class, in enumeration order (deterministic). */
function oneOfEachClass(points: KillPoint[]): KillPoint[] {
  const by = new Map<string, KillPoint[]>();
  for (const p of points) by.set(classOf(p), [...(by.get(classOf(p)) ?? []), p]);
  return [...by.values()].map((ps) => ps[Math.floor((ps.length - 1) / 2)]!);
}

function strideChains(points: KillPoint[], n: number): KillPoint[][] {
  return Array.from({ length: n }, (_, i) => points.filter((_, j) => j % n === i)).filter(
    (c) => c.length > 0,
  );
}

/**
 * Runs the whole crash scenario under `root`. `deadline`: epoch ms after which no new isolated
 * run starts (chained runs always run: they are the coverage of every kill point). With
 * `only`, a seeded choice of `only.points` kill points (forward and compensation alike) is run
 * instead of every one, chained and one alone per class of the chosen points.
 */
export async function crashScenario(
  root: string,
  deadline: number,
  only?: KillSample,
): Promise<CrashOutcome> {
  const log = (s: string) => console.log(`[chaos] ${s}`);
  log(
    `crash: dry runs of the example release (forward, and compensation with step ${FAIL_AT} failing)`,
  );
  const [fwd, comp] = (await pool(2, [
    () =>
      runCase({
        label: "dry forward",
        dir: join(root, "dry-fwd"),
        failAt: null,
        chain: [],
        traceFile: join(root, "trace-fwd.jsonl"),
      }),
    () =>
      runCase({
        label: "dry compensation",
        dir: join(root, "dry-comp"),
        failAt: FAIL_AT,
        chain: [],
        traceFile: join(root, "trace-comp.jsonl"),
      }),
  ])) as [CaseResult, CaseResult];
  const problems: string[] = [];
  if (fwd.release.state !== "succeeded")
    problems.push(`dry forward run ended ${fwd.release.state}, expected succeeded`);
  if (comp.release.state !== "rolled_back")
    problems.push(`dry compensation run ended ${comp.release.state}, expected rolled_back`);
  const expected: Record<Job["scenario"], Expected> = {
    forward: { ...expectedOf(fwd), state: "succeeded" },
    compensation: { ...expectedOf(comp), state: "rolled_back" },
  };
  const allFwd = distinctPoints(fwd.trace);
  const compTrace = distinctPoints(comp.trace);
  const failCallback = compTrace.findIndex(
    (k) => k.name === "in_callback_before_commit" && k.detail.step_run_id === `sr_1_${FAIL_AT}_f`,
  );
  const allComp = failCallback < 0 ? [] : compTrace.slice(failCallback);
  const enumerated = allFwd.length + allComp.length;
  let fwdPoints = allFwd;
  let compPoints = allComp;
  if (only && only.points < enumerated) {
    // Both directions are always drawn from: compensation's share of the points, at least 2
    // (a plain sample of 8 of 84 misses every compensation point about one run in 16).
    const random = rng(only.seed);
    const nComp = Math.min(
      allComp.length,
      only.points,
      Math.max(2, Math.round((only.points * allComp.length) / enumerated)),
    );
    const chosen = new Set([
      ...sample(
        allFwd.map((k) => `forward:${killSpec(k)}`),
        only.points - nComp,
        random,
      ),
      ...sample(
        allComp.map((k) => `compensation:${killSpec(k)}`),
        nComp,
        random,
      ),
    ]);
    fwdPoints = allFwd.filter((k) => chosen.has(`forward:${killSpec(k)}`));
    compPoints = allComp.filter((k) => chosen.has(`compensation:${killSpec(k)}`));
    log(
      `crash: ${fwdPoints.length + compPoints.length} of ${enumerated} kill points chosen with seed ${only.seed} (BATON_CHAOS_KILL_POINTS, BATON_CHAOS_SEED)`,
    );
  }
  const total = fwdPoints.length + compPoints.length;
  const isolated = [
    ...oneOfEachClass(fwdPoints).map((k) => ({ k, scenario: "forward" as const })),
    ...oneOfEachClass(compPoints).map((k) => ({ k, scenario: "compensation" as const })),
  ];
  log(
    `crash: ${fwd.trace.length} + ${comp.trace.length} fault-point calls in the dry runs; kill points: ${allFwd.length} forward + ${allComp.length} during compensation = ${enumerated}`,
  );
  log(
    `crash: every kill point in chained releases (one SIGKILL after another), and ${isolated.length} alone (one per fault point × effect × direction)`,
  );

  const jobs: Job[] = [
    ...strideChains(fwdPoints, 3).map((chain, i) => ({
      label: `forward chain ${i + 1}`,
      failAt: null,
      chain,
      scenario: "forward" as const,
    })),
    ...strideChains(compPoints, 2).map((chain, i) => ({
      label: `compensation chain ${i + 1}`,
      failAt: FAIL_AT,
      chain,
      scenario: "compensation" as const,
    })),
  ];
  const isolatedJobs: Job[] = isolated.map(({ k, scenario }) => ({
    label: `alone (${scenario}) ${killSpec(k)}`,
    failAt: scenario === "forward" ? null : FAIL_AT,
    chain: [k],
    scenario,
  }));

  const rows: Row[] = [];
  const reachedSpecs = new Set<string>();
  let duplicates = 0;
  let wrongTerminal = 0;
  let skipped = 0;
  const runJob = (job: Job, n: number) => async () => {
    if (job.chain.length === 1 && Date.now() > deadline) {
      skipped += 1;
      return;
    }
    let r: CaseResult;
    try {
      r = await runCase({ ...job, dir: join(root, `job-${n}`) });
    } catch (e) {
      wrongTerminal += 1;
      problems.push(`${job.label}: ${(e as Error).message.slice(0, 800)}`);
      // Said now too: a run killed by an outer bound (.ci/run's timeout) never prints its problems.
      log(`${job.label}: FAILED: ${(e as Error).message.split("\n")[0]?.slice(0, 400)}`);
      rows.push({
        scenario: `crash ${job.label}`,
        tried: job.chain.length,
        releases: 1,
        effects: 0,
        duplicates: 0,
        wrong: 1,
      });
      return;
    }
    const v = judge(r, expected[job.scenario]);
    for (const k of r.killed) reachedSpecs.add(`${job.scenario}:${killSpec(k)}`);
    duplicates += v.duplicates;
    if (v.wrongTerminal) wrongTerminal += 1;
    for (const p of v.problems) problems.push(`${job.label}: ${p}`);
    if (r.missed.length > 0) log(`${job.label}: not reached: ${r.missed.map(killSpec).join(" ")}`);
    log(
      `${job.label}: ${r.killed.length} kills, ${r.release.state}, ${v.applied} effects, ${v.duplicates} duplicates, ${v.redeliveries} fenced redeliveries, ${(r.ms / 1000).toFixed(1)} s${v.problems.length ? ` — ${v.problems.length} problems` : ""}`,
    );
    rows.push({
      scenario: `crash ${job.label}`,
      tried: r.killed.length,
      releases: 1,
      effects: v.applied,
      duplicates: v.duplicates,
      wrong: v.wrongTerminal ? 1 : 0,
    });
  };
  await pool(
    releasesAtOnce(),
    [...jobs, ...isolatedJobs].map((j, n) => runJob(j, n)),
  );
  if (skipped > 0) log(`crash: ${skipped} isolated runs skipped: the time budget was used`);
  const kills = rows.reduce((a, r) => a + r.tried, 0);
  log(
    `crash: ${reachedSpecs.size} of ${total} kill points reached; ${kills} SIGKILLs in ${rows.length} releases`,
  );
  return {
    rows,
    enumerated,
    killPoints: total,
    reached: reachedSpecs.size,
    duplicates,
    wrongTerminal,
    problems,
  };
}
