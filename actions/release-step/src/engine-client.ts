/**
 * Signed requests to the engine (preflight, callback). The body is serialised once and the
 * HMAC credential is computed over exactly the bytes sent (credential.ts). Network errors and
 * 5xx are retried with exponential backoff, bounded in count and in total time; 4xx never is.
 */
import { signBody } from "../../../engine/src/protocol/credential.ts";

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
 * POSTs `body` (already serialised) to `url`, signed with `secret`. Never throws; `log` gets one
 * line per retry.
 */
export async function postSigned(
  url: string,
  body: string,
  secret: string,
  policy: RetryPolicy,
  log: (line: string) => void,
): Promise<EngineResponse> {
  const bytes = Buffer.from(body, "utf8");
  const started = Date.now();
  let last: EngineResponse = { status: 0, text: "", attempts: 0 };
  for (let attempt = 1; attempt <= policy.attempts; attempt++) {
    try {
      const res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", ...signBody(secret, bytes) },
        body: bytes,
        signal: AbortSignal.timeout(policy.requestTimeoutMs),
      });
      last = { status: res.status, text: await res.text(), attempts: attempt };
      if (res.status < 500) return last;
    } catch (e) {
      last = { status: 0, text: "", attempts: attempt, error: networkError(e, policy) };
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
 * One line for a failed request: undici's "fetch failed" alone says nothing, so the cause
 * chain is spelled out (e.g. `fetch failed: connect ECONNREFUSED 127.0.0.1:9 (ECONNREFUSED)`),
 * and a deadline says which one.
 */
export function networkError(e: unknown, policy?: Pick<RetryPolicy, "requestTimeoutMs">): string {
  const err = e as Error & { code?: string; cause?: unknown };
  if (err?.name === "TimeoutError" || err?.name === "AbortError")
    return `no answer within ${policy?.requestTimeoutMs ?? "?"} ms (request timeout)`;
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
