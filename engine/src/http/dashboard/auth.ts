/**
 * Who is looking at the dashboard: sign-in sessions and CSRF tokens for its forms.
 *
 * A person signs in by pasting a token on `/login`: their own (BATON_OPERATORS names it: they
 * act as operator, and every action is recorded as theirs, `operator:<name>`), or the shared
 * operator or viewer token. The cookie does not hold that token: it holds a session, a JWT
 * (HS256, `jose`) carrying the role, the person (`sub`, for a person's own token), a random
 * session id and an expiry (`SESSION_TTL_S`), signed with a key derived from the token it was
 * issued for (HMAC-SHA256 of "baton-session-v1" under the token). So every engine that holds
 * the same tokens accepts it, a changed token ends every session signed under the old one, a
 * session names only the person whose token signed it, and nothing in the cookie gives the
 * token away. The cookie is HttpOnly, SameSite=Strict, Path=/, Secure when the
 * public URL is https, and lives as long as the session. Signing out revokes the session id on
 * this engine (kept until the session would have expired) and clears the cookie.
 *
 * Scripts may send `Authorization: Bearer <token>` instead. The operator token and a person's
 * own token may act; the viewer token only reads. With no token configured at all, pages are readable by anyone and
 * every action is refused (there is nobody who may act).
 *
 * CSRF: each form carries `<expiry>.<HMAC-SHA256(session key, session id, action, target,
 * expiry)>`: bound to this session (a bearer caller's "session" is its token), to one action
 * on one target, and valid until the session ends (a bearer caller's for `CSRF_BEARER_TTL_S`).
 * A page on another site cannot forge it; POSTs whose `Origin` is another site are refused too.
 */

import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha2";
import { utf8ToBytes } from "@noble/hashes/utils";
import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import { jwtVerify, SignJWT } from "jose";
import { constantTimeEqual, hmacSha256Hex, sha256Hex } from "../../protocol/sha256.ts";
import type { NamedToken } from "../auth.ts";

/** Name of the session cookie. */
export const SESSION_COOKIE = "baton_session";
/** How long a sign-in lasts (seconds): 8 hours, then sign in again. */
export const SESSION_TTL_S = 8 * 3600;
/** How long a form's CSRF token lasts for a bearer caller, who has no session (seconds). */
export const CSRF_BEARER_TTL_S = 3600;
/** At most this many revoked sessions are remembered (the oldest-expiring go first). */
const MAX_REVOKED = 100_000;

/** Tokens the dashboard accepts; any may be absent. */
export interface DashboardTokens {
  operator?: string;
  viewer?: string;
  /** People's own operator tokens (BATON_OPERATORS): a sign-in with one acts as that person. */
  people?: readonly NamedToken[];
}

export type Role = "operator" | "viewer" | "anonymous" | "none";

/**
 * The caller: `anonymous` = no tokens configured (open reads), `none` = not signed in.
 * `session` is the signed-in session (id and expiry, epoch seconds), or a bearer caller's
 * stand-in (`sid` "bearer:<sha256 of the token>"); null when there is neither. `person` is
 * the name of the person whose own token signed in (or is the bearer), else null.
 */
export interface Caller {
  role: Role;
  session: { sid: string; exp: number } | null;
  person: string | null;
}

/** Who a token is: its role and, for a person's own token, the person's name. */
export interface Identity {
  role: Role;
  person: string | null;
}

/** Constant-time equality over sha256 digests (equal lengths, so no length leaks). */
function same(a: string, b: string): boolean {
  return constantTimeEqual(sha256Hex(a), sha256Hex(b));
}

/** Whether no token at all is configured (pages are open to read, nobody may act). */
export function noTokens(tokens: DashboardTokens): boolean {
  return !tokens.operator && !tokens.viewer && (tokens.people ?? []).length === 0;
}

/**
 * Who a token is: a person's own token is that person acting as operator; the shared operator
 * or viewer token is its role with no person; anonymous when no tokens are configured; none
 * for anything else. Every configured token is compared (constant time, no early exit).
 */
export function identityOf(token: string | null, tokens: DashboardTokens): Identity {
  let found: Identity | null = null;
  if (token) {
    for (const p of tokens.people ?? [])
      if (same(token, p.token)) found = { role: "operator", person: p.name };
    if (tokens.viewer && same(token, tokens.viewer)) found ??= { role: "viewer", person: null };
    if (tokens.operator && same(token, tokens.operator))
      found = found?.person ? found : { role: "operator", person: null };
  }
  if (found) return found;
  return { role: noTokens(tokens) ? "anonymous" : "none", person: null };
}

/** Role of a token: operator, viewer, anonymous (no tokens configured) or none. */
export function roleOf(token: string | null, tokens: DashboardTokens): Role {
  return identityOf(token, tokens).role;
}

/** The session-signing key of a role's token (32 bytes). */
function keyOf(token: string): Uint8Array {
  return hmac(sha256, utf8ToBytes(token), utf8ToBytes("baton-session-v1"));
}

/**
 * Sessions of one engine process: issues and verifies session cookies, remembers revoked
 * session ids, and mints and checks CSRF tokens. `now` is epoch ms.
 */
export class Sessions {
  private readonly revoked = new Map<string, number>();

  constructor(
    private readonly tokens: DashboardTokens,
    private readonly now: () => number = Date.now,
  ) {}

  private seconds(): number {
    return Math.floor(this.now() / 1000);
  }

  /** The token an identity signs its sessions and forms with (undefined: none configured). */
  private tokenOf(who: Identity): string | undefined {
    if (who.person !== null)
      return (this.tokens.people ?? []).find((p) => p.name === who.person)?.token;
    return who.role === "operator"
      ? this.tokens.operator
      : who.role === "viewer"
        ? this.tokens.viewer
        : undefined;
  }

  /** Every identity that may hold a session, with the token that signs it. */
  private identities(): { who: Identity; token: string }[] {
    const out: { who: Identity; token: string }[] = [];
    for (const p of this.tokens.people ?? [])
      out.push({ who: { role: "operator", person: p.name }, token: p.token });
    if (this.tokens.operator)
      out.push({ who: { role: "operator", person: null }, token: this.tokens.operator });
    if (this.tokens.viewer)
      out.push({ who: { role: "viewer", person: null }, token: this.tokens.viewer });
    return out;
  }

  /**
   * A new session for `who` (operator or viewer; a person signs in as operator): the cookie
   * value and its lifetime (s). @throws Error when no token is configured for `who`.
   */
  async issue(who: Identity): Promise<{ value: string; maxAge: number }> {
    const token = this.tokenOf(who);
    if (!token || (who.role !== "operator" && who.role !== "viewer"))
      throw new Error(`[dashboard] no ${who.person ?? who.role} token is configured`);
    const iat = this.seconds();
    const sid = crypto.randomUUID();
    const jwt = new SignJWT({ role: who.role })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setJti(sid)
      .setIssuedAt(iat)
      .setExpirationTime(iat + SESSION_TTL_S)
      .setAudience("baton-dashboard");
    if (who.person !== null) jwt.setSubject(who.person);
    return { value: await jwt.sign(keyOf(token)), maxAge: SESSION_TTL_S };
  }

  /** The session a cookie value stands for, or null (bad signature, expired, revoked). */
  async verify(value: string | undefined): Promise<Caller | null> {
    if (!value || value.length > 4096) return null;
    for (const { who, token } of this.identities()) {
      try {
        const { payload } = await jwtVerify(value, keyOf(token), {
          algorithms: ["HS256"],
          audience: "baton-dashboard",
          currentDate: new Date(this.now()),
          requiredClaims: ["jti", "exp", "iat"],
        });
        // The key says whose session it is: the claims must agree with it.
        if (payload.role !== who.role || typeof payload.jti !== "string") return null;
        if ((payload.sub ?? null) !== who.person) return null;
        if (this.revoked.has(payload.jti)) return null;
        return { ...who, session: { sid: payload.jti, exp: payload.exp as number } };
      } catch {
        // Not signed under this identity's key (or expired): try the next one.
      }
    }
    return null;
  }

  /** Ends a session on this engine: its id is refused from now until it would have expired. */
  revoke(session: { sid: string; exp: number }): void {
    const now = this.seconds();
    for (const [sid, exp] of this.revoked) if (exp <= now) this.revoked.delete(sid);
    if (this.revoked.size >= MAX_REVOKED) {
      const first = this.revoked.keys().next().value;
      if (first !== undefined) this.revoked.delete(first);
    }
    this.revoked.set(session.sid, session.exp);
  }

  /** Reads the caller (Bearer header first, then the session cookie) and maps it to a role. */
  async caller(c: Context): Promise<Caller> {
    const header = c.req.header("authorization");
    const bearer = header?.startsWith("Bearer ") ? header.slice(7).trim() : undefined;
    if (bearer) {
      const who = identityOf(bearer, this.tokens);
      if (who.role === "operator" || who.role === "viewer") {
        return {
          ...who,
          session: { sid: `bearer:${sha256Hex(bearer)}`, exp: this.seconds() + CSRF_BEARER_TTL_S },
        };
      }
      return { ...who, session: null };
    }
    const signedIn = await this.verify(getCookie(c, SESSION_COOKIE));
    if (signedIn) return signedIn;
    return { ...identityOf(null, this.tokens), session: null };
  }

  private csrfMac(who: Caller, action: string, target: string, exp: number): string {
    const token = this.tokenOf(who);
    if (!token || !who.session) return "";
    return hmacSha256Hex(
      keyOf(token),
      `baton-csrf\n${who.session.sid}\n${action}\n${target}\n${exp}`,
    );
  }

  /** The CSRF token for `action` on `target` for this caller; "" without a session. */
  csrfToken(who: Caller, action: string, target: string): string {
    if (!who.session) return "";
    const exp = who.session.exp;
    return `${exp}.${this.csrfMac(who, action, target, exp)}`;
  }

  /** Whether `sent` is a live CSRF token for this caller, action and target (constant time). */
  csrfValid(who: Caller, action: string, target: string, sent: unknown): boolean {
    if (!who.session || typeof sent !== "string" || sent.length > 200) return false;
    const m = /^([0-9]{1,12})\.([0-9a-f]{64})$/.exec(sent);
    if (!m) return false;
    const exp = Number(m[1]);
    if (exp <= this.seconds()) return false;
    // A bearer caller's tokens may outlive this request's stand-in expiry, never the hour.
    if (exp > this.seconds() + SESSION_TTL_S) return false;
    return same(this.csrfMac(who, action, target, exp), m[2] ?? "");
  }
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
