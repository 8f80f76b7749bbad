/**
 * The invariants the crash and multi-engine scenarios check after a release ended. Each check
 * returns a list of problems (empty = holds), one sentence each, so a failing scenario says
 * exactly what broke.
 */

import type { ChangeRecord } from "../../engine/src/control-plane/model.ts";
import type { HistoryEntry, Manifest, Release } from "../../engine/src/domain/types.ts";
import type { AttemptResult } from "../../engine/src/ports/store.ts";
import type { DeployLedgerLine, DockerCall, Evidence } from "./chaos-world.ts";

/** Counts of effects applied, and of effects applied more than once. */
export interface EffectCounts {
  /** Control-plane applications (history entries) + deploy.sh phases recorded. */
  applied: number;
  /** Operation keys applied more than once, at the control plane or by deploy.sh. */
  duplicates: number;
  /** (step run, dispatch seq) pairs for which more than one run got past preflight. */
  doubleRuns: number;
  /** Dispatches GitHub accepted again for the same (step run, dispatch seq): fenced redeliveries. */
  redeliveries: number;
  problems: string[];
}

/**
 * Each effect applied at most once: per operation key at most one control-plane application
 * (replays are not applications), per (operation key, subcommand, phase) at most one deploy.sh
 * ledger line, and per (step run, dispatch seq) at most one GitHub run admitted by preflight.
 */
export function countEffects(ev: Evidence): EffectCounts {
  const problems: string[] = [];
  const cp = new Map<string, number>();
  for (const h of ev.cpHistory) cp.set(h.operation_key, (cp.get(h.operation_key) ?? 0) + 1);
  let duplicates = 0;
  for (const [key, n] of cp) {
    if (n > 1) {
      duplicates += n - 1;
      problems.push(`control plane applied operation key ${key} ${n} times`);
    }
  }
  // In ledger order: a phase recorded while an earlier record of it stands is a duplicate; a
  // "-" record is deploy.sh undoing it (a start whose container failed its health check was
  // removed), after which a retry with the same key applies it again, once.
  const standing = new Map<string, number>();
  const repeats = new Map<string, number>();
  for (const l of ev.deployLedger) {
    const k = `${l.key}|${l.sub}|${l.phase}`;
    if (l.line.trim() === "-") {
      standing.set(k, 0);
      continue;
    }
    if ((standing.get(k) ?? 0) > 0) repeats.set(k, (repeats.get(k) ?? 1) + 1);
    standing.set(k, (standing.get(k) ?? 0) + 1);
  }
  for (const [k, n] of repeats) {
    duplicates += n - 1;
    problems.push(`deploy.sh recorded ${k.replaceAll("|", " ")} ${n} times`);
  }
  // Containers started: never more than the start phases deploy.sh recorded (a repeat of a
  // keyed deploy must replay from the ledger, not run the container CLI again).
  const starts = ev.dockerCalls.filter((c) => c.argv[0] === "run" && c.exit === 0).length;
  const startPhases = ev.deployLedger.filter(
    (l) => l.phase === "start" && /"status":"ok"/.test(l.line),
  ).length;
  if (starts > startPhases) {
    duplicates += starts - startPhases;
    problems.push(
      `the target started ${starts} containers for ${startPhases} recorded start phases`,
    );
  }
  let doubleRuns = 0;
  for (const sr of ev.release.step_runs) {
    const runsPerDispatch = new Map<number, Set<string>>();
    for (const a of sr.attempts) {
      const s = runsPerDispatch.get(a.dispatch) ?? new Set<string>();
      s.add(a.run_id);
      runsPerDispatch.set(a.dispatch, s);
    }
    for (const [d, runs] of runsPerDispatch) {
      if (runs.size > 1) {
        doubleRuns += runs.size - 1;
        problems.push(`step run ${sr.id} dispatch ${d} admitted runs ${[...runs].join(", ")}`);
      }
    }
  }
  const sent = new Map<string, number>();
  for (const d of ev.dispatches) {
    const k = `${d.step_run_id}#${d.dispatch}`;
    sent.set(k, (sent.get(k) ?? 0) + 1);
  }
  let redeliveries = 0;
  for (const n of sent.values()) redeliveries += n - 1;
  return {
    applied:
      ev.cpHistory.length + ev.deployLedger.filter((l) => !l.key.startsWith("bootstrap:")).length,
    duplicates: duplicates + doubleRuns,
    doubleRuns,
    redeliveries,
    problems,
  };
}

interface LaneView {
  weight: number;
  excluded: boolean;
}

/**
 * No lane served an image whose smoke check had not passed: replaying the control plane's
 * history (weights, `excluded` marker) and the target's container starts and stops in time
 * order, whenever a lane is included with weight > 0, every container running on it runs the
 * previous image (what the fleet ran before the release) or an image whose `assert_smoke_passed`
 * step passed on that lane before that moment (the runner's callback as stored).
 */
export function checkServedOnlyValidated(ev: Evidence): string[] {
  const m: Manifest = ev.release.manifest;
  const problems: string[] = [];
  const smokePassed = new Map<string, number>(); // `${lane}|${image}` -> earliest pass time
  const stepOf = new Map(ev.release.step_runs.map((s) => [s.id, s]));
  for (const r of ev.attemptResults) {
    const sr = stepOf.get(r.step_run_id);
    const step = sr ? m.steps[sr.step_index] : undefined;
    if (sr?.direction !== "fwd" || step?.name !== "assert_smoke_passed" || !step.lane) continue;
    if (r.overall !== "pass") continue;
    const k = `${step.lane}|${m.image}`;
    smokePassed.set(k, Math.min(smokePassed.get(k) ?? Infinity, r.received_at));
  }
  const lanes = new Map<string, LaneView>(
    m.lanes.map((l) => [l.id, { weight: l.baseline_weight, excluded: false }]),
  );
  const running = new Map<string, Map<string, string>>(); // lane -> container name -> image
  type Ev = { at: number; order: number; apply: () => void };
  const events: Ev[] = [];
  for (const h of ev.cpHistory) events.push({ at: h.at, order: 1, apply: () => applyCp(lanes, h) });
  for (const c of ev.dockerCalls) {
    if (c.exit !== 0) continue;
    const d = parseDocker(c);
    if (!d) continue;
    events.push({
      at: c.at,
      order: 0,
      apply: () => {
        if (d.kind === "run") {
          const on = running.get(d.lane) ?? new Map<string, string>();
          on.set(d.name, d.image);
          running.set(d.lane, on);
        } else {
          for (const on of running.values()) on.delete(d.name);
        }
      },
    });
  }
  events.sort((a, b) => a.at - b.at || a.order - b.order);
  for (const e of events) {
    e.apply();
    for (const [lane, v] of lanes) {
      if (v.excluded || v.weight <= 0) continue;
      for (const [name, image] of running.get(lane) ?? []) {
        if (image === m.previous_image) continue;
        const passed = smokePassed.get(`${lane}|${image}`);
        if (passed === undefined || passed > e.at) {
          problems.push(
            `lane ${lane} was included at weight ${v.weight}% at ${e.at} while container ${name} ran ${image.split("@")[0]} whose smoke check had ${passed === undefined ? "never passed" : `passed only at ${passed}`}`,
          );
        }
      }
    }
    if (problems.length > 5) break;
  }
  return problems;
}

function applyCp(lanes: Map<string, LaneView>, h: ChangeRecord): void {
  const after = h.after as Record<string, unknown> | null;
  if (!after) return;
  if (h.kind === "set_traffic") {
    for (const [id, w] of Object.entries(after)) {
      const v = lanes.get(id);
      if (v && typeof w === "number") v.weight = w;
    }
    return;
  }
  if (!h.lane) return;
  const v = lanes.get(h.lane);
  if (!v) return;
  if (typeof after.weight === "number") v.weight = after.weight;
  if (typeof after.excluded === "boolean") v.excluded = after.excluded;
}

function parseDocker(
  c: DockerCall,
):
  | { kind: "run"; name: string; lane: string; image: string }
  | { kind: "stop"; name: string }
  | null {
  const [cmd, ...args] = c.argv;
  if (cmd === "stop" || cmd === "rm") {
    const name = args.find((a) => !a.startsWith("-"));
    return name ? { kind: "stop", name } : null;
  }
  if (cmd !== "run") return null;
  let name = "";
  let lane = "";
  let image = "";
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--name") name = args[++i] ?? "";
    else if (a === "--label" || a === "-l") {
      const [k, ...v] = (args[++i] ?? "").split("=");
      if (k === "baton.lane") lane = v.join("=");
    } else if (
      [
        "-e",
        "--env",
        "-p",
        "--publish",
        "--network",
        "--gpus",
        "-v",
        "--volume",
        "--restart",
      ].includes(a)
    )
      i++;
    else if (a.startsWith("-")) continue;
    else {
      image = a;
      break;
    }
  }
  return name && lane && image ? { kind: "run", name, lane, image } : null;
}

/**
 * The history is complete: every step run that left `planned` has accepted history entries;
 * every runner attempt that called back has its stored result and an accepted callback entry;
 * and every (step run, event kind) accepted in the uncrashed run of the same scenario is there.
 */
export function checkHistoryComplete(
  release: Release,
  history: HistoryEntry[],
  attemptResults: AttemptResult[],
  baseline: ReadonlySet<string> | null,
): string[] {
  const problems: string[] = [];
  const accepted = acceptedKinds(history);
  const bySr = new Set([...accepted].map((k) => k.split("|")[0]));
  const results = new Set(attemptResults.map((r) => `${r.step_run_id}#${r.attempt}`));
  for (const sr of release.step_runs) {
    if (sr.state === "planned") continue;
    if (!bySr.has(sr.id))
      problems.push(`step run ${sr.id} (${sr.state}) has no accepted history entry`);
    for (const a of sr.attempts) {
      if (a.callback_at === null) continue;
      if (!results.has(`${sr.id}#${a.n}`))
        problems.push(`step run ${sr.id} attempt ${a.n} called back but its result is not stored`);
      if (!accepted.has(`${sr.id}|callback`))
        problems.push(
          `step run ${sr.id} attempt ${a.n} called back but no callback entry is accepted`,
        );
    }
  }
  if (baseline) {
    for (const k of baseline) {
      // A dispatch whose outcome a crash lost is sent again; its second 204 may come after the
      // run's preflight, which then stands for it (the transition records it as a no-op).
      const [sr, kind] = k.split("|");
      if (kind === "dispatch_accepted" && accepted.has(`${sr}|preflight`)) continue;
      if (!accepted.has(k))
        problems.push(`history lacks ${k.replace("|", " ")} (present without the crash)`);
    }
  }
  return problems;
}

/** `step run id|event kind` of every accepted history entry naming a step run. */
export function acceptedKinds(history: HistoryEntry[]): Set<string> {
  const out = new Set<string>();
  for (const h of history) {
    if (h.outcome === "accepted" && h.step_run_id) out.add(`${h.step_run_id}|${h.kind}`);
  }
  return out;
}

/** Final lane state at the control plane (weights, markers, capabilities), for comparison. */
export function laneFingerprint(ev: Evidence): string {
  return JSON.stringify(
    ev.cpHistory.length === 0
      ? {}
      : Object.fromEntries(
          ev.release.manifest.lanes.map((l) => {
            const last = [...ev.cpHistory].reverse();
            const weight = last.find((h) => h.kind === "set_traffic");
            const w = weight ? (weight.after as Record<string, number>)[l.id] : l.baseline_weight;
            const laneRec = last.find((h) => h.lane === l.id && h.kind === "set_marker");
            const capRec = last.find((h) => h.lane === l.id && h.kind === "set_capabilities");
            return [
              l.id,
              {
                weight: w,
                excluded: (laneRec?.after as { excluded?: boolean } | undefined)?.excluded ?? false,
                advertised:
                  (capRec?.after as { advertised?: boolean } | undefined)?.advertised ?? false,
              },
            ];
          }),
        ),
  );
}

/** Images running per lane at the end (from the target's container calls). */
export function runningImages(calls: DockerCall[]): Record<string, string[]> {
  const running = new Map<string, { lane: string; image: string }>();
  for (const c of [...calls].sort((a, b) => a.at - b.at)) {
    if (c.exit !== 0) continue;
    const d = parseDocker(c);
    if (!d) continue;
    if (d.kind === "run") running.set(d.name, { lane: d.lane, image: d.image });
    else running.delete(d.name);
  }
  const out: Record<string, string[]> = {};
  for (const { lane, image } of running.values()) {
    out[lane] = [...(out[lane] ?? []), image.split("@")[0]!];
  }
  for (const k of Object.keys(out)) out[k]!.sort();
  return out;
}

export type { DeployLedgerLine };
