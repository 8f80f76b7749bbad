/**
 * Builds the `client_payload` of a dispatch (docs/engine.md "Dispatch payloads") from a
 * dispatch effect and its release, and refuses, before anything is sent, a payload GitHub would
 * refuse (failure case F01, docs/failure-cases.md): at most 10 top-level keys and less than 64 KB of JSON. Extra fields nest under `args`
 * or `release`, so the top level is always the same six keys.
 */
import { BatonError } from "../domain/errors.ts";
import type { DispatchEffect, Release } from "../domain/types.ts";
import { DispatchPayload, GITHUB_DISPATCH_LIMITS } from "../protocol/messages.ts";

/** The callback URL of a step run under the engine's public base URL (no trailing slash). */
export function callbackUrl(publicUrl: string, stepRunId: string): string {
  return `${publicUrl.replace(/\/+$/, "")}/v1/releases/step-runs/${stepRunId}/callback`;
}

/**
 * Returns the dispatch payload for `effect` of `release`.
 * @param publicUrl the engine's base URL as runners reach it.
 * @throws BatonError `payload_too_large` when the JSON is ≥ 64 KB (65,536 bytes) or has more
 *   than 10 top-level keys; `bad_request` when a field breaks the wire schema. Callers record
 *   that as a definitive `dispatch_failed` and never send it.
 */
export function buildDispatchPayload(
  effect: DispatchEffect,
  release: Release,
  publicUrl: string,
): DispatchPayload {
  const candidate = {
    v: 1 as const,
    step_run_id: effect.step_run_id,
    tool: effect.tool,
    args: effect.args,
    callback_url: callbackUrl(publicUrl, effect.step_run_id),
    release: {
      id: release.id,
      generation: effect.generation,
      manifest_digest: release.manifest_digest,
      dispatch: effect.dispatch,
      operation_key: effect.operation_key,
    },
  };
  const keys = Object.keys(candidate).length;
  if (keys > GITHUB_DISPATCH_LIMITS.client_payload_max_top_level_keys) {
    throw new BatonError(
      "payload_too_large",
      `[engine] dispatch payload of ${effect.step_run_id} has ${keys} top-level keys; GitHub allows ${GITHUB_DISPATCH_LIMITS.client_payload_max_top_level_keys}: nest extra fields under args or release`,
    );
  }
  const bytes = Buffer.byteLength(JSON.stringify(candidate), "utf8");
  if (bytes >= GITHUB_DISPATCH_LIMITS.client_payload_max_bytes) {
    throw new BatonError(
      "payload_too_large",
      `[engine] dispatch payload of ${effect.step_run_id} is ${bytes} bytes; GitHub allows less than ${GITHUB_DISPATCH_LIMITS.client_payload_max_bytes}: shrink the step's args (pass large data by reference)`,
    );
  }
  const parsed = DispatchPayload.safeParse(candidate);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => ({
      path: i.path.join("."),
      message: i.message,
      fix: "fix the step table entry that produced this dispatch",
    }));
    throw new BatonError(
      "bad_request",
      `[engine] dispatch payload of ${effect.step_run_id} breaks the wire schema: ${problems.map((p) => `${p.path}: ${p.message}`).join("; ")}`,
      problems,
    );
  }
  return parsed.data;
}
