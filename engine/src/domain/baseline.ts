/**
 * The observed baseline (docs/state-machine.md "The observed baseline"): at release start the
 * engine reads the control plane's actual lanes and checks them against the recipe. Pure: the
 * caller reads the lanes (port `ControlPlane.lanes`) and passes them in.
 *
 * The recipe's view and the control plane's must agree, or the start is refused (422):
 * - every recipe lane is a lane the control plane knows and serves for the recipe's model
 *   (it never creates a lane on a write, so an unknown lane could never be routed);
 * - no lane the control plane routes the model to (weight > 0) is missing from the recipe
 *   (its share would be silently moved onto the recipe's lanes);
 * - the recipe's lanes carry 100% of the model's traffic;
 * - where the recipe states a lane's `weight`, it equals the observed weight;
 * - no lane in service already runs the candidate (`candidate-at-start.ts`).
 * A lane of the model with weight 0 that the recipe does not name is left alone.
 *
 * Each baseline lane records the image it runs where the control plane can tell
 * (`LaneState.image`, what the lane last reported, pinned by digest), else null (unknown):
 * compensation restores that image on the lanes it redeployed, and a restore is judged by the
 * target's report against it.
 */
import { IMAGE_PATTERN } from "../protocol/fields.ts";
import { candidateAtStart } from "./candidate-at-start.ts";
import type { ObservedLane } from "./compile.ts";
import type { Problem } from "./errors.ts";

/** A lane as the control plane reports it (the wire's `LaneState`, fields the check needs). */
export interface ControlPlaneLane {
  id: string;
  model: string | null;
  weight: number;
  excluded: boolean;
  capabilities: string[];
  advertised: boolean;
  /** Image the lane reported (`name@sha256:…`); absent or null when unknown. */
  image?: string | null;
}

/** The recipe's side of the comparison. */
export interface RecipeLanes {
  model: string;
  lanes: readonly { id: string; weight?: number }[];
  /** The candidate image (`name@sha256:…`): a lane in service already running it is refused. */
  image: string;
  /** The recipe's `previous_image`, named in the fix of a lane already on the candidate. */
  previous_image?: string;
}

/**
 * Compares the control plane's lanes with the recipe's. Returns the observed baseline, one
 * entry per recipe lane in recipe order, or every disagreement as a problem (path
 * `lanes.<id>` or `control_plane.lanes.<id>`, with the fix).
 */
export function observeBaseline(
  recipe: RecipeLanes,
  seen: readonly ControlPlaneLane[],
): { ok: true; baseline: ObservedLane[] } | { ok: false; problems: Problem[] } {
  const { model } = recipe;
  const byId = new Map(seen.map((l) => [l.id, l]));
  const named = new Set(recipe.lanes.map((l) => l.id));
  const problems: Problem[] = [];
  const baseline: ObservedLane[] = [];
  recipe.lanes.forEach((l, i) => {
    const lane = byId.get(l.id);
    if (!lane || lane.model === null) {
      problems.push({
        path: `lanes.${i}.id`,
        message: `lane ${l.id} is not registered for model ${model} at the control plane (it has never seen it serve ${model})`,
        fix: `register the lane first (PUT /v1/lanes/${l.id} {"model":"${model}"} and give it its weight with PUT /v1/models/${model}/traffic), or remove it from the recipe; on the engine's embedded control plane (no BATON_CONTROL_PLANE_URL) set BATON_EMBEDDED_LANES to this recipe's path and restart, so the engine declares its lanes at start (docs/engine.md)`,
      });
      return;
    }
    if (lane.model !== model) {
      problems.push({
        path: `lanes.${i}.id`,
        message: `lane ${l.id} serves model ${lane.model} at the control plane, not ${model}`,
        fix: `name only lanes of model ${model}, or move the lane to ${model} first (PUT /v1/lanes/${l.id} {"model":"${model}"})`,
      });
      return;
    }
    if (l.weight !== undefined && l.weight !== lane.weight) {
      problems.push({
        path: `lanes.${i}.weight`,
        message: `the recipe says lane ${l.id} carries ${l.weight}% of ${model}; the control plane routes ${lane.weight}%`,
        fix: `remove weight from the recipe (the engine reads the baseline from the control plane) or set it to ${lane.weight}`,
      });
    }
    baseline.push({
      id: lane.id,
      weight: lane.weight,
      excluded: lane.excluded,
      capabilities: [...lane.capabilities].sort(),
      advertised: lane.advertised,
      // Only a digest-pinned reference: anything else could not be restored or compared.
      image: typeof lane.image === "string" && IMAGE_PATTERN.test(lane.image) ? lane.image : null,
    });
  });
  for (const lane of seen) {
    if (lane.model !== model || named.has(lane.id) || lane.weight <= 0) continue;
    problems.push({
      path: `control_plane.lanes.${lane.id}`,
      message: `the control plane routes ${lane.weight}% of model ${model} to lane ${lane.id}, which the recipe does not name`,
      fix: `add lane ${lane.id} to the recipe, or move its traffic to the recipe's lanes first (PUT /v1/models/${model}/traffic)`,
    });
  }
  problems.push(...candidateAtStart(model, recipe.image, recipe.previous_image, baseline));
  if (problems.length === 0) {
    const total = baseline.reduce((a, l) => a + l.weight, 0);
    if (total !== 100) {
      problems.push({
        path: "lanes",
        message: `the recipe's lanes carry ${total}% of model ${model} at the control plane, not 100%`,
        fix: `set the model's traffic first (PUT /v1/models/${model}/traffic with weights summing to 100 over the recipe's lanes)`,
      });
    }
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, baseline };
}
