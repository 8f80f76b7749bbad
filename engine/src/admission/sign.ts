/**
 * Signing Statements into Sigstore bundles (DSSE envelope, bundle v0.3): the format GitHub
 * artifact attestations use, built by sigstore-js, never by hand.
 * - key-based (self-hosted): an ECDSA P-256 key; the bundle carries the key hint, verifiers
 *   look the public key up in their trust policy; no transparency log, no timestamp.
 * - keyless (GitHub Actions): `sigstore.attest` with the workflow's OIDC token: Fulcio issues
 *   a short-lived certificate naming the workflow, Rekor or a TSA witnesses the time.
 */
import {
  createPrivateKey,
  generateKeyPairSync,
  type KeyObject,
  sign as nodeSign,
} from "node:crypto";
import { bundleToJSON, type SerializedBundle } from "@sigstore/bundle";
import { DSSEBundleBuilder, type Signer } from "@sigstore/sign";
import { attest, type SignOptions } from "sigstore";
import { IN_TOTO_PAYLOAD_TYPE, manifestStatement, type Statement } from "./statement.ts";

/** A signing key: PEM private key and the hint verifiers find its public key by. */
export interface SigningKey {
  key_id: string;
  private_key_pem: string;
}

/** A fresh ECDSA P-256 key pair as PEM (PKCS#8 private, SPKI public). */
export function generateSigningKey(): { private_key_pem: string; public_key_pem: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return {
    private_key_pem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    public_key_pem: publicKey.export({ type: "spki", format: "pem" }).toString(),
  };
}

/** A sigstore-js `Signer` over a local private key (public key material = the hint). */
class KeySigner implements Signer {
  private readonly key: KeyObject;
  constructor(private readonly k: SigningKey) {
    this.key = createPrivateKey(k.private_key_pem);
  }
  async sign(data: Buffer) {
    const signature = nodeSign("sha256", data, this.key);
    return {
      signature,
      key: { $case: "publicKey" as const, publicKey: "", hint: this.k.key_id },
    };
  }
}

/** Signs a Statement with a local key. @throws Error when the key is not a PEM private key. */
export async function signWithKey(
  statement: Statement,
  key: SigningKey,
): Promise<SerializedBundle> {
  const builder = new DSSEBundleBuilder({ signer: new KeySigner(key), witnesses: [] });
  const bundle = await builder.create({
    data: Buffer.from(JSON.stringify(statement), "utf8"),
    type: IN_TOTO_PAYLOAD_TYPE,
  });
  return bundleToJSON(bundle);
}

/**
 * Signs a Statement keylessly (Fulcio certificate for the OIDC identity). In GitHub Actions
 * with `permissions: id-token: write` the identity comes from the runner; `options` can
 * point at another Fulcio / Rekor / TSA (tests use a loopback mock).
 */
export async function signKeyless(
  statement: Statement,
  options: SignOptions = {},
): Promise<SerializedBundle> {
  return attest(Buffer.from(JSON.stringify(statement), "utf8"), IN_TOTO_PAYLOAD_TYPE, options);
}

/** Default validity of a signed manifest (`expires_at` = issued_at + this), ms. */
export const DEFAULT_MANIFEST_VALIDITY_MS = 7 * 86_400_000;

/**
 * Signs a compiled manifest: the Statement's subject is its digest, the predicate names the
 * model and recipe and the validity window. `key` signs with a local key; without it,
 * keylessly with `keyless` options (GitHub Actions OIDC by default).
 */
export function signManifest(
  compiled: { manifest: { model: string; recipe_name: string }; manifest_digest: string },
  o: {
    key?: SigningKey;
    keyless?: SignOptions;
    issued_at?: Date;
    /** Validity from issued_at, ms (default 7 days). */
    valid_for_ms?: number;
  },
): Promise<SerializedBundle> {
  const issued = o.issued_at ?? new Date();
  const statement = manifestStatement({
    manifest_digest: compiled.manifest_digest,
    model: compiled.manifest.model,
    recipe_name: compiled.manifest.recipe_name,
    issued_at: issued,
    expires_at: new Date(issued.getTime() + (o.valid_for_ms ?? DEFAULT_MANIFEST_VALIDITY_MS)),
  });
  return o.key ? signWithKey(statement, o.key) : signKeyless(statement, o.keyless ?? {});
}
