/**
 * The lifecycle verbs and the release states each takes (docs/lifecycle.md), without the rest
 * of lifecycle.ts, so the transition's refusals can name them. Pure.
 */

import type { OldEnvironment } from "./blue-green.ts";
import type { ReleaseState } from "./states.ts";
import {
  type RecipelessPredecessor,
  recipelessPredecessorWords,
  switchBackWords,
} from "./switch-back-words.ts";
import { suggestedCommand } from "./verbs.ts";

export type LifecycleVerb = "rollback" | "roll_forward";

/** The states each verb takes. */
export const LIFECYCLE_STATES: Record<LifecycleVerb, ReadonlySet<ReleaseState>> = {
  rollback: new Set<ReleaseState>(["succeeded"]),
  roll_forward: new Set<ReleaseState>(["rolled_back", "aborted", "abandoned"]),
};

/**
 * What the store tells about a finished release's lifecycle verbs (ReleaseService
 * `lifecycleLookups`): `rollbackTo` the release whose admitted manifest a rollback would run
 * again (null: none); `supersededBy` a later release of the same model that now defines its
 * lanes (in flight, succeeded, abandoned, or aborted with effects left in place), so neither
 * rollback nor roll forward starts from this one (null or absent: none), and
 * `supersededState` that release's state (for the words; absent: not named).
 */
export interface LifecycleLookups {
  rollbackTo?: string | null;
  /**
   * With `rollbackTo` null: the release before this one when it is why (a switch back whose
   * kept recipe deploys another image than the one it put back); absent or null otherwise.
   */
  rollbackGap?: RecipelessPredecessor | null;
  /**
   * Set when the rollback window of a succeeded release has closed: why, naming when and
   * what to do instead (domain/rollback-window.ts `rollbackWindowClosed`). Rollback is then
   * not offered.
   */
  rollbackClosed?: string | null;
  supersededBy?: string | null;
  supersededState?: ReleaseState | null;
  /**
   * A succeeded blue-green release's old environment at the engine's clock (warm until its
   * rollback window closes, then retired; domain/blue-green.ts); absent for other releases and
   * once a later release defines its lanes.
   */
  oldEnvironment?: OldEnvironment | null;
}

/** The release a lifecycle phrase is about: its id, state and model. */
export interface ClosedRelease {
  id: string;
  state: ReleaseState;
  model: string;
}

/**
 * Why a later release replaced `r` on its model's lanes, and what to do instead, for the
 * `superseded` refusal and every phrase of what `r` accepts (one wording). `instead` replaces
 * the default advice (roll back, act on or follow the later release). Pure.
 */
export function supersededWords(
  r: ClosedRelease,
  later: string,
  laterState?: ReleaseState | null,
  instead?: string,
): string {
  const what =
    instead ??
    (laterState === "succeeded"
      ? `roll back ${later} instead (\`${suggestedCommand("rollback", { target: later })}\`), or roll forward from ${later} once it has failed`
      : laterState && TERMINAL.has(laterState)
        ? `act on ${later} instead (\`baton status ${later}\` shows what it accepts)`
        : laterState
          ? `follow ${later} (\`baton watch ${later}\`); once it ends, act on it`
          : `act on ${later} instead (\`baton status ${later}\` shows what it accepts)`);
  return `${later}${laterState ? ` (${laterState})` : ""} of model ${r.model} came after it and now defines the lanes; ${what}`;
}

const TERMINAL: ReadonlySet<ReleaseState> = new Set<ReleaseState>([
  "succeeded",
  "rolled_back",
  "aborted",
  "abandoned",
]);

/**
 * Why a finished release offers no lifecycle verb its state alone would offer, from the
 * store's lookups: a later release replaced it on the lanes (`supersededWords`), or a
 * succeeded one has no earlier admitted manifest (`noRollbackTarget`). Null when the lookups
 * show neither (or were not made). The one source of these words for the API's refusals, its
 * record (`lifecycle_note`), the CLI and the dashboard. Pure.
 */
export function lifecycleBlocked(r: ClosedRelease, o: LifecycleLookups = {}): string | null {
  if (!TERMINAL.has(r.state)) return null;
  if (o.supersededBy) return supersededWords(r, o.supersededBy, o.supersededState);
  if (LIFECYCLE_STATES.rollback.has(r.state) && o.rollbackClosed)
    return `rollback of ${r.id} is closed: ${o.rollbackClosed}`;
  if (LIFECYCLE_STATES.rollback.has(r.state) && o.rollbackTo === null)
    return noRollbackTarget(r.id, r.model, o.rollbackGap);
  return null;
}

/**
 * What a finished release accepts, for a refusal: "it accepts roll-forward (a new release of a
 * fixed recipe: `baton roll-forward r4 …`)" or "it accepts rollback (…)"; "it accepts nothing"
 * in a state no verb takes. With the store's lookups (`lifecycleBlocked`), a verb that cannot
 * be taken is replaced by why and what to do instead; without them, by state alone (the pure
 * transition's refusals; the service rephrases them with the lookups).
 */
export function closedReleaseAccepts(
  id: string,
  state: ReleaseState,
  lookups?: { model: string; o: LifecycleLookups },
): string {
  const blocked = lookups ? lifecycleBlocked({ id, state, model: lookups.model }, lookups.o) : null;
  if (blocked) return blocked;
  const env = lookups?.o.oldEnvironment;
  if (LIFECYCLE_STATES.rollback.has(state) && env?.state === "warm")
    return `it accepts rollback (${switchBackWords(id, env)}: \`${suggestedCommand("rollback", { target: id })}\`)`;
  if (LIFECYCLE_STATES.rollback.has(state))
    return `it accepts rollback (a new release of the previous manifest: \`${suggestedCommand("rollback", { target: id })}\`)`;
  if (LIFECYCLE_STATES.roll_forward.has(state))
    return `it accepts roll-forward (a new release of a fixed recipe: \`${suggestedCommand("roll_forward", { target: id })}\`)`;
  return "it accepts nothing";
}

/**
 * Why a succeeded release `id` of `model` offers no rollback, for refusals: the release before
 * it kept a recipe of another image than the one it put back (`gap`, a switch back without a
 * recipe of its own: `recipelessPredecessorWords`), or no earlier succeeded release of the
 * model kept an admitted manifest (the first release of a model); either way the way on is a
 * new release. Pure.
 */
export function noRollbackTarget(
  id: string,
  model: string,
  gap?: RecipelessPredecessor | null,
): string {
  if (gap) return recipelessPredecessorWords(id, model, gap);
  return `there is no earlier admitted manifest of model ${model} to roll ${id} back to; roll forward with a new recipe instead (a new release: \`baton start <new-recipe.yaml> --bundle <bundle.json>\`)`;
}
