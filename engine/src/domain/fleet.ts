/**
 * The fleet view as data: per model and per lane, what Baton's releases declared (desired)
 * beside what the control plane holds now and the target last reported (observed), with
 * differences and mixed versions marked. Pure; built from release records and one control
 * plane read per model. Weights are integer percents 0–100; times are epoch ms.
 *
 * Desired, per lane, comes from the newest release that names the lane and has run a step
 * (else the newest that names it): the replay of its succeeded control-plane step runs (traffic
 * weights, the `excluded` marker, capabilities) in the order they finished, and the image its
 * runner steps left (the new image while a deploy of the lane stands, else the image the lane
 * ran when the release started, as its observed baseline recorded it and its undo restores,
 * falling back to the recipe's `previous_image` only when the baseline could not tell; for an
 * abandoned release, the image the operator confirmed).
 *
 * Observed: weight, excluded and capabilities as the control plane lists them; the image as the
 * control plane reports it (`LaneState.image`) or else as the target last reported it in a
 * step's result (`image` of a check in checks.json: the runtime's answer when the step ran).
 */
import type { LaneState, LanesRead } from "../protocol/control-plane.ts";
import { withoutWithdrawn } from "./kill-switch.ts";
import { stepWords } from "./step-words.ts";
import type { Json, Release } from "./types.ts";

/** A step run's result as the fleet reads it: its `checks.json` and when it arrived (epoch ms). */
export interface FleetStepResult {
  step_run_id: string;
  checks: Json;
  received_at: number;
}

/** One release with the results its runner steps reported (the service's `ReleaseRecord` fits). */
export interface FleetRecord {
  release: Release;
  attempt_results: readonly FleetStepResult[];
}

/**
 * Per lane of `r`'s manifest, the image Baton's steps left it with: `new` (the candidate, the
 * manifest's `image`) while a succeeded forward deploy of the lane stands (no succeeded undo),
 * else `previous` (the baseline: what the lane ran when the release started, as its observed
 * baseline recorded it and its undo restores; the recipe's `previous_image` only when the
 * baseline could not tell); `ref` is that image (`name@sha256:…`) and `baseline` the lane's
 * baseline image; and its wave, from 1 (0 when it is in none). A switch back's wave lanes
 * (domain/blue-green.ts) are `new`: they run its image without a deploy.
 */
export function laneImages(
  r: Release,
): { id: string; image: "new" | "previous"; ref: string; baseline: string; wave: number }[] {
  const steps = r.manifest.steps;
  const before = new Map((r.baseline?.lanes ?? []).map((b) => [b.id, str(b.image ?? undefined)]));
  return r.manifest.lanes.map((l) => {
    const wave = r.manifest.waves.findIndex((w) => w.lanes.includes(l.id));
    // A switch back deploys nothing: the lanes of its wave (the old environment it moves the
    // traffic to) run its image all along.
    const switched = r.lineage?.switch_back === true && wave >= 0;
    const deployed =
      switched ||
      r.step_runs.some((sr) => {
        const step = steps[sr.step_index];
        return (
          step?.lane === l.id &&
          step.kind === "runner" &&
          sr.direction === "fwd" &&
          sr.state === "succeeded" &&
          step.backward !== null &&
          !r.step_runs.some(
            (b) =>
              b.step_index === sr.step_index && b.direction === "bwd" && b.state === "succeeded",
          )
        );
      });
    const baseline = before.get(l.id) ?? r.manifest.previous_image;
    return {
      id: l.id,
      image: deployed ? "new" : "previous",
      ref: deployed ? r.manifest.image : baseline,
      baseline,
      wave: wave + 1,
    };
  });
}

/** What Baton's newest release of a lane declared for it. */
export interface DesiredLane {
  release_id: string;
  release_state: Release["state"];
  /** When that release ended (its last update, epoch ms), null while it runs. */
  release_ended_at: number | null;
  /** Wave of the lane in that release, from 1 (0 when it is in none). */
  wave: number;
  /**
   * `name@sha256:…`, and whether it is the release's new image, the previous one (what the lane
   * ran when the release started, as its observed baseline recorded it and its undo restores;
   * the recipe's `previous_image` when the baseline could not tell) or one an operator confirmed.
   */
  image: string;
  image_is: "new" | "previous" | "confirmed";
  /** That release's candidate (its manifest's `image`) and the lane's baseline image. */
  candidate: string;
  baseline: string;
  /** Weight (%) of the last traffic write, null when no traffic step of the release ran. */
  weight: number | null;
  /** `excluded` marker as last set, null when the release never set it. */
  excluded: boolean | null;
  /** Capabilities as last set (sorted), null when never set. */
  capabilities: string[] | null;
  advertised: boolean | null;
}

/** What the control plane (and the target) show for a lane now. */
export interface ObservedLane {
  weight: number;
  excluded: boolean;
  capabilities: string[];
  advertised: boolean;
  /** Image and where it was read: the control plane, or the target's report in a step result. */
  image: {
    ref: string;
    source: "control_plane" | "target";
    at: number;
    step: string | null;
  } | null;
  updated_at: number;
}

/** Fields of a lane whose observed value differs from the desired one. */
export type LaneField = "image" | "weight" | "excluded" | "capabilities";

export interface FleetLane {
  id: string;
  desired: DesiredLane | null;
  /** null: the control plane did not list the lane (or could not be read). */
  observed: ObservedLane | null;
  differs: LaneField[];
}

export interface FleetModel {
  model: string;
  lanes: FleetLane[];
  /** The control plane's read failed: its message (observed is then unknown). */
  readError: string | null;
  /**
   * Distinct images serving traffic (weight > 0, not excluded) with their lanes; more than one
   * entry means mixed versions (expected during a canary, a problem once releases ended).
   */
  images: { ref: string; lanes: string[]; weight: number }[];
  mixed: boolean;
  /** A release of the model that has not ended (then a difference may be work in progress). */
  active: string | null;
}

const ENDED = new Set(["succeeded", "rolled_back", "aborted", "abandoned"]);

function ran(r: Release): boolean {
  return r.step_runs.some((s) => s.state !== "planned");
}

/** Replays the succeeded control-plane writes of `r` into per-lane desired values. */
function declared(rec: FleetRecord): Map<string, DesiredLane> {
  const r = rec.release;
  const steps = r.manifest.steps;
  const out = new Map<string, DesiredLane>();
  for (const l of laneImages(r)) {
    const confirmed = r.abandoned?.lanes[l.id];
    // Not deployed (never, or undone): what the lane ran at start, which is what compensation
    // restores (domain/catalogue.ts restoreImage); previous_image only when the baseline could
    // not tell. A rollback's previous_image is its older recipe's, not what ran on the lanes.
    out.set(l.id, {
      release_id: r.id,
      release_state: r.state,
      release_ended_at: ENDED.has(r.state) ? r.updated_at : null,
      wave: l.wave,
      image: confirmed ?? l.ref,
      image_is: confirmed ? "confirmed" : l.image,
      candidate: r.manifest.image,
      baseline: l.baseline,
      weight: null,
      excluded: null,
      capabilities: null,
      advertised: null,
    });
  }
  const writes = r.step_runs
    .filter((s) => s.kind === "control_plane" && s.state === "succeeded")
    .sort((a, b) => (a.finished_at ?? 0) - (b.finished_at ?? 0));
  for (const sr of writes) {
    const step = steps[sr.step_index];
    const a = sr.direction === "fwd" ? step?.forward : step?.backward;
    if (a?.kind !== "control_plane") continue;
    const req = a.request;
    if (req.op === "set_traffic") {
      for (const [id, d] of out) d.weight = Object.hasOwn(req.weights, id) ? req.weights[id]! : 0;
    } else if (req.op === "set_marker") {
      const d = out.get(req.lane);
      if (d) d.excluded = req.present;
    } else if (req.op === "set_capabilities") {
      const d = out.get(req.lane);
      if (d) {
        d.capabilities = [...new Set(req.capabilities)].sort();
        d.advertised = req.advertised;
      }
    }
  }
  return out;
}

function str(v: Json | undefined): string | null {
  return typeof v === "string" && v.trim() ? v.trim() : null;
}

/** The newest image a target reported for each lane in its step results (`image` of a check). */
function targetImages(
  records: readonly FleetRecord[],
): Map<string, { ref: string; at: number; step: string }> {
  const out = new Map<string, { ref: string; at: number; step: string }>();
  for (const rec of records) {
    const r = rec.release;
    const byRun = new Map(r.step_runs.map((s) => [s.id, s]));
    for (const a of rec.attempt_results) {
      const sr = byRun.get(a.step_run_id);
      const step = sr ? r.manifest.steps[sr.step_index] : undefined;
      if (!step?.lane || !Array.isArray(a.checks)) continue;
      let ref: string | null = null;
      for (const c of a.checks) {
        if (c && typeof c === "object" && !Array.isArray(c)) ref = str(c.image) ?? ref;
      }
      if (!ref) continue;
      const seen = out.get(step.lane);
      if (!seen || a.received_at >= seen.at) {
        out.set(step.lane, {
          ref,
          at: a.received_at,
          step: `${r.id} ${stepWords(step)}${sr?.direction === "bwd" ? " undo" : ""}`,
        });
      }
    }
  }
  return out;
}

function sameList(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * The fleet: one entry per model, from the release records (newest first or in any order)
 * and the control plane's read of each model's lanes (absent = not read). `withdrawn` gives a
 * model's capabilities withdrawn by kill switches in force: its desired lists leave them out.
 */
export function fleetFacts(
  records: readonly FleetRecord[],
  reads: ReadonlyMap<string, LanesRead>,
  withdrawn: ReadonlyMap<string, readonly string[]> = new Map(),
): FleetModel[] {
  const newestFirst = [...records].sort((a, b) => b.release.created_at - a.release.created_at);
  const models = new Set<string>([...newestFirst.map((r) => r.release.manifest.model)]);
  for (const [m, read] of reads) {
    models.add(m);
    if (read.ok) for (const l of read.lanes) if (l.model) models.add(l.model);
  }
  const images = targetImages(newestFirst);
  const out: FleetModel[] = [];
  for (const model of [...models].sort()) {
    const recs = newestFirst.filter((r) => r.release.manifest.model === model);
    const desired = new Map<string, DesiredLane>();
    const decided = new Set<string>();
    // The newest release that ran a step decides a lane; else the newest that names it.
    for (const pass of [true, false]) {
      for (const rec of recs) {
        if (pass && !ran(rec.release)) continue;
        const lanes = rec.release.manifest.lanes.map((l) => l.id).filter((id) => !decided.has(id));
        if (lanes.length === 0) continue;
        const d = declared(rec);
        for (const id of lanes) {
          const v = d.get(id);
          if (v) {
            desired.set(id, v);
            decided.add(id);
          }
        }
      }
    }
    const read = reads.get(model);
    const listed = new Map<string, LaneState>();
    if (read?.ok) for (const l of read.lanes) if (l.model === model) listed.set(l.id, l);
    // Lanes Baton declared for this model but that the control plane lists under no model.
    if (read?.ok)
      for (const l of read.lanes) if (l.model === null && desired.has(l.id)) listed.set(l.id, l);
    const ids = [...new Set([...desired.keys(), ...listed.keys()])].sort();
    const killed = withdrawn.get(model) ?? [];
    const lanes: FleetLane[] = ids.map((id) => {
      const decidedLane = desired.get(id) ?? null;
      const d =
        decidedLane?.capabilities && killed.length
          ? { ...decidedLane, capabilities: withoutWithdrawn(decidedLane.capabilities, killed) }
          : decidedLane;
      const cp = listed.get(id);
      const t = images.get(id);
      const observed: ObservedLane | null = cp
        ? {
            weight: cp.weight,
            excluded: cp.excluded,
            capabilities: [...cp.capabilities].sort(),
            advertised: cp.advertised,
            image: str(cp.image ?? undefined)
              ? { ref: cp.image!, source: "control_plane", at: cp.updated_at, step: null }
              : t
                ? { ref: t.ref, source: "target", at: t.at, step: t.step }
                : null,
            updated_at: cp.updated_at,
          }
        : null;
      const differs: LaneField[] = [];
      if (d && observed) {
        if (observed.image && observed.image.ref !== d.image) differs.push("image");
        if (d.weight !== null && observed.weight !== d.weight) differs.push("weight");
        if (d.excluded !== null && observed.excluded !== d.excluded) differs.push("excluded");
        if (
          d.capabilities !== null &&
          (!sameList(observed.capabilities, d.capabilities) || observed.advertised !== d.advertised)
        )
          differs.push("capabilities");
      }
      return { id, desired: d, observed, differs };
    });
    const serving = new Map<string, { lanes: string[]; weight: number }>();
    for (const l of lanes) {
      const weight = l.observed ? l.observed.weight : (l.desired?.weight ?? 0);
      const excluded = l.observed ? l.observed.excluded : (l.desired?.excluded ?? false);
      const ref = l.observed?.image?.ref ?? l.desired?.image ?? null;
      if (!ref || weight <= 0 || excluded) continue;
      const e = serving.get(ref) ?? { lanes: [], weight: 0 };
      e.lanes.push(l.id);
      e.weight += weight;
      serving.set(ref, e);
    }
    const active = recs.find((r) => !ENDED.has(r.release.state))?.release.id ?? null;
    out.push({
      model,
      lanes,
      readError: read && !read.ok ? read.message : null,
      images: [...serving].map(([ref, e]) => ({ ref, ...e })).sort((a, b) => b.weight - a.weight),
      mixed: serving.size > 1,
      active,
    });
  }
  return out;
}
