/**
 * GitHub's documented limits for `POST /repos/{owner}/{repo}/dispatches`, checked locally so
 * an oversize dispatch is refused before it is sent (failure case F01). Shared by the GitHub
 * dispatcher and the test stand-in so both apply the same rule.
 *
 * Source: GitHub REST docs, "Create a repository dispatch event": `event_type` at most 100
 * characters; `client_payload` at most 10 top-level properties; the payload must stay under
 * 64 KB (GitHub answers 422 "client_payload is too large").
 */
import { GITHUB_DISPATCH_LIMITS } from "../../protocol/messages.ts";

/** One broken limit: the field, GitHub-like wording, and what to do about it. */
export interface LimitViolation {
  field: "event_type" | "client_payload";
  /** Wording close to GitHub's 422 message for the same request. */
  githubMessage: string;
  fix: string;
}

/** UTF-8 size in bytes of `client_payload` as it is sent (compact JSON). */
export function clientPayloadBytes(clientPayload: unknown): number {
  return Buffer.byteLength(JSON.stringify(clientPayload) ?? "", "utf8");
}

/**
 * Checks an event type and client payload against GitHub's limits.
 * @returns every violation found (empty when the dispatch may be sent). Never throws.
 */
export function checkDispatchLimits(eventType: unknown, clientPayload: unknown): LimitViolation[] {
  const out: LimitViolation[] = [];
  const L = GITHUB_DISPATCH_LIMITS;
  if (typeof eventType !== "string" || eventType.length === 0) {
    out.push({
      field: "event_type",
      githubMessage: "event_type wasn't supplied.",
      fix: "send a non-empty event_type such as release-step",
    });
  } else if (eventType.length > L.event_type_max_chars) {
    out.push({
      field: "event_type",
      githubMessage: `event_type is too long (maximum is ${L.event_type_max_chars} characters)`,
      fix: `shorten event_type to at most ${L.event_type_max_chars} characters`,
    });
  }
  if (clientPayload === undefined) return out;
  if (clientPayload === null || typeof clientPayload !== "object" || Array.isArray(clientPayload)) {
    out.push({
      field: "client_payload",
      githubMessage: `For 'properties/client_payload', ${JSON.stringify(clientPayload)} is not an object.`,
      fix: "send client_payload as a JSON object",
    });
    return out;
  }
  const keys = Object.keys(clientPayload).length;
  if (keys > L.client_payload_max_top_level_keys) {
    out.push({
      field: "client_payload",
      githubMessage: `No more than ${L.client_payload_max_top_level_keys} properties are allowed; ${keys} were supplied.`,
      fix: "nest extra fields under `args` or `release` (docs/engine.md, Dispatch payloads)",
    });
  }
  const bytes = clientPayloadBytes(clientPayload);
  // "under 64 KB": exactly 65,536 bytes is already too large.
  if (bytes >= L.client_payload_max_bytes) {
    out.push({
      field: "client_payload",
      githubMessage: "client_payload is too large.",
      fix: `keep client_payload under ${L.client_payload_max_bytes} bytes (it is ${bytes}); pass large data by reference, not inline`,
    });
  }
  return out;
}
