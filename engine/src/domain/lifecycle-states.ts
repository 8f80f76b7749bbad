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
