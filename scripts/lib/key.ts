/**
 * SSH private key text handling shared by the action and the tools (no ssh2 import, so the
 * action bundle stays small): normalisation (F10) and detecting an encrypted key (F09).
 */

/**
 * Normalises a pasted key: CRLF/CR -> LF, each line trimmed, blank lines around it dropped,
 * exactly one trailing newline. Throws `Error("[action] …")` when nothing is left.
 */
export function normaliseKey(raw: string): string {
  const lines = raw
    .replace(/\r\n?/g, "\n")
    .split("\n")
    .map((l) => l.trim());
  while (lines.length > 0 && lines[0] === "") lines.shift();
  while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  if (lines.length === 0)
    throw new Error("[action] input ssh-key is empty; set it to the private key text");
  return `${lines.join("\n")}\n`;
}

/** What kind of private key the text is, and whether it is protected by a passphrase. */
export interface KeyInfo {
  format: "openssh" | "pem" | "pkcs8" | "unknown";
  encrypted: boolean;
}

/**
 * Reads the key's armour without decrypting it. OpenSSH format: the `openssh-key-v1\0` blob's
 * cipher name is not `none` (OpenSSH PROTOCOL.key). PEM: a `Proc-Type: 4,ENCRYPTED` header
 * (RFC 1421) or PKCS#8 `BEGIN ENCRYPTED PRIVATE KEY` (RFC 5958).
 */
export function inspectKey(key: string): KeyInfo {
  const openssh =
    /-----BEGIN OPENSSH PRIVATE KEY-----\n([\s\S]*?)-----END OPENSSH PRIVATE KEY-----/.exec(key);
  if (openssh) {
    const blob = Buffer.from((openssh[1] ?? "").replace(/\s+/g, ""), "base64");
    const magic = "openssh-key-v1\0";
    if (blob.subarray(0, magic.length).toString("latin1") !== magic)
      return { format: "unknown", encrypted: false };
    const len = blob.readUInt32BE(magic.length);
    const cipher = blob.subarray(magic.length + 4, magic.length + 4 + len).toString("latin1");
    return { format: "openssh", encrypted: cipher !== "none" };
  }
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----/.test(key))
    return { format: "pkcs8", encrypted: true };
  if (/-----BEGIN PRIVATE KEY-----/.test(key)) return { format: "pkcs8", encrypted: false };
  if (/-----BEGIN (RSA|EC|DSA) PRIVATE KEY-----/.test(key)) {
    return { format: "pem", encrypted: /^Proc-Type:\s*4,ENCRYPTED/m.test(key) };
  }
  return { format: "unknown", encrypted: false };
}
