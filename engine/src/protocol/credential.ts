/**
 * The HMAC credential of preflight and callback requests (docs/engine.md "Authentication").
 *
 * signature = hex(HMAC-SHA256(secret, `${timestamp}.` + rawBody)), sent as
 * `x-baton-signature: sha256=<hex>` with `x-baton-timestamp: <unix seconds>`.
 * Verified over the raw bytes before parsing, in constant time, against every secret in a
 * rotation list (octokit/webhooks-methods `verify` shape: length guard, then a constant-time
 * compare). Portable: no `node:` import (HMAC from protocol/sha256.ts).
 */
import { constantTimeEqual, hmacSha256Hex } from "./sha256.ts";

export const SIGNATURE_HEADER = "x-baton-signature";
export const TIMESTAMP_HEADER = "x-baton-timestamp";
/** Default replay window: a credential older or newer than this (ms) is refused. */
export const DEFAULT_REPLAY_WINDOW_MS = 5 * 60 * 1000;

function mac(secret: string, timestamp: string, body: string | Uint8Array): string {
  return hmacSha256Hex(secret, `${timestamp}.`, body);
}

/**
 * Headers that authenticate `body` (exact bytes that will be sent).
 * @param nowMs epoch ms used for the timestamp.
 */
export function signBody(
  secret: string,
  body: string | Uint8Array,
  nowMs: number = Date.now(),
): Record<string, string> {
  const timestamp = String(Math.floor(nowMs / 1000));
  return {
    [SIGNATURE_HEADER]: `sha256=${mac(secret, timestamp, body)}`,
    [TIMESTAMP_HEADER]: timestamp,
  };
}

export type VerifyResult =
  | { ok: true }
  | { ok: false; reason: "missing" | "malformed" | "expired" | "mismatch" };

/**
 * Verifies a signed raw body against any of `secrets` (rotation list, at least one).
 * Never throws; the reason is for logs only — callers answer one identical 401 body.
 */
export function verifyBody(
  secrets: readonly string[],
  body: Uint8Array,
  signature: string | null | undefined,
  timestamp: string | null | undefined,
  nowMs: number = Date.now(),
  windowMs: number = DEFAULT_REPLAY_WINDOW_MS,
): VerifyResult {
  if (!signature || !timestamp) return { ok: false, reason: "missing" };
  if (!/^[0-9]{1,12}$/.test(timestamp) || !/^sha256=[0-9a-f]{64}$/.test(signature)) {
    return { ok: false, reason: "malformed" };
  }
  if (Math.abs(nowMs - Number(timestamp) * 1000) > windowMs)
    return { ok: false, reason: "expired" };
  const given = signature.slice("sha256=".length);
  let matched = false;
  for (const secret of secrets) {
    // Compare against every secret (no early exit) so timing does not reveal which one matched.
    if (constantTimeEqual(mac(secret, timestamp, body), given)) matched = true;
  }
  return matched ? { ok: true } : { ok: false, reason: "mismatch" };
}
