/**
 * Domain errors carry their HTTP meaning; the Hono app maps them in one `onError`
 * (hono `HTTPException` shape). Messages start with the component and say what to do.
 */
export type ErrorCode =
  | "bad_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "fenced"
  | "stale"
  | "payload_too_large"
  | "unsupported_media_type"
  | "illegal_transition"
  | "contract_failed"
  | "admission_refused"
  | "prerequisite_failed"
  | "superseded"
  | "frozen"
  | "requalification_required"
  | "drill_required"
  | "contract_not_yet"
  | "unavailable";

type Status = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 422 | 503;

const STATUS: Record<ErrorCode, Status> = {
  bad_request: 400,
  unauthorized: 401,
  // A known token that may not do this (the viewer token on an operator route).
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  fenced: 409,
  stale: 409,
  payload_too_large: 413,
  // A body sent compressed (`Content-Encoding` other than identity): the engine reads bodies as sent.
  unsupported_media_type: 415,
  illegal_transition: 422,
  contract_failed: 422,
  // A manifest that failed an admission check (docs/trust.md); problems name the checks.
  admission_refused: 422,
  // A rollback whose prerequisite failed on a lane (docs/lifecycle.md); problems name lane and check.
  prerequisite_failed: 422,
  // A start from a commit older than the newest the model's releases came from (docs/lifecycle.md
  // "Merge order is release order"); the message names the release that stands.
  superseded: 409,
  // A start, first exposure or promote of a model an open incident does not name
  // (docs/incidents.md); the message names the incident and its commander.
  frozen: 409,
  // A start of a model whose mutable dependency changed or whose contract expired since its
  // recipe was qualified (docs/drift.md "Mutable dependencies"); problems name the field and fix.
  requalification_required: 409,
  drill_required: 409,
  contract_not_yet: 409,
  // A dependency the request needs did not answer (e.g. the control plane at release start).
  unavailable: 503,
};

/** One problem found in input, with where it is and how to fix it. */
export interface Problem {
  /** Dotted path into the input, e.g. `lanes.1.host_key`. */
  path: string;
  message: string;
  fix: string;
}

/** An error a caller can act on. `status` is its HTTP status; `problems` lists bad fields. */
export class BatonError extends Error {
  readonly status: Status;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly problems: Problem[] = [],
  ) {
    super(message);
    this.name = "BatonError";
    this.status = STATUS[code];
  }
}
