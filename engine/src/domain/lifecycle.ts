/**
 * The lifecycle verbs that start a new release from a finished one (docs/lifecycle.md):
 * `rollback` of a succeeded release back to the previous admitted manifest of its model, and
 * `roll_forward` past a rolled-back, aborted or abandoned release with a new manifest. They
 * are not transitions of the release they name (a closed release never changes); each is
 * offered only in the states listed here, and a refusal names what the release accepts.
 */

import {
  LIFECYCLE_STATES,
  type LifecycleLookups,
  type LifecycleVerb,
  lifecycleBlocked,
  noRollbackTarget,
} from "./lifecycle-states.ts";
import { switchBackWords } from "./switch-back-words.ts";
import { availableActions } from "./transition/exits.ts";
import { rollForwardCommand, rollForwardPointLabel } from "./transition/recovery.ts";
import type { Release } from "./types.ts";
import { suggestedCommand } from "./verbs.ts";

export {
  LIFECYCLE_STATES,
  type LifecycleLookups,
  type LifecycleVerb,
  lifecycleBlocked,
  noRollbackTarget,
};

/** One lifecycle verb a release accepts now, for people (API, CLI, dashboard). */
export interface LifecycleAction {
  action: LifecycleVerb;
  /** The release it starts from. */
  target: string;
  /** One sentence: what the engine does when it is taken. */
  effect: string;
  /** The CLI command line that takes it. */
  command: string;
}

/**
 * A roll_forward_only release held `paused` past its `unsafe_after` step instead of
 * compensated: roll forward is offered (it ends the release aborted, then starts the fix).
 */
export function heldForRollForward(release: Release): boolean {
  return release.state === "paused" && !!release.roll_forward_hold;
}

/**
 * The lifecycle verbs `release` accepts in its state (pure). `o.rollbackTo`, when the caller
 * looked it up (the store): the release whose admitted manifest a rollback would run again,
 * or null when no earlier succeeded release kept its recipe (rollback is then not offered:
 * the engine would refuse it). Absent: offered by state alone.
 */
export function lifecycleActions(release: Release, o: LifecycleLookups = {}): LifecycleAction[] {
  const id = release.id;
  const out: LifecycleAction[] = [];
  // A later release of the model now defines its lanes: neither verb starts from this one.
  if (o.supersededBy) return out;
  // A succeeded roll_forward_only release ran past its unsafe point: rollback is refused
  // (the `recovery_class` prerequisite), so it is not offered.
  if (
    LIFECYCLE_STATES.rollback.has(release.state) &&
    o.rollbackTo !== null &&
    !o.rollbackClosed &&
    release.manifest.recovery?.class !== "roll_forward_only"
  ) {
    const env = o.oldEnvironment;
    out.push({
      action: "rollback",
      target: id,
      effect:
        release.manifest.strategy === "blue_green"
          ? `starts a new release of ${release.manifest.model} that is ${switchBackWords(id, env)}${env ? ` (warm until ${new Date(env.until).toISOString()})` : ""}`
          : `starts a new release that runs the previous admitted manifest of ${release.manifest.model}${o.rollbackTo ? ` (${o.rollbackTo}'s)` : ""} again (an explicit rollback; its undo restores ${id}'s image)${release.manifest.recovery?.class === "recoverable" ? `; ${id}'s recovery class is recoverable, so once traffic and images are back the rollback waits for its restore action to be confirmed (${release.manifest.recovery.restore ?? "none named"})` : ""}`,
      command: suggestedCommand("rollback", { target: id }),
    });
  }
  if (LIFECYCLE_STATES.roll_forward.has(release.state)) {
    out.push({
      action: "roll_forward",
      target: id,
      effect: `starts a new release of a fixed manifest of ${release.manifest.model} without going back to ${id}'s`,
      command: rollForwardCommand(id),
    });
  } else if (heldForRollForward(release)) {
    out.push({
      action: "roll_forward",
      target: id,
      effect: `ends ${id} aborted without undoing anything (its recovery class is roll_forward_only and ${rollForwardPointLabel(release)} may have taken effect), then starts a new release of a fixed manifest of ${release.manifest.model} in its place`,
      command: rollForwardCommand(id),
    });
  }
  return out;
}

/**
 * Every action `release` accepts now, operator exits and lifecycle verbs, as one phrase for a
 * refusal ("abort, resume" or "none"). `o` as `lifecycleActions` takes it; when the lookups
 * show a verb its state would offer cannot be taken (superseded, or no earlier admitted
 * manifest), the phrase ends with why and what to do instead (`lifecycleBlocked`), the same
 * words the record's `lifecycle_note`, the CLI and the dashboard show.
 */
export function acceptedActionsPhrase(release: Release, o: LifecycleLookups = {}): string {
  const names = [
    ...new Set([
      ...availableActions(release).map((a) => a.action),
      ...lifecycleActions(release, o).map((a) => a.action.replace("_", "-")),
    ]),
  ];
  const phrase =
    names.length > 0
      ? names.join(", ")
      : release.state === "running" || release.state === "compensating"
        ? "none now (it moves on by itself)"
        : "none";
  const blocked = lifecycleNote(release, o);
  return blocked ? `${phrase}; ${blocked}` : phrase;
}

/**
 * Why `release` offers no lifecycle verb its state would (`lifecycleBlocked` over the
 * release), or null. Pure.
 */
export function lifecycleNote(release: Release, o: LifecycleLookups = {}): string | null {
  return lifecycleBlocked(
    { id: release.id, state: release.state, model: release.manifest.model },
    o,
  );
}
