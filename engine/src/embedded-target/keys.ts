/**
 * Key material of the embedded SSH target: a fresh ed25519 host key and client key per start,
 * in OpenSSH format, plus the host key pin as `ssh-keygen -l -E sha256` prints it.
 */
import { createHash } from "node:crypto";
import ssh2 from "ssh2";

// ssh2 is CommonJS: named ESM imports type-check but fail at run time (TOOLCHAIN.md).
const { utils } = ssh2;

/** An OpenSSH key pair: `privateKey` is the private key file text, `publicKey` the `.pub` line. */
export interface SshKeyPair {
  privateKey: string;
  publicKey: string;
}

/**
 * Generates an ed25519 pair; with `passphrase` the private key is encrypted (aes256-ctr).
 * ssh2 1.17 writes about 1 pair in 256 with a 31-byte key (a leading zero byte dropped) that it
 * then cannot parse ("Malformed OpenSSH private key"); such a pair is generated again.
 * @throws Error if 20 pairs in a row are unusable.
 */
export function generateEd25519(comment: string, passphrase?: string): SshKeyPair {
  for (let i = 0; i < 20; i++) {
    const pair = passphrase
      ? utils.generateKeyPairSync("ed25519", { comment, passphrase, cipher: "aes256-ctr" })
      : utils.generateKeyPairSync("ed25519", { comment });
    const priv = utils.parseKey(pair.private, passphrase);
    const pub = utils.parseKey(pair.public);
    if (!(priv instanceof Error) && !(pub instanceof Error)) {
      return { privateKey: pair.private, publicKey: pair.public };
    }
  }
  throw new Error("[embedded-target] could not generate a usable ed25519 key pair");
}

/**
 * Parses a public key (OpenSSH `.pub` line, or a private key whose public half is wanted).
 * @throws Error naming what could not be parsed.
 */
export function parsePublicKey(text: string, passphrase?: string): ssh2.ParsedKey {
  const parsed = utils.parseKey(text, passphrase);
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  if (!key || key instanceof Error) {
    throw new Error(
      `[embedded-target] cannot parse key: ${key instanceof Error ? key.message : "no key found"}`,
    );
  }
  return key;
}

/**
 * The pin of a public key: `SHA256:` + unpadded base64 of sha256 over the key's SSH wire
 * blob (OpenSSH `ssh-keygen -l -E sha256` format).
 */
export function sha256Fingerprint(publicKeyText: string): string {
  const blob = parsePublicKey(publicKeyText).getPublicSSH();
  return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`;
}
