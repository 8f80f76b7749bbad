/**
 * The lifecycle verbs and the release states each takes (docs/lifecycle.md), without the rest
 * of lifecycle.ts, so the transition's refusals can name them. Pure.
 */
import type { ReleaseState } from "./states.ts";

export type LifecycleVerb = "rollback" | "roll_forward";

/** The states each verb takes. */
export const LIFECYCLE_STATES: Record<LifecycleVerb, ReadonlySet<ReleaseState>> = {
  rollback: new Set<ReleaseState>(["succeeded"]),
  roll_forward: new Set<ReleaseState>(["rolled_back", "aborted", "abandoned"]),
};

/**
 * What a finished release accepts, for a refusal: "it accepts roll-forward (a new release of a
 * fixed recipe: `baton roll-forward r4 …`)" or "it accepts rollback (…)"; "it accepts nothing"
 * in a state no verb takes.
 */
export function closedReleaseAccepts(id: string, state: ReleaseState): string {
  if (LIFECYCLE_STATES.rollback.has(state))
    return `it accepts rollback (a new release of the previous manifest: \`baton rollback ${id} --reason "<why>"\`)`;
  if (LIFECYCLE_STATES.roll_forward.has(state))
    return `it accepts roll-forward (a new release of a fixed recipe: \`baton roll-forward ${id} <fixed-recipe.yaml>\`)`;
  return "it accepts nothing";
}

/**
 * Why a succeeded release `id` of `model` offers no rollback, for refusals: no earlier
 * succeeded release of the model kept an admitted manifest (the first release of a model), so
 * the way on is a new release. Pure.
 */
export function noRollbackTarget(id: string, model: string): string {
  return `there is no earlier admitted manifest of model ${model} to roll ${id} back to; roll forward with a new recipe instead (a new release: \`baton start <new-recipe.yaml> --bundle <its bundle.json>\`)`;
}
