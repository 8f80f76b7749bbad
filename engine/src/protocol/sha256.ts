/**
 * The one sha256 of the wire: lowercase hex over UTF-8 bytes. Pure JavaScript
 * (`@noble/hashes`), synchronous, with no `node:` import, so the action, the engine on any
 * runtime (Node, Workers, Lambda) and the reference control plane compute the same bytes.
 */
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
