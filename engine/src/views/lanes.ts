/**
 * A release's lanes as Baton set them beside what the control plane reports now: per lane the
 * image it should run (candidate or baseline, with the image reference) and the weight of the
 * release's last traffic write, and the weight, image and `excluded` marker the control plane
 * lists. What `GET /v1/releases/:id/lanes` answers and `baton status -w` draws. Pure.
 */
import { laneImages } from "../domain/fleet.ts";
import type { Release } from "../domain/types.ts";
import type { LanesRead } from "../protocol/control-plane.ts";
import { type ImageRole, imageRole } from "./format.ts";
import { summarize } from "./summary.ts";

/** One lane: set (by the release) and observed (at the control plane; null when not listed). */
export interface LaneView {
  id: string;
  /** Wave of the lane, from 1 (0: in none). */
  wave: number;
  set: { image: string; role: ImageRole; weight: number | null };
  observed: { weight: number; excluded: boolean; image: string | null } | null;
}

/** The lanes of `r`, and the control plane's read error (null when it answered). */
export interface LanesView {
  release_id: string;
  model: string;
  lanes: LaneView[];
  /** Why the control plane could not be read (then every `observed` is null). */
  read_error: string | null;
}

/** `r`'s lanes as set and as `read` (one control-plane read of the model) observes them. */
export function lanesView(r: Release, read: LanesRead | null): LanesView {
  const facts = summarize(r, [], []);
  const weights = new Map(facts.lanes.map((l) => [l.id, l.weight]));
  const seen = read?.ok ? new Map(read.lanes.map((l) => [l.id, l])) : new Map();
  return {
    release_id: r.id,
    model: r.manifest.model,
    read_error: read === null ? "the engine reads no control plane" : read.ok ? null : read.message,
    lanes: laneImages(r).map((l) => {
      const o = seen.get(l.id);
      return {
        id: l.id,
        wave: l.wave,
        set: {
          image: l.ref,
          role: imageRole(r, l.image),
          weight: weights.get(l.id) ?? null,
        },
        observed: o ? { weight: o.weight, excluded: o.excluded, image: o.image ?? null } : null,
      };
    }),
  };
}
