/**
 * Drift judged from the fleet's facts (docs/drift.md), pure: per lane of a model with no
 * release in flight, the fields whose observed value differs from what its last releases left
 * (desired), mixed versions outside a release, the history entries that record a drift or its
 * end, and the drift a release's history shows now. The facts come from the fleet view (its
 * `FleetModel` has the shape of `DriftFacts`); the service reads them and stores the entries.
 */
import { canonicalJson } from "../protocol/canonical-json.ts";
import type { HistoryEntry, Json } from "./types.ts";

/** History kinds of drift (on the release that decided the drifted lanes). */
export const DRIFT_KIND = "drift";
export const DRIFT_CLEARED_KIND = "drift_cleared";

/** Fields of a lane whose observed value can differ from the desired one. */
export type DriftField = "image" | "weight" | "excluded" | "capabilities";

/** One lane as the fleet view shows it: desired (by a release) and observed (now). */
export interface DriftLaneFacts {
  id: string;
  desired: {
    release_id: string;
    /** When the deciding release ended (epoch ms), null while it runs. */
    release_ended_at: number | null;
    /** Wave of the lane in that release, from 1 (0 when in none). */
    wave: number;
    image: string;
    weight: number | null;
    excluded: boolean | null;
    capabilities: string[] | null;
    advertised: boolean | null;
  } | null;
  /** null: the control plane did not list the lane. */
  observed: {
    weight: number;
    excluded: boolean;
    capabilities: string[];
    advertised: boolean;
    image: { ref: string } | null;
  } | null;
  differs: DriftField[];
}

/** One model's fleet facts, as the fleet view (`FleetModel`) builds them. */
export interface DriftFacts {
  model: string;
  lanes: DriftLaneFacts[];
  /** The control plane's read failed: its message. */
  readError: string | null;
  /** Distinct images serving traffic, with their lanes and summed weight (%). */
  images: { ref: string; lanes: string[]; weight: number }[];
  mixed: boolean;
  /** A release of the model that has not ended. */
  active: string | null;
}

/** One drifted lane: the fields that differ with their desired and observed values. */
export interface DriftedLane {
  id: string;
  fields: string[];
  desired: Record<string, Json>;
  observed: Record<string, Json>;
}

/** A model's drift as recorded in history (`data` of a `drift` entry). */
export interface ModelDrift {
  model: string;
  lanes: DriftedLane[];
  /** More than one image serves traffic while no release runs. */
  mixed: boolean;
  images: { ref: string; lanes: string[]; weight: number }[];
  observed_at: number;
}

/** One model as an observation judged it (no release of it in flight). */
export interface ObservedModel {
  drift: ModelDrift;
  /** Per wave (1…, 0 = lanes in no wave): distinct images its listed lanes run. */
  waves: { wave: number; images: number }[];
  /** Per lane the control plane listed: desired weight (null: never set) and observed, %. */
  weights: { lane: string; desired: number | null; observed: number }[];
}

/** What identifies one distinct drift (key order does not matter: stores may reorder JSON). */
export function driftPrint(d: Pick<ModelDrift, "lanes" | "mixed" | "images">): string {
  return canonicalJson([d.lanes, d.mixed, d.images]);
}

/**
 * The drift of one model's fleet facts at `now` (epoch ms); null when it has a release in
 * flight, no read, or a lane whose deciding release ended less than `settleMs` ago (settling).
 */
export function modelDrift(m: DriftFacts, now: number, settleMs = 0): ModelDrift | null {
  if (m.active !== null || m.readError !== null) return null;
  if (settling(m, now, settleMs)) return null;
  const lanes: DriftedLane[] = [];
  for (const l of m.lanes) {
    if (!l.desired || !l.observed || l.differs.length === 0) continue;
    const d = l.desired;
    const o = l.observed;
    const desired: Record<string, Json> = {};
    const observed: Record<string, Json> = {};
    for (const f of l.differs) {
      if (f === "image") {
        desired.image = d.image;
        observed.image = o.image?.ref ?? null;
      } else if (f === "weight") {
        desired.weight = d.weight;
        observed.weight = o.weight;
      } else if (f === "excluded") {
        desired.excluded = d.excluded;
        observed.excluded = o.excluded;
      } else {
        desired.capabilities = d.capabilities;
        desired.advertised = d.advertised;
        observed.capabilities = o.capabilities;
        observed.advertised = o.advertised;
      }
    }
    lanes.push({ id: l.id, fields: [...l.differs], desired, observed });
  }
  return { model: m.model, lanes, mixed: m.mixed, images: m.images, observed_at: now };
}

/** True when a lane's deciding release ended less than `settleMs` before `now`. */
export function settling(m: DriftFacts, now: number, settleMs: number): boolean {
  return m.lanes.some((l) => {
    const ended = l.desired?.release_ended_at ?? null;
    return ended !== null && now - ended < settleMs;
  });
}

/** One line for people: what differs, lane by lane. */
export function driftMessage(d: ModelDrift): string {
  const parts = d.lanes.map(
    (l) =>
      `${l.id} ${driftedValues(l)
        .map(
          (v) =>
            `${v.field} desired ${JSON.stringify(v.desired)} observed ${JSON.stringify(v.observed)}`,
        )
        .join(", ")}`,
  );
  if (d.mixed)
    parts.push(
      `mixed versions outside a release: ${d.images.map((i) => `${i.ref} on ${i.lanes.join(",")}`).join("; ")}`,
    );
  return `[drift] model ${d.model}: ${parts.join("; ")}`;
}

/**
 * The values of a drifted lane that differ, one per field people can compare: `capabilities`
 * is split into the list and `advertised`, and only the part that differs is named (a lane
 * whose capabilities are the same but no longer advertised shows `advertised desired true
 * observed false`, not two identical lists).
 */
export function driftedValues(
  l: DriftedLane,
): { field: string; desired: Json | undefined; observed: Json | undefined }[] {
  return l.fields.flatMap((f) => {
    if (f !== "capabilities") return [{ field: f, desired: l.desired[f], observed: l.observed[f] }];
    const out: { field: string; desired: Json | undefined; observed: Json | undefined }[] = [];
    const lists = [l.desired.capabilities, l.observed.capabilities];
    if (canonicalJson(lists[0] ?? null) !== canonicalJson(lists[1] ?? null))
      out.push({ field: "capabilities", desired: lists[0], observed: lists[1] });
    if (l.desired.advertised !== l.observed.advertised)
      out.push({
        field: "advertised",
        desired: l.desired.advertised,
        observed: l.observed.advertised,
      });
    return out.length > 0
      ? out
      : [{ field: "capabilities", desired: lists[0], observed: lists[1] }];
  });
}

/** Distinct images per wave: each listed lane's observed image, else its desired one. */
export function waveImages(m: DriftFacts): { wave: number; images: number }[] {
  const byWave = new Map<number, Set<string>>();
  for (const l of m.lanes) {
    if (!l.observed) continue;
    const wave = l.desired?.wave ?? 0;
    const ref = l.observed.image?.ref ?? l.desired?.image ?? null;
    const set = byWave.get(wave) ?? new Set<string>();
    if (ref) set.add(ref);
    byWave.set(wave, set);
  }
  return [...byWave]
    .map(([wave, refs]) => ({ wave, images: refs.size }))
    .sort((a, b) => a.wave - b.wave);
}

/** A judged model as the metrics show it: its drift, images per wave, weights per lane. */
export function observedModel(m: DriftFacts, d: ModelDrift): ObservedModel {
  return {
    drift: d,
    waves: waveImages(m),
    weights: m.lanes.flatMap((l) =>
      l.observed
        ? [{ lane: l.id, desired: l.desired?.weight ?? null, observed: l.observed.weight }]
        : [],
    ),
  };
}

/**
 * The release a model's drift is recorded on: the one that decided its first drifted lane,
 * else the one that decided any of its lanes; undefined when no release decided one.
 */
export function driftRelease(m: DriftFacts, d: ModelDrift): string | undefined {
  return (
    m.lanes.find((l) => d.lanes.some((x) => x.id === l.id))?.desired?.release_id ??
    m.lanes.find((l) => l.desired)?.desired?.release_id
  );
}

/** Whether `d` is a drift at all: a lane differs, or versions are mixed. */
export function drifted(d: ModelDrift): boolean {
  return d.lanes.length > 0 || d.mixed;
}

/** The `drift` entry recording `d` on `releaseId` at `now`. */
export function driftEntry(releaseId: string, d: ModelDrift, now: number): HistoryEntry {
  return {
    release_id: releaseId,
    at: now,
    kind: DRIFT_KIND,
    step_run_id: null,
    outcome: "accepted",
    message: driftMessage(d),
    data: d as unknown as Json,
  };
}

/** The `drift_cleared` entry: model `model`'s lanes are again as its last release left them. */
export function driftClearedEntry(releaseId: string, model: string, now: number): HistoryEntry {
  return {
    release_id: releaseId,
    at: now,
    kind: DRIFT_CLEARED_KIND,
    step_run_id: null,
    outcome: "accepted",
    message: `[drift] model ${model}: every lane is again as its last release left it`,
    data: { model, observed_at: now },
  };
}

/** The drift a release's history shows now: its latest drift entry unless cleared since. */
export function currentDrift(history: readonly HistoryEntry[]): ModelDrift | null {
  for (let i = history.length - 1; i >= 0; i--) {
    const h = history[i];
    if (h?.kind === DRIFT_CLEARED_KIND) return null;
    if (h?.kind === DRIFT_KIND) return h.data as unknown as ModelDrift;
  }
  return null;
}

/**
 * The print of the drift last recorded in `history` ("" when none, or cleared since): what a
 * restarted engine compares with, so an unchanged drift is not recorded (or told) again.
 */
export function recordedPrint(history: readonly HistoryEntry[]): string {
  for (let i = history.length - 1; i >= 0; i--) {
    const h = history[i];
    if (h?.kind === DRIFT_CLEARED_KIND) break;
    if (h?.kind === DRIFT_KIND && h.data) return driftPrint(h.data as unknown as ModelDrift);
  }
  return "";
}
