/**
 * Errors of the reference control plane, each with its HTTP status (hono `HTTPException` shape).
 * Messages start with `[control-plane]` and say what to do. Mapped to the error body
 * `{"error": {"code", "message", "problems"?}}` in one place (`app.ts`).
 */
import type { Problem } from "../domain/errors.ts";

export type CpErrorCode =
  | "bad_request"
  | "not_found"
  | "stale_generation"
  | "lane_model_conflict"
  | "operation_key_reused"
  | "faults_disabled"
  | "unknown_lane";

const STATUS: Record<CpErrorCode, 400 | 404 | 409 | 422> = {
  bad_request: 400,
  not_found: 404,
  stale_generation: 409,
  lane_model_conflict: 409,
  operation_key_reused: 422,
  faults_disabled: 404,
  // A write naming a lane never declared: the control plane never creates a lane on a write.
  unknown_lane: 404,
};

/** A refusal a caller can act on. `status` is the HTTP status; `problems` lists bad fields. */
export class CpError extends Error {
  readonly status: 400 | 404 | 409 | 422;
  constructor(
    readonly code: CpErrorCode,
    message: string,
    readonly problems: Problem[] = [],
  ) {
    super(message);
    this.name = "CpError";
    this.status = STATUS[code];
  }
}
