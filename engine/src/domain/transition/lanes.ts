/**
 * Lanes of a parallel wave (docs/recipes.md "Parallel waves"; docs/state-machine.md
 * "Parallel waves"). A wave whose manifest entry has `max_unavailable` above 1 keeps the serial
 * table (its lane rows, lane after lane), but the engine walks each lane's rows with its own
 * cursor: up to `max_unavailable` lanes are out of service (from their `exclude_lane` until
 * their `include_lane` succeeded) at once, never every lane of a failure domain with more than
 * one lane; lanes leave service in the order the wave lists them, except that a lane its failure
 * domain holds back lets the lanes after it go first. The per-lane state is
 * derived from the durable step runs, so a restarted engine resumes where it was.
 * Traffic weights only change at the wave's `drain_wave` and `set_traffic` rows, which stay
 * serial, so the exposure ceiling is the serial table's.
 */
import type { Manifest, Release, StepRun } from "../types.ts";
import type { Draft } from "./draft.ts";
import { guards } from "./guards.ts";

/** One lane of a parallel wave, as its step runs show it now. */
export interface LaneProgress {
  lane: string;
  /** Step indexes of the lane's rows (exclude_lane … include_lane), in table order. */
  rows: number[];
  /** First row whose forward step run has not succeeded; null when the lane is done. */
  next: number | null;
  /** Its first row was begun: the lane may be out of service until it is done. */
  started: boolean;
  /** Out of service: started and not done. */
  out: boolean;
  /** Its forward step run at `next` is under way outside the engine. */
  busy: boolean;
  /** Its forward step run at `next` ended without success (waits on a retry or an operator). */
  stuck: StepRun | null;
  /** Highest row whose forward step run may have taken effect (-1: none): the lane's high-water mark. */
  high_water_mark: number;
}

/** Lanes out of service at once allowed in wave `wave` (1 = the serial walk). */
export function maxUnavailable(r: Release, wave: number): number {
  return r.manifest.waves[wave]?.max_unavailable ?? 1;
}

/** The wave of step `index` when it is a lane row of a parallel wave, else null. */
export function parallelWaveOf(r: Release, index: number): number | null {
  const step = r.manifest.steps[index];
  if (!step || step.lane === null) return null;
  return maxUnavailable(r, step.wave) > 1 ? step.wave : null;
}

/**
 * Whether forward step `index` is driven now by a release walking a parallel wave: the cursor
 * is on a lane row of the same parallel wave.
 */
export function inActiveParallelWave(r: Release, index: number): boolean {
  const w = parallelWaveOf(r, index);
  return w !== null && parallelWaveOf(r, r.cursor) === w;
}

const fwdAt = (r: Release, i: number) =>
  r.step_runs.find((s) => s.step_index === i && s.direction === "fwd");

/** Progress of every lane of parallel wave `wave`, in the wave's order. */
export function laneProgress(r: Release, wave: number): LaneProgress[] {
  const w = r.manifest.waves[wave];
  if (!w) return [];
  return w.lanes.map((lane) => {
    const rows = r.manifest.steps
      .filter((s) => s.wave === wave && s.lane === lane)
      .map((s) => s.index);
    const next = rows.find((i) => fwdAt(r, i)?.state !== "succeeded") ?? null;
    const started = rows.length > 0 && fwdAt(r, rows[0] as number) !== undefined;
    const at = next === null ? undefined : fwdAt(r, next);
    let hwm = -1;
    for (const i of rows) {
      const sr = fwdAt(r, i);
      if (sr && guards.mayHaveTakenEffect(sr)) hwm = i;
    }
    return {
      lane,
      rows,
      next,
      started,
      out: started && next !== null,
      busy: at !== undefined && guards.inFlight(at),
      stuck: at && !guards.inFlight(at) && at.state !== "planned" ? at : null,
      high_water_mark: hwm,
    };
  });
}

/**
 * The durable high-water mark of each lane of the release's parallel waves: lane id -> the
 * highest step index whose forward step run may have taken effect (-1: none). Serial waves
 * are covered by the release's own high-water mark and are not listed.
 */
export function laneHighWaterMarks(r: Release): Record<string, number> {
  const out: Record<string, number> = {};
  r.manifest.waves.forEach((w, i) => {
    if ((w.max_unavailable ?? 1) <= 1) return;
    for (const p of laneProgress(r, i)) out[p.lane] = p.high_water_mark;
  });
  return out;
}

/** The release's high-water mark recomputed from its step runs (after one proved no effect). */
export function recomputedHighWaterMark(r: Release): number {
  let hwm = -1;
  for (const sr of r.step_runs) {
    if (sr.direction === "fwd" && guards.mayHaveTakenEffect(sr)) hwm = Math.max(hwm, sr.step_index);
  }
  return hwm;
}

/**
 * Lanes the observed baseline had excluded (out of service before the release started): the
 * lanes whose `exclude_lane` row's backward action restores `excluded: true`.
 */
export function excludedAtStart(m: Manifest): Set<string> {
  const out = new Set<string>();
  for (const s of m.steps) {
    const b = s.backward;
    if (s.name !== "exclude_lane" || s.lane === null || b?.kind !== "control_plane") continue;
    if (b.request.op === "set_marker" && b.request.present) out.add(s.lane);
  }
  return out;
}

/**
 * The order compensation undoes the lanes of parallel wave `wave` in (docs/recipes.md
 * "Parallel waves"), so that the undo never has more of the wave's lanes out of service than the
 * forward walk was allowed: first the lanes out of service now (started, not back: their undo
 * brings them back, or leaves them excluded as their baseline), then the lanes back in service
 * (each leaves service for its own undo, one lane at a time), last the lanes excluded before the
 * start that this release brought back (their undo excludes them again: the observed
 * baseline). Within each group, the wave's last lane first; lanes never begun (nothing to
 * undo) at the end. Derived from the forward step runs alone, which compensation does not
 * change, so a restarted engine finds the same order.
 */
export function undoLaneOrder(r: Release, wave: number): LaneProgress[] {
  const pre = excludedAtStart(r.manifest);
  const group = (l: LaneProgress) => (!l.started ? 3 : l.out ? 0 : pre.has(l.lane) ? 2 : 1);
  return laneProgress(r, wave)
    .map((l, i) => ({ l, i, g: group(l) }))
    .sort((a, b) => a.g - b.g || b.i - a.i)
    .map((x) => x.l);
}

/**
 * Step indexes of every lane row of parallel wave `wave` in the order compensation walks them:
 * lane by lane in `undoLaneOrder`, each lane's rows in reverse.
 */
export function laneUndoSequence(r: Release, wave: number): number[] {
  return undoLaneOrder(r, wave).flatMap((l) => [...l.rows].reverse());
}

/**
 * Every step index from `from` down to 0 in the order compensation walks them: the table in
 * reverse, except that the lane rows of a parallel wave come lane by lane in `undoLaneOrder`
 * (the whole wave's rows, where the wave's lowest row is at or below `from`).
 */
export function undoSequence(r: Release, from: number): number[] {
  const out: number[] = [];
  const done = new Set<number>();
  for (let i = Math.min(from, r.manifest.steps.length - 1); i >= 0; i--) {
    const wave = parallelWaveOf(r, i);
    if (wave === null) {
      out.push(i);
      continue;
    }
    if (done.has(wave)) continue;
    done.add(wave);
    out.push(...laneUndoSequence(r, wave));
  }
  return out;
}

/**
 * Whether lane `id` is out of service now: between its `exclude_lane` and the success of its
 * `include_lane`, or excluded before the start and not yet included by this release.
 */
function isOutOfService(r: Release, id: string, pre: ReadonlySet<string>): boolean {
  const rows = r.manifest.steps.filter((s) => s.lane === id);
  const include = rows.find((s) => s.name === "include_lane");
  if (include && fwdAt(r, include.index)?.state === "succeeded") return false;
  if (pre.has(id)) return true;
  const exclude = rows.find((s) => s.name === "exclude_lane");
  return exclude !== undefined && fwdAt(r, exclude.index) !== undefined;
}

/**
 * Whether the wave has room for one more lane out of service: fewer than `max_unavailable` of
 * its lanes out. Lanes excluded before the start count as out until the release includes them
 * (such a lane itself begins whatever the limits: it takes nothing more out of service).
 */
function waveHasRoom(r: Release, wave: number, lanes: LaneProgress[], pre: ReadonlySet<string>) {
  const out = lanes.filter((l) => l.out || (!l.started && pre.has(l.lane)));
  return out.length < maxUnavailable(r, wave);
}

/**
 * Whether lane `p`'s failure domain lets it leave service now: it is not the last lane of its
 * domain still in service (domains of one lane, and lanes with none, excepted).
 */
function domainAllows(r: Release, p: LaneProgress, pre: ReadonlySet<string>) {
  const domainOf = (id: string) => r.manifest.lanes.find((l) => l.id === id)?.failure_domain;
  const domain = domainOf(p.lane);
  if (domain === undefined) return true;
  const members = r.manifest.lanes.filter((l) => l.failure_domain === domain);
  if (members.length <= 1) return true;
  const outInDomain = members.filter((l) => isOutOfService(r, l.id, pre)).length;
  return outInDomain + 1 < members.length;
}

/**
 * Drives the lane rows of parallel wave `wave` (the cursor is on one of them): begins the next
 * row of every lane that is idle, then takes further lanes out of service, in the wave's
 * order, while the limits allow. Past the last lane, moves the cursor to the wave's rows and
 * returns true (the caller begins the step at the cursor). The cursor stays on the lowest row
 * not done, so plans and pages read "the first unfinished step". Starts nothing unless the
 * release is `running`.
 */
export function advanceParallelWave(
  d: Draft,
  wave: number,
  begin: (index: number) => void,
): boolean {
  const r = d.release;
  const lanes = laneProgress(r, wave);
  const pending = lanes.filter((l) => l.next !== null);
  if (pending.length === 0) {
    const last = Math.max(...lanes.flatMap((l) => l.rows));
    r.cursor = last + 1;
    d.accept(
      `[engine] every lane of wave ${wave + 1} is back in service on the new image (${lanes.length} lanes)`,
    );
    return true;
  }
  r.cursor = Math.min(...pending.map((l) => l.next as number));
  if (r.state !== "running") return false;
  for (const l of pending) {
    if (!l.started || l.busy || l.stuck || l.next === null) continue;
    begin(l.next);
  }
  const pre = excludedAtStart(r.manifest);
  for (const l of pending) {
    // Out of service since before the start: it begins at once, whatever the order.
    if (l.started || !pre.has(l.lane)) continue;
    l.started = true;
    l.out = true;
    begin(l.rows[0] as number);
  }
  for (const l of pending) {
    if (l.started) continue;
    // In the wave's order while there is room; a lane its domain holds back waits for one of
    // its domain to come back, and the lanes after it go first (docs/recipes.md).
    if (!waveHasRoom(r, wave, lanes, pre)) break;
    if (!domainAllows(r, l, pre)) continue;
    l.started = true;
    l.out = true;
    begin(l.rows[0] as number);
  }
  return false;
}

/** Forward step runs of the parallel wave at the cursor that ended without success. */
export function stuckInWave(r: Release): StepRun[] {
  const wave = parallelWaveOf(r, r.cursor);
  if (wave === null) return [];
  return laneProgress(r, wave).flatMap((l) => (l.stuck ? [l.stuck] : []));
}

/** A failed forward step run that waits for a re-run of its job until its own deadline. */
export function waitsOnRerun(s: StepRun): boolean {
  return s.direction === "fwd" && s.state === "failed" && typeof s.rerun_deadline === "number";
}

/**
 * The release's re-run deadline: the earliest deadline of the failed step runs that wait for a
 * re-run (in a parallel wave several lanes may, each with its own window), since the release
 * compensates when the first of them closes; null when none waits.
 */
export function releaseRerunDeadline(r: Release): number | null {
  let at: number | null = null;
  for (const s of r.step_runs) {
    if (waitsOnRerun(s) && (at === null || (s.rerun_deadline as number) < at))
      at = s.rerun_deadline as number;
  }
  return at;
}
