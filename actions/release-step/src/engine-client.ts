/**
 * Signed requests to the engine (preflight, callback). The body is serialised once and the
 * HMAC credential is computed over exactly the bytes sent (credential.ts); with an OIDC
 * audience each try also carries a fresh GitHub Actions OIDC token (`Authorization: Bearer`,
 * `@actions/core` getIDToken; the engine spends each token once). Network errors and 5xx are
 * retried with exponential backoff, bounded in count and in total time; 4xx never is.
 */
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import * as core from "@actions/core";
import { signBody } from "../../../engine/src/protocol/credential.ts";

/**
 * How requests are authenticated: the HMAC secret (empty: none) and the OIDC audience
 * (null: no token). A plain string is an HMAC secret alone.
 */
export interface RunnerCredential {
  secret: string;
  oidcAudience: string | null;
}

/** The credential headers of one try over `bytes`. @throws when no OIDC token can be had. */
async function credentialHeaders(
  c: RunnerCredential,
  bytes: Uint8Array,
): Promise<Record<string, string>> {
  const headers: Record<string, string> = c.secret ? signBody(c.secret, bytes) : {};
  if (c.oidcAudience) {
    let token: string;
    try {
      token = await core.getIDToken(c.oidcAudience);
    } catch (e) {
      throw new Error(
        `cannot get a GitHub OIDC token (give the job \`permissions: id-token: write\`): ${(e as Error).message}`,
      );
    }
    headers.authorization = `Bearer ${token}`;
  }
  return headers;
}

/** Retry bounds: attempts (count) and a total budget in ms. */
export interface RetryPolicy {
  attempts: number;
  totalMs: number;
  /** First backoff delay in ms (doubles, capped at 4 s). */
  baseDelayMs: number;
  /** Per-request deadline in ms. */
  requestTimeoutMs: number;
}

/** Defaults; env BATON_HTTP_ATTEMPTS / BATON_HTTP_BUDGET_MS override (tests, slow networks). */
export function retryPolicy(env: NodeJS.ProcessEnv): RetryPolicy {
  const n = (v: string | undefined, d: number) =>
    Number.isFinite(Number(v)) && Number(v) > 0 ? Number(v) : d;
  return {
    attempts: n(env.BATON_HTTP_ATTEMPTS, 6),
    totalMs: n(env.BATON_HTTP_BUDGET_MS, 60_000),
    baseDelayMs: n(env.BATON_HTTP_BASE_DELAY_MS, 250),
    requestTimeoutMs: 15_000,
  };
}

/** Final answer after retries. `status` 0 = no HTTP answer (network error on every attempt). */
export interface EngineResponse {
  status: number;
  text: string;
  attempts: number;
  error?: string;
}

/**
 * POSTs `body` (already serialised) to `url` with `credential` (an HMAC secret, or secret and
 * OIDC audience; each try gets fresh credential headers). Never throws; `log` gets one line
 * per retry.
 */
export async function postSigned(
  url: string,
  body: string,
  credential: string | RunnerCredential,
  policy: RetryPolicy,
  log: (line: string) => void,
): Promise<EngineResponse> {
  const cred =
    typeof credential === "string" ? { secret: credential, oidcAudience: null } : credential;
  const bytes = Buffer.from(body, "utf8");
  const started = Date.now();
  let last: EngineResponse = { status: 0, text: "", attempts: 0 };
  for (let attempt = 1; attempt <= policy.attempts; attempt++) {
    // No try outlasts the total budget: the last one gets what is left of it.
    const timeoutMs = Math.max(
      1,
      Math.min(policy.requestTimeoutMs, policy.totalMs - (Date.now() - started)),
    );
    try {
      const res = await post(
        url,
        { "content-type": "application/json", ...(await credentialHeaders(cred, bytes)) },
        bytes,
        timeoutMs,
      );
      last = { ...res, attempts: attempt };
      if (res.status < 500) return last;
    } catch (e) {
      last = {
        status: 0,
        text: "",
        attempts: attempt,
        error: networkError(e, { requestTimeoutMs: timeoutMs }),
      };
      // A certificate the runner does not trust is not transient: trying again changes nothing.
      if (untrustedCertificate(e)) return last;
    }
    const delay = Math.min(policy.baseDelayMs * 2 ** (attempt - 1), 4_000);
    if (attempt === policy.attempts || Date.now() - started + delay > policy.totalMs) break;
    log(
      `[action] ${url} answered ${last.status || last.error}; retry ${attempt + 1}/${policy.attempts} in ${delay} ms`,
    );
    await new Promise((r) => setTimeout(r, delay));
  }
  return last;
}

/**
 * One POST through node:http or node:https (by the URL's scheme), the answer's status and body
 * as text (for a 3xx, which is not followed, a sentence naming the target and the fix).
 * `timeoutMs` bounds the whole exchange, the body included; past it the request is destroyed
 * with an error named `TimeoutError`. Node's `fetch` would do the same, but it loads
 * undici into every step's fresh process (about 25 ms of CPU per step), and the action makes
 * one or two requests per process. @throws on a network error or the deadline.
 */
function post(
  url: string,
  headers: Record<string, string>,
  body: Buffer,
  timeoutMs: number,
): Promise<{ status: number; text: string }> {
  const target = new URL(url);
  const request = target.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(target, {
      method: "POST",
      headers: { ...headers, "content-length": String(body.length) },
    });
    const deadline = setTimeout(() => {
      const e = new Error(`no answer within ${timeoutMs} ms`);
      e.name = "TimeoutError";
      req.destroy(e);
    }, timeoutMs);
    req.on("error", (e) => {
      clearTimeout(deadline);
      reject(e);
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", (e) => req.destroy(e));
      res.on("end", () => {
        clearTimeout(deadline);
        const status = res.statusCode ?? 0;
        // A redirect is not followed: the signed body goes only where engine-url says.
        const text =
          status >= 300 && status < 400
            ? `a redirect to ${res.headers.location ?? "(no Location)"}: the action does not follow redirects with a signed body; set the engine-url input to the URL the engine answers at`
            : Buffer.concat(chunks).toString("utf8");
        resolve({ status, text });
      });
    });
    req.end(body);
  });
}

/** OpenSSL's codes for a server certificate this process does not trust or accept. */
const CERTIFICATE_CODES = new Set([
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);

function untrustedCertificate(e: unknown): boolean {
  return CERTIFICATE_CODES.has((e as { code?: string })?.code ?? "");
}

/**
 * One line for a failed request, with the cause chain spelled out (e.g. `connect ECONNREFUSED
 * 127.0.0.1:9`; an error that wraps its cause, as `fetch failed` does, lists each), and a
 * deadline says which one.
 */
export function networkError(e: unknown, policy?: Pick<RetryPolicy, "requestTimeoutMs">): string {
  const err = e as Error & { code?: string; cause?: unknown };
  if (err?.name === "TimeoutError" || err?.name === "AbortError")
    return `no answer within ${policy?.requestTimeoutMs ?? "?"} ms (request timeout)`;
  if (untrustedCertificate(e))
    return `${err.message} (${err.code}): the runner does not trust the engine's TLS certificate; serve the engine with a certificate from a public CA, or give the runner its CA in NODE_EXTRA_CA_CERTS (a file of PEM certificates, set in the job's env)`;
  const parts: string[] = [err?.message ?? String(e)];
  let cause = err?.cause as (Error & { code?: string; cause?: unknown }) | undefined;
  for (let i = 0; cause && i < 4; i++) {
    const text = cause.message || String(cause);
    parts.push(cause.code && !text.includes(cause.code) ? `${text} (${cause.code})` : text);
    cause = cause.cause as typeof cause;
  }
  return parts.join(": ");
}

/** The engine's error message from an error body `{"error":{"message"}}`, else the raw text. */
/** The `error.code` of an engine error body, or "" when there is none. */
export function errorCode(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { code?: string } };
    return typeof parsed.error?.code === "string" ? parsed.error.code : "";
  } catch {
    return "";
  }
}

export function errorMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { error?: { message?: string; code?: string } };
    if (parsed.error?.message) return parsed.error.message;
  } catch {}
  return text.slice(0, 500) || "(empty body)";
}
