/**
 * A rehearsal by the engine on a model's lanes marked for drills (docs/recovery-actions.md
 * "Rehearsing on the drill lanes"): an evacuation of those lanes at the control plane. Each drill
 * lane is taken out of routing (marker `excluded`, one absolute write per lane: its share goes to
 * the other lanes, whose weights are never written), the lanes are read back and judged (the
 * recovery verification), then each drill lane is put back as it was and judged again. Pure:
 * what may be rehearsed, the writes, and the judgements of the reads.
 */
import * as z from "zod";
import type { ControlPlaneOp, LaneState } from "../protocol/control-plane.ts";
import { lazySchema } from "../protocol/lazy-schema.ts";
import type { Problem } from "./errors.ts";
import { ActorField, ReasonField } from "./verbs.ts";

/** The body of `POST /v1/models/:model/drills/rehearse`: why (required) and who. */
export const RehearseBody = lazySchema(() =>
  z
    .object({
      reason: z
        .string({ error: 'must say why the recovery is rehearsed, e.g. "quarterly rehearsal"' })
        .pipe(ReasonField)
        .pipe(
          z
            .string()
            .trim()
            .min(1, 'must say why the recovery is rehearsed, e.g. "quarterly rehearsal"'),
        ),
      actor: ActorField,
    })
    .strict(),
);
export type RehearseInput = z.infer<typeof RehearseBody>;

/** One lane's routing as the control plane holds it: what a rehearsal may change and must keep. */
export interface LaneRouting {
  lane: string;
  weight: number;
  excluded: boolean;
}

/** `model`'s lanes at the control plane as routings, in id order. */
export function routingOf(lanes: readonly LaneState[], model: string): LaneRouting[] {
  return lanes
    .filter((l) => l.model === model)
    .map((l) => ({ lane: l.id, weight: l.weight, excluded: l.excluded }))
    .sort((a, b) => (a.lane < b.lane ? -1 : a.lane > b.lane ? 1 : 0));
}

/**
 * Why `drill` (the lanes marked for drills) cannot be evacuated now, or null: a drill lane the
 * control plane does not hold for `model`, a drill lane already out of routing (putting it back
 * afterwards would change it), or no other lane in routing with traffic to take their share.
 */
export function rehearsalRefusal(
  model: string,
  lanes: readonly LaneRouting[],
  drill: readonly string[],
): Problem | null {
  for (const id of drill) {
    const l = lanes.find((x) => x.lane === id);
    if (!l)
      return {
        path: `drill_lanes.${id}`,
        message: `lane ${id} is not a lane of ${model} at the control plane`,
        fix: `declare it for ${model} at the control plane, or release a recipe that no longer marks it \`drill: true\``,
      };
    if (l.excluded)
      return {
        path: `drill_lanes.${id}`,
        message: `lane ${id} is out of routing already (marker excluded)`,
        fix: `put it back in routing first (it would be put back at the end of the rehearsal, changing what it is now), or rehearse when it serves again`,
      };
  }
  // An evacuation of lanes that serve nothing moves no request: it would pass and rehearse nothing.
  if (!lanes.some((l) => drill.includes(l.lane) && l.weight > 0))
    return {
      path: "drill_lanes",
      message: `no drill lane of ${model} (${drill.join(", ")}) carries traffic (weight 0 at the control plane), so taking them out of routing would move no request and rehearse nothing`,
      fix: "mark `drill: true` on a lane that serves (e.g. not an idle blue-green environment) and release the recipe, or rehearse when a drill lane has a weight",
    };
  const others = lanes.filter((l) => !drill.includes(l.lane) && !l.excluded && l.weight > 0);
  if (others.length === 0)
    return {
      path: "drill_lanes",
      message: `no lane of ${model} outside the drill lanes (${drill.join(", ")}) is in routing with traffic, so taking them out would leave the model with none`,
      fix: "mark fewer lanes `drill: true` (a drill lane's share must go to a lane that is not one) and release the recipe",
    };
  return null;
}

/** The write that takes drill lane `lane` out of routing (`out`) or puts it back. */
export function evacuationOp(lane: string, out: boolean): ControlPlaneOp {
  return { op: "set_marker", lane, marker: "excluded", present: out };
}

/**
 * What is wrong with the lanes read back (`after`, null: not read) after the drill lanes were
 * taken out of routing (`out`) or put back: each drill lane must show `excluded === out`, every
 * other lane its weight and marker of `before`, and no lane may have come or gone. Empty: verified.
 */
export function rehearsalProblems(
  before: readonly LaneRouting[],
  after: readonly LaneRouting[] | null,
  drill: readonly string[],
  out: boolean,
): string[] {
  const phase = out
    ? "after the drill lanes were taken out"
    : "after the drill lanes were put back";
  if (!after) return [`${phase}: the control plane did not answer the read-back`];
  const problems: string[] = [];
  for (const b of before) {
    const a = after.find((x) => x.lane === b.lane);
    if (!a) {
      problems.push(`${phase}: lane ${b.lane} is gone from the control plane`);
      continue;
    }
    if (drill.includes(b.lane)) {
      if (a.excluded !== out)
        problems.push(
          `${phase}: drill lane ${b.lane} is ${a.excluded ? "out of" : "in"} routing, not ${out ? "out of" : "in"} it`,
        );
    } else if (a.weight !== b.weight || a.excluded !== b.excluded)
      problems.push(
        `${phase}: lane ${b.lane}, not a drill lane, changed (weight ${b.weight} -> ${a.weight}, excluded ${b.excluded} -> ${a.excluded})`,
      );
  }
  for (const a of after)
    if (!before.some((b) => b.lane === a.lane))
      problems.push(`${phase}: lane ${a.lane} appeared at the control plane`);
  return problems;
}
