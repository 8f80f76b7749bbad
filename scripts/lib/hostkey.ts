/**
 * Host-key pins: OpenSSH's `SHA256:<base64>` fingerprint (optionally prefixed by the key type,
 * e.g. `ssh-ed25519 SHA256:…`) or a known_hosts line (`host ssh-ed25519 AAAA… [comment]`).
 * Fingerprint form as `ssh-keygen -l -E sha256` prints it: "SHA256:" + base64(sha256(key blob))
 * without `=` padding (OpenSSH sshkey.c, sshkey_fingerprint_raw/fingerprint_b64).
 */
import { createHash } from "node:crypto";

/** A parsed pin. `keyType` is known for known_hosts lines and type-prefixed fingerprints. */
export interface HostKeyPin {
  fingerprint: string;
  keyType?: string;
}

const KEY_TYPES = new Set([
  "ssh-ed25519",
  "ssh-rsa",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
]);

/** `SHA256:<unpadded base64>` of a raw host key blob (the bytes the server sends). */
export function fingerprintOf(blob: Uint8Array): string {
  return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;
}

/**
 * Parses a pin. Throws `Error("[ssh] …")` naming the problem and the fix when the pin is
 * neither form (e.g. empty, a hostname only, a `@cert-authority`/`@revoked` line).
 */
export function parseHostKeyPin(pin: string): HostKeyPin {
  const text = pin.trim();
  const fix =
    "use `ssh-keygen -l -E sha256 -f <host key>.pub` (SHA256:…) or a line of `ssh-keyscan <host>`";
  if (!text) throw new Error(`[ssh] host_key is empty; ${fix}`);
  if (text.startsWith("@"))
    throw new Error(`[ssh] host_key markers (@cert-authority, @revoked) are not supported; ${fix}`);
  const tokens = text.split(/\s+/);
  const fp = tokens.find((t) => /^SHA256:[A-Za-z0-9+/]{43}$/.test(t));
  if (fp) {
    const typed = tokens.length === 2 && KEY_TYPES.has(tokens[0] ?? "") && tokens[1] === fp;
    if (tokens.length !== 1 && !typed)
      throw new Error(`[ssh] host_key '${text}' is not a fingerprint pin; ${fix}`);
    return typed ? { fingerprint: fp, keyType: tokens[0] } : { fingerprint: fp };
  }
  const at = tokens.findIndex((t) => KEY_TYPES.has(t));
  const b64 = at >= 0 ? tokens[at + 1] : undefined;
  if (at < 0 || !b64 || !/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) {
    throw new Error(
      `[ssh] host_key is neither a SHA256: fingerprint nor a known_hosts line; ${fix}`,
    );
  }
  const blob = Buffer.from(b64, "base64");
  // The blob starts with its own type string (RFC 4253 §6.6); it must agree with the line.
  const len = blob.length >= 4 ? blob.readUInt32BE(0) : 0;
  if (blob.subarray(4, 4 + len).toString("latin1") !== tokens[at]) {
    throw new Error(
      `[ssh] host_key line says ${tokens[at]} but its key data is another type; ${fix}`,
    );
  }
  return { fingerprint: fingerprintOf(blob), keyType: tokens[at] };
}

/** ssh2 `algorithms.serverHostKey` list for a pinned key type (undefined = library default). */
export function hostKeyAlgorithms(keyType: string | undefined): string[] | undefined {
  if (!keyType) return undefined;
  if (keyType === "ssh-rsa") return ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"];
  return [keyType];
}
