/**
 * Signing and verifying a closed release record (docs/record.md "Signing a record"), like a
 * manifest: a Sigstore bundle (DSSE envelope) carrying an in-toto Statement v1 whose subject
 * is the record's digest. sigstore-js does the cryptography (engine/src/admission/sign.ts and
 * verify.ts); this module only decides what is signed and what a verifier must re-check.
 */
import type { SerializedBundle } from "@sigstore/bundle";
import type { SignOptions } from "sigstore";
import type { SignerSet, TrustPolicy } from "../admission/policy.ts";
import { type SigningKey, signKeyless, signWithKey } from "../admission/sign.ts";
import { RECORD_PREDICATE_TYPE, RecordPredicate, recordStatement } from "../admission/statement.ts";
import { BundleVerifier, type SignerIdentity } from "../admission/verify.ts";
import { recordDigest } from "./build.ts";
import { ReleaseRecordDocument } from "./schema.ts";

/** Why a record cannot be signed or a signed record does not verify. */
export class RecordSignatureError extends Error {
  constructor(
    /** Which check failed: `record`, `digest`, `signature`, `subject`, `predicate`. */
    readonly check: "record" | "digest" | "signature" | "subject" | "predicate",
    message: string,
    /** What to do about it. */
    readonly fix: string,
  ) {
    super(message);
  }
}

/**
 * Validates a record document as `baton record` wrote it and checks that it is closed and
 * unchanged: its `digest` equals the sha256 of its canonical JSON (without `digest`,
 * `acceptance` and `refused_events`).
 * @returns the record with its (recomputed, equal) digest.
 * @throws RecordSignatureError `record` (not a record, or still open) or `digest` (edited).
 */
export function closedRecord(value: unknown): ReleaseRecordDocument & { digest: string } {
  const r = ReleaseRecordDocument.safeParse(value);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new RecordSignatureError(
      "record",
      `not a release record: ${i?.path.join(".") || "(document)"}: ${i?.message}`,
      "write it with `baton record <id> --out FILE` (the document, not --raw)",
    );
  }
  const { digest, acceptance: _a, refused_events: _r, ...body } = r.data;
  if (digest === null) {
    throw new RecordSignatureError(
      "record",
      `release ${r.data.release.id} is still open (state ${r.data.release.state}): its record has no fixed digest yet`,
      "sign the record once the release is closed (succeeded, rolled_back, aborted or abandoned)",
    );
  }
  const actual = recordDigest(body);
  if (actual !== digest) {
    throw new RecordSignatureError(
      "digest",
      `the record says digest ${digest} but its contents hash to ${actual}: it was changed after the engine wrote it`,
      "fetch it again with `baton record <id> --out FILE` and do not edit it",
    );
  }
  return { ...r.data, digest };
}

/**
 * Signs a closed record: subject = its digest, predicate = release id, model, final state.
 * `key` signs with a local key; without it, keylessly (GitHub Actions OIDC, or `keyless`).
 * @throws RecordSignatureError when the record is open or was changed (see `closedRecord`).
 */
export async function signRecord(
  value: unknown,
  o: { key?: SigningKey; keyless?: SignOptions },
): Promise<{ bundle: SerializedBundle; digest: string; release_id: string }> {
  const rec = closedRecord(value);
  const statement = recordStatement({
    record_digest: rec.digest,
    release_id: rec.release.id,
    model: rec.intended.model,
    state: rec.release.state,
  });
  const bundle = o.key
    ? await signWithKey(statement, o.key)
    : await signKeyless(statement, o.keyless ?? {});
  return { bundle, digest: rec.digest, release_id: rec.release.id };
}

/**
 * Verifies a record against a bundle: the record is closed and unchanged, the bundle's
 * signature holds under `policy` for one of `signers`, and the Statement is a release-record
 * statement whose subject digest and release id are this record's.
 * @throws RecordSignatureError naming the failed check.
 */
export function verifyRecord(
  value: unknown,
  bundle: unknown,
  policy: TrustPolicy,
  signers: SignerSet,
): { digest: string; release_id: string; signer: SignerIdentity } {
  const rec = closedRecord(value);
  const v = new BundleVerifier(policy).verify(bundle, signers);
  if (!v.ok) {
    throw new RecordSignatureError(
      "signature",
      `the bundle does not verify: ${v.message}`,
      "sign the record with a key or identity the trust policy lists (`baton sign-record`)",
    );
  }
  if (v.statement.predicateType !== RECORD_PREDICATE_TYPE) {
    throw new RecordSignatureError(
      "predicate",
      `the bundle signs a ${v.statement.predicateType} statement, not a release record`,
      "pass the bundle `baton sign-record` wrote for this record",
    );
  }
  const subject = v.statement.subject[0]?.digest.sha256;
  if (subject !== rec.digest) {
    throw new RecordSignatureError(
      "subject",
      `the bundle signs record digest ${subject}, not this record's ${rec.digest}`,
      "pass the bundle signed for this record, or sign this record",
    );
  }
  const p = RecordPredicate.safeParse(v.statement.predicate);
  if (!p.success || p.data.release_id !== rec.release.id) {
    throw new RecordSignatureError(
      "predicate",
      `the bundle names release ${p.success ? p.data.release_id : "(none)"}, not ${rec.release.id}`,
      "pass the bundle signed for this release's record",
    );
  }
  return { digest: rec.digest, release_id: rec.release.id, signer: v.signer };
}
