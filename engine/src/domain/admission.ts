/**
 * Admission evidence as data (docs/trust.md): the named checks a release passed before any
 * step ran, stored on the release and shown in its record. Computed in
 * `engine/src/admission/admit.ts`; here only the shapes, so the domain stays pure.
 */

/** The checks, in the order they run and are listed. */
export const ADMISSION_CHECKS = [
  "manifest_signature",
  "manifest_subject",
  "manifest_expiry",
  "manifest_freshness",
  "image_provenance",
  "image_sbom",
] as const;
export type AdmissionCheckName = (typeof ADMISSION_CHECKS)[number];

/** One row of admission evidence. */
export interface AdmissionCheck {
  check: AdmissionCheckName;
  outcome: "pass" | "fail" | "skipped";
  /** One sentence for people: what was found. */
  message: string;
  /** What to do when it failed; null otherwise. */
  fix: string | null;
}

/** Who signed a bundle, as the record shows it. */
export type SignerIdentity =
  | { kind: "key"; key_id: string }
  | { kind: "keyless"; san: string; issuer: string };

/** The outcome of admission, stored on the release (`Release.admission`). */
export interface AdmissionReport {
  /** `enforce`: checked under the trust policy; `off`: BATON_ADMISSION=off; `unconfigured`: no policy. */
  mode: "enforce" | "off" | "unconfigured";
  ok: boolean;
  /** Epoch ms of the decision. */
  at: number;
  checks: AdmissionCheck[];
  signer: SignerIdentity | null;
  /** From the signed predicate, epoch ms. */
  issued_at: number | null;
  /** Effective expiry (the predicate's, cut to the policy's max_age), epoch ms. */
  expires_at: number | null;
  /** Admitted as an explicit rollback (freshness waived). */
  rollback: boolean;
}
