/**
 * The engine's side of the payload digest (`protocol/payload-digest.ts`): the digest it expects
 * for a step run, and the wrapper that hands it to the pure transition at preflight.
 */
import { actionOf, findStepRun } from "../domain/transition/draft.ts";
import type { Release, ReleaseEvent, StepRun, TransitionResult } from "../domain/types.ts";
import { payloadDigest } from "../protocol/payload-digest.ts";

/**
 * The digest the engine expects at preflight for `sr` of `release`: the manifest's step action
 * for the step run's direction (the values `emitDispatch` puts in the dispatch effect) and the
 * step run's operation key. Returns undefined for a control-plane step run (never preflighted).
 */
export function expectedPayloadDigest(release: Release, sr: StepRun): string | undefined {
  const action = actionOf(release, sr);
  if (action.kind !== "runner") return undefined;
  return payloadDigest({ tool: action.tool, args: action.args, operation_key: sr.operation_key });
}

type Transition = (release: Release, event: ReleaseEvent, now: number) => TransitionResult;

/**
 * Wraps the pure transition so every preflight event carries `expected_payload_digest`,
 * computed here from the very release the transition decides on; whatever the
 * event held in that field is overwritten. The transition compares it with the runner's
 * `payload_digest` (docs/state-machine.md "Runner steps", preflight 1). Other events pass as is.
 */
export function withExpectedPayloadDigest(transition: Transition): Transition {
  return (release, event, now) => {
    if (event.type !== "preflight") return transition(release, event, now);
    const { expected_payload_digest: _ignored, ...rest } = event;
    const sr = findStepRun(release, event.step_run_id);
    const expected = sr ? expectedPayloadDigest(release, sr) : undefined;
    return transition(
      release,
      expected === undefined ? rest : { ...rest, expected_payload_digest: expected },
      now,
    );
  };
}
