/**
 * Who is looking at the dashboard, and CSRF tokens for its forms.
 *
 * A person signs in by pasting a token on `/login`; it is kept in an HttpOnly, SameSite=Strict
 * cookie. Scripts may send `Authorization: Bearer <token>` instead. The operator token may
 * act; the viewer token only reads. With no token configured at all, pages are readable by
 * anyone and every action is refused (there is nobody who may act).
 *
 * CSRF: each form carries HMAC-SHA256(key = the caller's token, "baton-csrf:<action>:<target>"),
 * so a page on another site cannot forge it without the token; POSTs whose `Origin` is another
 * site are refused too.
 */
import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import { constantTimeEqual, hmacSha256Hex, sha256Hex } from "../../protocol/sha256.ts";

export const TOKEN_COOKIE = "baton_token";

/** Tokens the dashboard accepts; either may be absent. */
export interface DashboardTokens {
  operator?: string;
  viewer?: string;
}

export type Role = "operator" | "viewer" | "anonymous" | "none";

/** The caller: `anonymous` = no tokens configured (open reads), `none` = not signed in. */
export interface Caller {
  role: Role;
  token: string | null;
}

/** Constant-time equality over sha256 digests (equal lengths, so no length leaks). */
function same(a: string, b: string): boolean {
  return constantTimeEqual(sha256Hex(a), sha256Hex(b));
}

/** Reads the caller's token (Bearer header first, then the cookie) and maps it to a role. */
export function caller(c: Context, tokens: DashboardTokens): Caller {
  const header = c.req.header("authorization");
  const bearer = header?.startsWith("Bearer ") ? header.slice(7).trim() : undefined;
  const token = bearer || getCookie(c, TOKEN_COOKIE) || null;
  return { role: roleOf(token, tokens), token };
}

/** Role of a token: operator, viewer, anonymous (no tokens configured) or none. */
export function roleOf(token: string | null, tokens: DashboardTokens): Role {
  if (token && tokens.operator && same(token, tokens.operator)) return "operator";
  if (token && tokens.viewer && same(token, tokens.viewer)) return "viewer";
  if (!tokens.operator && !tokens.viewer) return "anonymous";
  return "none";
}

/** The CSRF token for `action` on `target`, bound to the caller's token; "" without a token. */
export function csrfToken(token: string | null, action: string, target: string): string {
  if (!token) return "";
  return hmacSha256Hex(token, `baton-csrf:${action}:${target}`);
}

/** Whether `sent` is the CSRF token for this caller, action and target (constant time). */
export function csrfValid(
  token: string | null,
  action: string,
  target: string,
  sent: unknown,
): boolean {
  if (!token || typeof sent !== "string" || sent.length === 0) return false;
  return same(csrfToken(token, action, target), sent);
}

/**
 * Whether a POST comes from this site: no `Origin` header (same-origin form posts in old
 * browsers, scripts) or an `Origin` equal to the request's own origin or the public URL's.
 */
export function sameOrigin(c: Context, publicUrl: string): boolean {
  const origin = c.req.header("origin");
  if (!origin || origin === "null") return origin !== "null";
  const own = new URL(c.req.url).origin;
  let pub = "";
  try {
    pub = new URL(publicUrl).origin;
  } catch {
    // A malformed public URL only narrows what is accepted.
  }
  return origin === own || origin === pub;
}
