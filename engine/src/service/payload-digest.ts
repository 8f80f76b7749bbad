/**
 * The payload digest: what binds a preflight to the work the engine dispatched (docs/engine.md
 * "Preflight"). sha256 (lowercase hex, 64 chars) of the canonical JSON (RFC 8785 style: sorted
 * keys, no whitespace; engine/src/domain/canonical-json.ts) of `{tool, args, operation_key}`.
 *
 * One function computes it for the action (from the payload it received), for the engine (from
 * its own record of the step run) and for tests, so the two sides cannot drift. Kept here, not in
 * the pure domain: the transition only compares the two digests the service hands it.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../domain/canonical-json.ts";
import { actionOf, findStepRun } from "../domain/transition/draft.ts";
import type { Release, ReleaseEvent, StepRun, TransitionResult } from "../domain/types.ts";

/** The work a dispatch carries: the tool, its args and the step run's operation key. */
export interface PayloadWork {
  tool: string;
  args: Record<string, unknown>;
  operation_key: string;
}

/**
 * sha256 hex (64 chars) of `canonicalJson({tool, args, operation_key})`.
 * @throws TypeError when `args` holds a value JSON cannot carry (undefined, NaN, …).
 */
export function payloadDigest(work: PayloadWork): string {
  const canonical = canonicalJson({
    tool: work.tool,
    args: work.args,
    operation_key: work.operation_key,
  });
  return createHash("sha256").update(canonical, "utf8").digest("hex");
}

/** The digest of a dispatch payload's work (`tool`, `args`, `release.operation_key`). */
export function payloadDigestOf(payload: {
  tool: string;
  args: Record<string, unknown>;
  release: { operation_key: string };
}): string {
  return payloadDigest({
    tool: payload.tool,
    args: payload.args,
    operation_key: payload.release.operation_key,
  });
}

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
 * computed here (node:crypto) from the very release the transition decides on; whatever the
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
