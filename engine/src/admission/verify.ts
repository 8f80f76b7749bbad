/**
 * Verifying a Sigstore bundle that carries an in-toto Statement, under the trust policy, with
 * sigstore-js (`@sigstore/bundle` parses, `@sigstore/verify` checks signature, certificate
 * chain, SCTs, timestamps, transparency log). Baton only decides which signers are allowed.
 * Never throws for bad input: the outcome is data.
 */
import { createPublicKey } from "node:crypto";
import { bundleFromJSON, isBundleWithDsseEnvelope } from "@sigstore/bundle";
import { TrustedRoot } from "@sigstore/protobuf-specs";
import { type TrustMaterial, toSignedEntity, toTrustMaterial, Verifier } from "@sigstore/verify";
import type { SignerIdentity } from "../domain/admission.ts";
import type { SignerSet, TrustPolicy } from "./policy.ts";
import { IN_TOTO_PAYLOAD_TYPE, Statement } from "./statement.ts";

export type { SignerIdentity };

/** Why a bundle was not accepted. */
export type VerifyFailureReason =
  | "malformed"
  | "not_in_toto"
  | "untrusted_key"
  | "untrusted_identity"
  | "no_trusted_root"
  | "invalid";

export type VerifyResult =
  | { ok: true; statement: Statement; signer: SignerIdentity }
  | { ok: false; reason: VerifyFailureReason; message: string };

const EMPTY_ROOT = {
  mediaType: "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
  tlogs: [],
  certificateAuthorities: [],
  ctlogs: [],
  timestampAuthorities: [],
};

export { describeSigner } from "./signer.ts";

/** Verifies bundles against one policy; build once at start-up (parses the trusted root). */
export class BundleVerifier {
  private readonly root: TrustedRoot;
  constructor(private readonly policy: TrustPolicy) {
    this.root = TrustedRoot.fromJSON(policy.trustedRoot ?? EMPTY_ROOT);
  }

  /**
   * Verifies `json` (a serialized bundle) and returns its Statement and signer when the
   * signature holds and the signer is one of `allowed`.
   */
  verify(json: unknown, allowed: SignerSet): VerifyResult {
    let bundle: ReturnType<typeof bundleFromJSON>;
    try {
      bundle = bundleFromJSON(json);
    } catch (e) {
      return { ok: false, reason: "malformed", message: `not a Sigstore bundle: ${msg(e)}` };
    }
    if (!isBundleWithDsseEnvelope(bundle)) {
      return { ok: false, reason: "not_in_toto", message: "the bundle carries no DSSE envelope" };
    }
    const envelope = bundle.content.dsseEnvelope;
    if (envelope.payloadType !== IN_TOTO_PAYLOAD_TYPE) {
      return {
        ok: false,
        reason: "not_in_toto",
        message: `DSSE payload type is ${JSON.stringify(envelope.payloadType)}, not ${IN_TOTO_PAYLOAD_TYPE}`,
      };
    }
    const material = bundle.verificationMaterial.content;
    let signer: SignerIdentity;
    try {
      if (material.$case === "publicKey") {
        const hint = material.publicKey.hint;
        const key = allowed.keys.find((k) => k.key_id === hint);
        if (!key) {
          return {
            ok: false,
            reason: "untrusted_key",
            message: `signed with key ${JSON.stringify(hint)}, which the trust policy does not allow`,
          };
        }
        const trust: TrustMaterial = toTrustMaterial(this.root, (h) => {
          if (h !== key.key_id) throw new Error(`no key ${h}`);
          return { publicKey: createPublicKey(key.public_key_pem), validFor: () => true };
        });
        // Key-based bundles carry no timestamp and no log entry: the key is the whole trust.
        new Verifier(trust, { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 }).verify(
          toSignedEntity(bundle),
        );
        signer = { kind: "key", key_id: key.key_id };
      } else {
        if (!this.policy.trustedRoot) {
          return {
            ok: false,
            reason: "no_trusted_root",
            message: "the bundle is signed keylessly but the trust policy has no trusted_root",
          };
        }
        const trust = toTrustMaterial(this.root);
        const who = new Verifier(trust, {
          tlogThreshold: this.policy.keyless.tlogThreshold,
          ctlogThreshold: this.policy.keyless.ctlogThreshold,
          timestampThreshold: 1,
        }).verify(toSignedEntity(bundle));
        const san = who.identity?.subjectAlternativeName ?? "";
        const issuer = who.identity?.extensions?.issuer ?? "";
        if (!allowed.identities.some((i) => i.san === san && i.issuer === issuer)) {
          return {
            ok: false,
            reason: "untrusted_identity",
            message: `signed by ${san || "(no SAN)"} (issuer ${issuer || "none"}), which the trust policy does not allow`,
          };
        }
        signer = { kind: "keyless", san, issuer };
      }
    } catch (e) {
      return { ok: false, reason: "invalid", message: `verification failed: ${msg(e)}` };
    }
    let value: unknown;
    try {
      value = JSON.parse(Buffer.from(envelope.payload).toString("utf8"));
    } catch {
      return { ok: false, reason: "not_in_toto", message: "the signed payload is not JSON" };
    }
    const st = Statement.safeParse(value);
    if (!st.success) {
      return {
        ok: false,
        reason: "not_in_toto",
        message: `the signed payload is not an in-toto Statement v1: ${st.error.issues[0]?.path.join(".")} ${st.error.issues[0]?.message}`,
      };
    }
    return { ok: true, statement: st.data, signer };
  }
}

function msg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
