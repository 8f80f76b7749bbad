/**
 * A correct preflight request for a dispatch payload, as the release-step action builds it:
 * the payload's identity fields echoed, plus `payload_digest` of the payload's work
 * (engine/src/protocol/payload-digest.ts). Tests that hand-sign preflights use this so the
 * engine's payload binding (409 payload_mismatch) sees the genuine digest.
 */
import { payloadDigestOf } from "../../engine/src/protocol/payload-digest.ts";

/** The payload fields a preflight echoes (a `DispatchPayload`, or its parsed JSON). */
export interface PayloadLike {
  step_run_id: string;
  tool: string;
  args: Record<string, unknown>;
  release: {
    id: string;
    generation: number;
    manifest_digest: string;
    dispatch: number;
    operation_key: string;
  };
}

/** The preflight body object for `p` run as (`run_id`, `run_attempt`) from commit `sha`. */
export function preflightRequestFor(
  p: PayloadLike,
  run: { run_id: string; run_attempt: number },
  sha: string,
  over: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    step_run_id: p.step_run_id,
    release_id: p.release.id,
    generation: p.release.generation,
    manifest_digest: p.release.manifest_digest,
    dispatch: p.release.dispatch,
    run_id: run.run_id,
    run_attempt: run.run_attempt,
    sha,
    tool: p.tool,
    payload_digest: payloadDigestOf(p),
    ...over,
  };
}
