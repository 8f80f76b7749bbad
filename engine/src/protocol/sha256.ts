/**
 * The one sha256 of the wire (and its HMAC): lowercase hex over UTF-8 bytes. Pure JavaScript
 * (`@noble/hashes`), synchronous, with no `node:` import, so the action, the engine on any
 * runtime (Node, Workers, Lambda) and the reference control plane compute the same bytes.
 */
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha2";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils";

/** sha256 of `data` (a string is taken as UTF-8), as 64 lowercase hex characters. */
export function sha256Hex(data: string | Uint8Array): string {
  return bytesToHex(sha256(typeof data === "string" ? utf8ToBytes(data) : data));
}

/** sha256 of `data` (a string is taken as UTF-8), as 32 raw bytes. */
export function sha256Bytes(data: string | Uint8Array): Uint8Array {
  return sha256(typeof data === "string" ? utf8ToBytes(data) : data);
}

/** HMAC-SHA256 of `data` under `key` (strings taken as UTF-8), as 64 lowercase hex characters. */
export function hmacSha256Hex(key: string | Uint8Array, ...data: (string | Uint8Array)[]): string {
  const h = hmac.create(sha256, typeof key === "string" ? utf8ToBytes(key) : key);
  for (const d of data) h.update(typeof d === "string" ? utf8ToBytes(d) : d);
  return bytesToHex(h.digest());
}

/**
 * Whether two strings are equal, in time that depends only on their lengths (not on where they
 * differ). Strings of different lengths are unequal at once; callers compare fixed-length values
 * (hex digests) or digests of secrets so a length never leaks.
 */
export function constantTimeEqual(a: string, b: string): boolean {
  const x = utf8ToBytes(a);
  const y = utf8ToBytes(b);
  if (x.length !== y.length) return false;
  let diff = 0;
  for (let i = 0; i < x.length; i++) diff |= x[i]! ^ y[i]!;
  return diff === 0;
}
