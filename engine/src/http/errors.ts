/**
 * Error answers of the HTTP API, mapped in one place (hono `onError`).
 * Body: `{"error": {"code", "message", "problems"?: [{path, message, fix}]}}`.
 * `BatonError` → its status (400 / 401 / 403 / 404 / 409 / 413 / 415 / 422); anything else → 500, logged,
 * with no internals in the body.
 */
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ZodError } from "zod";
import { BatonError, type Problem } from "../domain/errors.ts";
import { plainZodMessage } from "../protocol/zod-words.ts";

export interface ErrorBody {
  error: { code: string; message: string; problems?: Problem[] };
}

/** The JSON error body. */
export function errorBody(code: string, message: string, problems?: Problem[]): ErrorBody {
  return { error: { code, message, ...(problems && problems.length > 0 ? { problems } : {}) } };
}

/** Answers `status` with the error body. */
export function errorResponse(
  c: Context,
  status: ContentfulStatusCode,
  code: string,
  message: string,
  problems?: Problem[],
): Response {
  return c.json(errorBody(code, message, problems), status);
}

/**
 * Turns zod issues into problems with dotted paths under `prefix` (e.g. `body`, `query`),
 * in plain words: zod's own texts ("Invalid input: expected object, received array",
 * "Unrecognized key") are rewritten to say what the field must be.
 * @param fixes what to do, by field (`limit`, `by`; `""` for the whole body/query), when the
 *   schema's message does not say it; a string is the fix of every field.
 * @param fields the fields the object takes, named in the fix of an unknown field.
 */
export function zodProblems(
  err: ZodError,
  prefix: string,
  fixes: string | Readonly<Record<string, string>> = {},
  fields: readonly string[] = [],
): Problem[] {
  return err.issues.map((i) => {
    const field = i.path.map(String).join(".");
    const path = [prefix, field].filter(Boolean).join(".");
    const given = typeof fixes === "string" ? fixes : fixes[field];
    if (i.code === "unrecognized_keys") {
      const keys = i.keys.map((k) => JSON.stringify(k)).join(", ");
      return {
        path,
        message: `has the unknown field${i.keys.length > 1 ? "s" : ""} ${keys}`,
        fix:
          given ??
          `remove ${keys}${fields.length > 0 ? `; ${prefix || "it"} takes only ${fields.join(", ")}` : ""}`,
      };
    }
    const message = plainZodMessage(i.message);
    const what = path || prefix;
    // A refinement may carry its own fix (`params.fix`).
    const own = i.code === "custom" && typeof i.params?.fix === "string" ? i.params.fix : undefined;
    return { path, message, fix: given ?? own ?? fixOf(what, message) };
  });
}

/** What to do about `what`, from its plain message: `add x`, `set x to 0 or more`. */
function fixOf(what: string, message: string): string {
  if (message.startsWith("is missing")) return `add ${what}`;
  const most = /^must be at most (\d+ \w+)$/.exec(message);
  if (most) return `shorten ${what} to at most ${most[1]}`;
  const least = /^must have at least (.*)$/.exec(message);
  if (least) return `give ${what} at least ${least[1]}`;
  const pattern = /^must match the pattern (.*)$/.exec(message);
  if (pattern) return `change ${what} to match ${pattern[1]}`;
  const be = /^must be (.*?)(?:, not .*)?$/.exec(message);
  if (be) return `set ${what} to ${be[1]}`;
  return `change ${what} (${message})`;
}

/** A 400 BatonError naming every bad field. */
export function badRequest(what: string, problems: Problem[]): BatonError {
  const first = problems[0];
  const detail = first ? `: ${first.path}: ${first.message}` : "";
  return new BatonError("bad_request", `[engine] bad ${what}${detail}`, problems);
}

/**
 * True when the client closed its connection before the request was read to the end: the
 * request's signal is aborted (the Node server aborts it when the socket closes) and the error
 * is that aborted body read (`ECONNRESET` "aborted", or an `AbortError`). Nobody is left to
 * answer, and it is no failure of the engine or the store.
 */
export function clientClosed(err: unknown, c: Context): boolean {
  if (!c.req.raw.signal?.aborted) return false;
  const e = err as { code?: unknown; name?: unknown; message?: unknown } | null;
  return e?.code === "ECONNRESET" || e?.name === "AbortError" || e?.message === "aborted";
}

/** The app's `onError`. A request its client abandoned is one `info` line, not an error. */
export function onError(log: {
  error(msg: string, err?: unknown): void;
  info?(msg: string): void;
}) {
  return (err: Error, c: Context): Response => {
    if (clientClosed(err, c)) {
      const say = log.info ?? console.info;
      say(
        `[engine] ${c.req.method} ${c.req.path}: the client closed the connection before its request was read; nothing was changed`,
      );
      // Nobody reads this answer; 400 keeps it out of the 5xx figures.
      c.header("Connection", "close");
      return errorResponse(c, 400, "client_closed", "[engine] the client closed the connection");
    }
    if (err instanceof BatonError || (err instanceof HTTPException && err.status === 413)) {
      // The rest of an oversize body is never read: close the connection rather than take
      // it for the next request (the client sees the 413, then the close). The same for a
      // compressed body refused unread (415).
      if (err.status === 413 || err.status === 415) c.header("Connection", "close");
    }
    if (err instanceof BatonError) {
      return errorResponse(c, err.status, err.code, err.message, err.problems);
    }
    if (err instanceof HTTPException && err.status === 413) {
      return errorResponse(c, 413, "payload_too_large", "[engine] request body too large");
    }
    if (err instanceof HTTPException && err.status < 500) {
      return errorResponse(c, err.status, "bad_request", `[engine] ${err.message}`);
    }
    if (storeUnavailable(err)) {
      c.header("Retry-After", "5");
      return errorResponse(
        c,
        503,
        "unavailable",
        "[engine] the store does not answer (database down, full or closed); nothing was changed; retry in a few seconds",
      );
    }
    log.error(`[engine] ${c.req.method} ${c.req.path} failed`, err);
    return errorResponse(
      c,
      500,
      "internal",
      "[engine] internal error; the engine log has the details",
    );
  };
}

/** Driver error codes meaning "the database is not there or cannot write now". */
const UNAVAILABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now
  "08000",
  "08001",
  "08003",
  "08006", // connection failures
  "25006", // read_only_sql_transaction (a read-only database or replica)
  "53100", // disk_full
  "53200", // out_of_memory
  "53300", // too_many_connections
  "SQLITE_FULL",
  "SQLITE_IOERR",
  "SQLITE_BUSY",
  "SQLITE_READONLY",
  "SQLITE_CANTOPEN",
]);

/**
 * True when `err` (or a cause of it) says the store is unavailable: a `[store]` error (closed,
 * or a write rolled back) or a driver error of `UNAVAILABLE_CODES`. Answered 503, not 500.
 */
export function storeUnavailable(err: unknown): boolean {
  let e: unknown = err;
  for (let i = 0; i < 5 && e instanceof Error; i++) {
    if (e.message.startsWith("[store]")) return true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && UNAVAILABLE_CODES.has(code)) return true;
    if (
      /Connection terminated|connect ECONNREFUSED|Query read timeout|timeout exceeded when trying to connect/.test(
        e.message,
      )
    ) {
      return true;
    }
    e = e.cause;
  }
  return false;
}
