/**
 * Bearer-token checks of the operator and read routes (docs/engine.md "Authentication").
 * Tokens are compared in constant time over their sha256 digests (equal lengths by
 * construction, so the compare never leaks a length).
 */
import type { MiddlewareHandler } from "hono";
import { BatonError } from "../domain/errors.ts";
import { constantTimeEqual, sha256Hex } from "../protocol/sha256.ts";

/** True when `given` equals one of `tokens` (every token is compared: no early exit). */
export function tokenMatches(given: string, tokens: readonly string[]): boolean {
  const g = sha256Hex(given);
  let ok = false;
  for (const t of tokens) if (constantTimeEqual(g, sha256Hex(t))) ok = true;
  return ok;
}

function bearer(header: string | undefined): string | null {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return m?.[1] ?? null;
}

/** The operator action a path names (`abort`, `resume`, `retry`, `tick`), else `METHOD path`. */
function actionOf(method: string, path: string): string {
  return /\/(abort|resume|retry|tick)$/.exec(path)?.[1] ?? `${method} ${path}`;
}

/**
 * Middleware: the request must carry `Authorization: Bearer <one of tokens>`.
 * @param role what the token is for, named in the 401 message.
 * @param readOnly tokens that are known but only read (the viewer token): they get a 403
 *   saying so instead of the 401 of an unknown token.
 * @throws BatonError `unauthorized` (401) for a missing or unknown token; `forbidden` (403)
 *   for a read-only token on this route.
 */
export function requireBearer(
  tokens: readonly string[],
  role: string,
  readOnly: readonly string[] = [],
): MiddlewareHandler {
  const list = tokens.filter((t) => t.length > 0);
  const viewers = readOnly.filter((t) => t.length > 0 && !list.includes(t));
  return async (c, next) => {
    const given = bearer(c.req.header("authorization"));
    if (given && !tokenMatches(given, list) && tokenMatches(given, viewers)) {
      throw new BatonError(
        "forbidden",
        `[engine] the viewer token only reads; ${actionOf(c.req.method, c.req.path)} needs the operator token (BATON_OPERATOR_TOKEN)`,
      );
    }
    if (!given || !tokenMatches(given, list)) {
      const hint =
        role === "operator" ? " (BATON_OPERATOR_TOKEN; the viewer token only reads)" : "";
      throw new BatonError(
        "unauthorized",
        `[engine] missing or wrong bearer token: send Authorization: Bearer <${role} token>${hint}`,
      );
    }
    await next();
  };
}

/** A person's own operator token, as BATON_OPERATORS names it. */
export interface NamedToken {
  name: string;
  token: string;
}

/**
 * The name of the person whose token the request carries (`Authorization: Bearer …`), or
 * null for any other token (the shared operator token) or none. Compared in constant time.
 */
export function personOf(
  authorization: string | undefined,
  people: readonly NamedToken[],
): string | null {
  const given = bearer(authorization);
  if (!given) return null;
  let found: string | null = null;
  for (const p of people) if (tokenMatches(given, [p.token])) found = p.name;
  return found;
}

/** One identical 401 body for every bad credential (forged, expired, missing, malformed). */
export const BAD_CREDENTIAL_MESSAGE =
  "[engine] bad credential: sign the exact request body with the callback secret (x-baton-signature, x-baton-timestamp within 5 minutes)";

/** The OIDC half of the bad-credential message. */
const BAD_OIDC =
  "send Authorization: Bearer <GitHub Actions OIDC token> for this engine's audience, fresh for each request, from the workflow run dispatched for this step run";

/**
 * The one 401 message of a runner credential mode (docs/runner.md): the same text for every
 * reason, so an answer never tells which check failed.
 */
export function badCredentialMessage(mode: "hmac" | "oidc" | "hmac+oidc"): string {
  if (mode === "hmac") return BAD_CREDENTIAL_MESSAGE;
  if (mode === "oidc") return `[engine] bad credential: ${BAD_OIDC}`;
  return `${BAD_CREDENTIAL_MESSAGE}, and ${BAD_OIDC}`;
}
