/**
 * The payload digest: what binds a preflight to the work the engine dispatched (docs/engine.md
 * "Preflight"). sha256 (lowercase hex, 64 chars) of the canonical JSON
 * (`protocol/canonical-json.ts`) of `{tool, args, operation_key}`.
 *
 * One function computes it for the action (from the payload it received), for the engine (from
 * its own record of the step run) and for tests, so the two sides cannot drift.
 */
import { canonicalJson } from "./canonical-json.ts";
import { sha256Hex } from "./sha256.ts";

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
  return sha256Hex(
    canonicalJson({ tool: work.tool, args: work.args, operation_key: work.operation_key }),
  );
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
