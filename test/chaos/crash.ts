/**
 * Crash injection over the whole example release: the engine runs
 * as its own process on a SQLite file; fault points (engine/src/faults.ts) SIGKILL it at durable
 * boundaries; the harness restarts it on the same store and lets the release finish.
 *
 * Kill points are enumerated, not hand-picked: an uninjected dry run of each scenario records
 * every fault-point call (`BATON_FAULT_TRACE`); each distinct (point, step run, effect) is one
 * kill point, matched by `BATON_FAULT=name@step_run_id=…,effect=…` (its first occurrence).
 * Scenarios: the forward release (ends `succeeded`) and the same release with the health check
 * of step `FAIL_AT` failing (compensation; ends `rolled_back`), whose own kill points are those the
 * forward run does not have (the failing step's callback and every backward step run).
 */
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { Release } from "../../engine/src/domain/types.ts";
import {
  acceptedKinds,
  checkHistoryComplete,
  checkServedOnlyValidated,
  countEffects,
  laneFingerprint,
  runningImages,
} from "../support/chaos-checks.ts";
import type { EngineProcess } from "../support/chaos-process.ts";
import { type CrashWorld, type Evidence, startCrashWorld } from "../support/chaos-world.ts";

/** One kill point: a fault point and the details its spec matches. */
export interface KillPoint {
  name: string;
  detail: Record<string, string | number>;
}

export function killSpec(k: KillPoint): string {
  const d = Object.entries(k.detail).map(([a, b]) => `${a}=${b}`);
  return d.length ? `${k.name}@${d.join(",")}` : k.name;
}

const DONE = new Set(["succeeded", "rolled_back", "aborted", "needs_operator", "paused"]);

/** What one run of a scenario showed. */
export interface CaseResult {
  label: string;
  release: Release;
  evidence: Evidence;
  /** Kill points whose SIGKILL happened, in order. */
  killed: KillPoint[];
  /** Kill points asked for but never reached. */
  missed: KillPoint[];
  /** Fault-point calls recorded (dry runs only). */
  trace: KillPoint[];
  /** Unexpected exits of the engine (not a fault point's SIGKILL). */
  crashes: string[];
  ms: number;
}

/**
 * Runs the release once in a fresh world. `chain`: kill points to crash at, one after the other
 * (the engine restarts after each with the next one armed). Resolves once the release ended and
 * every runner run finished; throws when it does not end within `timeoutMs`.
 */
export async function runCase(o: {
  label: string;
  dir: string;
  failAt: number | null;
  chain: KillPoint[];
  traceFile?: string;
  timeoutMs?: number;
  /** Recipe of the release (default the example). */
  recipe?: RecipeInput;
}): Promise<CaseResult> {
  const t0 = Date.now();
  rmSync(o.dir, { recursive: true, force: true });
  mkdirSync(o.dir, { recursive: true });
  const world = await startCrashWorld({
    dir: o.dir,
    failAt: o.failAt,
    ...(o.recipe ? { recipe: o.recipe } : {}),
  });
  const killed: KillPoint[] = [];
  const crashes: string[] = [];
  let next = 0;
  let proc: EngineProcess | null = null;
  const arm = async () => {
    const extra: Record<string, string> = {};
    if (next < o.chain.length) extra.BATON_FAULT = killSpec(o.chain[next]!);
    if (o.traceFile) extra.BATON_FAULT_TRACE = o.traceFile;
    proc = await world.startEngine(extra);
  };
  try {
    await arm();
    // The first kill point may fire before the POST is answered (the eager reconciler performs
    // the first effect at once): then the release exists, and the restarted engine lists it.
    let id: string | null = await world.startRelease().catch(() => null);
    const until = Date.now() + (o.timeoutMs ?? 180_000);
    let release: Release | null = null;
    let unlisted = 0;
    for (let i = 0; i < 100_000; i++) {
      if (Date.now() > until) {
        const tail = (proc as EngineProcess | null)?.output().slice(-3000) ?? "";
        await (proc as EngineProcess | null)?.stop();
        throw new Error(
          `[chaos] ${o.label}: release ${id} did not end in ${o.timeoutMs ?? 180_000} ms; last ${release?.state ?? "?"} ${release?.step_runs.map((s) => `${s.id}=${s.state}`).join(" ") ?? ""}\n${runsOfUnfinished(world, release)}${await storeOfUnfinished(world, id)}${tail}`,
        );
      }
      const p = proc as EngineProcess | null;
      if (p && !p.alive()) {
        const how = await p.exited;
        if (how.signal === "SIGKILL" && next < o.chain.length) {
          killed.push(o.chain[next]!);
          next += 1;
        } else {
          crashes.push(`exit code ${how.code} signal ${how.signal}: ${p.output().slice(-1500)}`);
        }
        await arm();
        continue;
      }
      if (id === null) {
        id = await findRelease(world.api);
        // Listed nothing for 3 s with the engine up: the POST never committed; send it again.
        if (id === null && ++unlisted > 30) id = await world.startRelease().catch(() => null);
        if (id === null) {
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
      }
      release = await world.readRelease(id);
      if (release && DONE.has(release.state)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    // Late runs still call back; let them, then stop the engine cleanly and read the store.
    await world.runner.idle(60_000).catch(() => {});
    await new Promise((r) => setTimeout(r, 300));
    await (proc as EngineProcess | null)?.stop();
    if (id === null) throw new Error(`[chaos] ${o.label}: no release was created`);
    const evidence = await world.evidence(id);
    const trace: KillPoint[] = o.traceFile ? readTrace(o.traceFile) : [];
    return {
      label: o.label,
      release: evidence.release,
      evidence,
      killed,
      missed: o.chain.slice(next),
      trace,
      crashes,
      ms: Date.now() - t0,
    };
  } finally {
    await world.close();
    rmSync(o.dir, { recursive: true, force: true });
  }
}

/** The runner's runs of the release's unfinished step runs, each with its log's last lines. */
function runsOfUnfinished(world: CrashWorld, release: Release | null): string {
  const open = (release?.step_runs ?? []).filter(
    (s) => !["succeeded", "planned"].includes(s.state),
  );
  return open
    .flatMap((s) =>
      world.runner.runsOf(s.id).map((r) => {
        let tail = "";
        try {
          tail = readFileSync(r.logFile, "utf8").split("\n").slice(-8).join("\n");
        } catch {
          // no log yet
        }
        return `[chaos] run ${r.runId}#${r.attempt} of ${s.id}: ${r.state} ${r.conclusion ?? ""}\n${tail}\n`;
      }),
    )
    .join("");
}

/**
 * What the store holds of a release that did not end (the engine stopped): the history of its
 * unfinished step runs, its outbox rows not done (with their claims) and the control plane's
 * ledger of their operation keys, so a stuck step run can be diagnosed from the report alone.
 */
async function storeOfUnfinished(world: CrashWorld, id: string | null): Promise<string> {
  if (id === null) return "";
  try {
    const ev = await world.evidence(id);
    const open = ev.release.step_runs.filter((s) => !["succeeded", "planned"].includes(s.state));
    const keys = new Set(open.map((s) => s.operation_key));
    const t0 = ev.release.created_at;
    const lines = [
      ...open.flatMap((s) => [
        `[chaos] ${s.id} ${s.state} (${s.operation_key}, dispatch ${s.dispatch}, tries ${s.tries}):`,
        ...ev.history
          .filter((h) => h.step_run_id === s.id)
          .map((h) => `  +${h.at - t0} ms ${h.kind} ${h.outcome}: ${h.message.slice(0, 300)}`),
      ]),
      ...ev.pendingOutbox.map(
        (r) =>
          `[chaos] outbox row ${r.id} ${r.effect.type} ${"step_run_id" in r.effect ? r.effect.step_run_id : ""}: due +${r.due_at - t0} ms, claimed until ${r.claimed_until === null ? "-" : `+${r.claimed_until - t0} ms`}, ${r.claims} claims`,
      ),
      ...ev.cpLedger
        .filter((l) => keys.has(l.operation_key))
        .map((l) => `[chaos] control plane ledger: ${JSON.stringify(l).slice(0, 300)}`),
    ];
    return `${lines.join("\n")}\n`;
  } catch (e) {
    return `[chaos] could not read the store: ${(e as Error).message}\n`;
  }
}

async function findRelease(
  api: (path: string, init?: RequestInit) => Promise<Response>,
): Promise<string | null> {
  try {
    const res = await api("/v1/releases");
    if (res.status !== 200) return null;
    const body = (await res.json()) as { releases?: { id: string }[] } | { id: string }[];
    const list = Array.isArray(body) ? body : (body.releases ?? []);
    return list[0]?.id ?? null;
  } catch {
    return null;
  }
}

function readTrace(file: string): KillPoint[] {
  try {
    return readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as KillPoint);
  } catch {
    return [];
  }
}

/** Distinct kill points of a trace, in first-occurrence order. */
export function distinctPoints(trace: KillPoint[]): KillPoint[] {
  const seen = new Set<string>();
  const out: KillPoint[] = [];
  for (const k of trace) {
    const s = killSpec(k);
    if (seen.has(s)) continue;
    seen.add(s);
    out.push(k);
  }
  return out;
}

/** The baseline a crashed run is compared with. */
export interface Expected {
  state: string;
  lanes: string;
  images: string;
  kinds: Set<string>;
}

export function expectedOf(r: CaseResult): Expected {
  return {
    state: r.release.state,
    lanes: laneFingerprint(r.evidence),
    images: imagesOf(r.evidence),
    // A dispatch GitHub did not accept in time (the stand-in shares a loaded machine) is
    // retried, and a control-plane write whose read-back went unanswered is observed after:
    // accidents of that run, not history a crashed run must also have.
    kinds: new Set(
      [...acceptedKinds(r.evidence.history)].filter(
        (k) => !k.endsWith("|dispatch_failed") && !k.endsWith("|observed"),
      ),
    ),
  };
}

/**
 * Images running per lane at the end, as JSON with the lanes sorted: lanes of a parallel wave
 * deploy in whatever order their runs finish, which says nothing about the end state.
 */
function imagesOf(ev: Evidence): string {
  const running = runningImages(ev.dockerCalls);
  return JSON.stringify(
    Object.fromEntries(
      Object.keys(running)
        .sort()
        .map((k) => [k, running[k]]),
    ),
  );
}

/** The verdict on one run. */
export interface Verdict {
  wrongTerminal: boolean;
  duplicates: number;
  applied: number;
  redeliveries: number;
  problems: string[];
}

/** Checks one run against the scenario's uncrashed baseline. */
export function judge(r: CaseResult, expected: Expected): Verdict {
  const problems: string[] = [];
  const ev = r.evidence;
  const wrongTerminal =
    r.release.state !== expected.state ||
    laneFingerprint(ev) !== expected.lanes ||
    imagesOf(ev) !== expected.images;
  if (r.release.state !== expected.state)
    problems.push(
      `ended ${r.release.state} (${r.release.reason ?? ""}), expected ${expected.state}; ${r.release.step_runs
        .filter((s) => s.state !== "succeeded")
        .map((s) => `${s.id}=${s.state}${s.last_error ? ` (${s.last_error.slice(0, 300)})` : ""}`)
        .join("; ")}`,
    );
  if (laneFingerprint(ev) !== expected.lanes)
    problems.push(`control plane ended ${laneFingerprint(ev)}, expected ${expected.lanes}`);
  const images = imagesOf(ev);
  if (images !== expected.images) problems.push(`lanes run ${images}, expected ${expected.images}`);
  const effects = countEffects(ev);
  problems.push(...effects.problems);
  problems.push(...checkServedOnlyValidated(ev));
  problems.push(...checkHistoryComplete(r.release, ev.history, ev.attemptResults, expected.kinds));
  problems.push(...r.crashes.map((c) => `engine exited unexpectedly: ${c}`));
  return {
    wrongTerminal,
    duplicates: effects.duplicates,
    applied: effects.applied,
    redeliveries: effects.redeliveries,
    problems,
  };
}

export const CRASH_DIR = (root: string, name: string) => join(root, name);
