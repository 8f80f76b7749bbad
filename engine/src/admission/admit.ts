/**
 * Admission (docs/trust.md): named, deterministic checks a release must pass before any step
 * runs. Each check is a row of the release's evidence; a failed check refuses the start with
 * 422 naming the check and the fix. All checks run (those that depend on a failed one are
 * `skipped`), so one answer lists everything to fix. No I/O: the caller passes the request's
 * bundles, the model's admission mark and the time.
 */
import {
  ADMISSION_CHECKS,
  type AdmissionCheck,
  type AdmissionCheckName,
  type AdmissionReport,
  type SignerIdentity,
} from "../domain/admission.ts";
import type { Manifest } from "../domain/types.ts";
import { suggestedCommand } from "../domain/verbs.ts";
import type { AdmissionMark } from "../ports/store.ts";
import type { AdmissionConfig } from "./policy.ts";
import { describeSigner } from "./signer.ts";
import {
  imageDigest,
  MANIFEST_PREDICATE_TYPE,
  ManifestPredicate,
  SBOM_PREDICATE_TYPES,
  SLSA_PROVENANCE_V1,
  SlsaProvenance,
  type Statement,
} from "./statement.ts";
import type { BundleVerifier } from "./verify.ts";

export type { AdmissionMark } from "../ports/store.ts";

export interface AdmissionInput {
  manifest: Manifest;
  manifest_digest: string;
  /** The manifest's Sigstore bundle as sent (JSON), if any. */
  bundle: unknown;
  /** Image attestation bundles as sent (provenance, SBOM). */
  attestations: unknown[];
  /** An explicit rollback: an older manifest than the mark is allowed. */
  rollback: boolean;
  mark: AdmissionMark | null;
  now: number;
}

/** Allowed clock difference between signer and engine (ms). */
export const CLOCK_SKEW_MS = 5 * 60_000;

/** Runs every check. `verifier` is required in `enforce` mode. */
export function admit(
  config: AdmissionConfig,
  verifier: BundleVerifier | null,
  input: AdmissionInput,
): AdmissionReport {
  const base = { at: input.now, rollback: input.rollback };
  if (config.mode === "off") {
    return {
      ...base,
      mode: "off",
      ok: true,
      signer: null,
      issued_at: null,
      expires_at: null,
      checks: ADMISSION_CHECKS.map((check) => ({
        check,
        outcome: "skipped",
        message: "admission is off (BATON_ADMISSION=off): not checked",
        fix: null,
      })),
    };
  }
  if (config.mode === "unconfigured" || !verifier) {
    return {
      ...base,
      mode: config.mode,
      ok: false,
      signer: null,
      issued_at: null,
      expires_at: null,
      checks: ADMISSION_CHECKS.map((check) =>
        check === "manifest_signature"
          ? {
              check,
              outcome: "fail",
              message: "unsigned: the engine has no trust policy, so no signature can be trusted",
              fix: "set BATON_TRUST_POLICY to a trust policy file (docs/trust.md), or BATON_ADMISSION=off for local use only",
            }
          : { check, outcome: "skipped", message: "no trust policy configured", fix: null },
      ),
    };
  }
  const policy = config.policy;
  const checks: AdmissionCheck[] = [];
  const pass = (check: AdmissionCheckName, message: string) =>
    checks.push({ check, outcome: "pass", message, fix: null });
  const fail = (check: AdmissionCheckName, message: string, fix: string) =>
    checks.push({ check, outcome: "fail", message, fix });
  const skip = (check: AdmissionCheckName, message: string) =>
    checks.push({ check, outcome: "skipped", message, fix: null });

  // manifest_signature
  let statement: Statement | null = null;
  let signer: SignerIdentity | null = null;
  if (input.bundle === undefined || input.bundle === null) {
    fail(
      "manifest_signature",
      "unsigned: the request carries no manifest bundle",
      `sign the compiled manifest (baton sign, or keyless in the recipe workflow) and send the bundle with the recipe (baton start <recipe> --bundle <bundle.json>, baton deploy <recipe> --bundle <bundle.json>, or ${suggestedCommand("roll_forward", { target: "<id>" })})`,
    );
  } else {
    const v = verifier.verify(input.bundle, policy.manifest.signers);
    if (!v.ok) {
      fail(
        "manifest_signature",
        `the manifest bundle does not verify: ${v.message}`,
        signatureFix(v.reason),
      );
    } else if (v.statement.predicateType !== MANIFEST_PREDICATE_TYPE) {
      fail(
        "manifest_signature",
        `the signed statement's predicateType is ${v.statement.predicateType}, not ${MANIFEST_PREDICATE_TYPE}`,
        "sign the manifest with baton sign (an image or other attestation is not a manifest signature)",
      );
    } else {
      statement = v.statement;
      signer = v.signer;
      pass(
        "manifest_signature",
        `signed by ${describeSigner(v.signer)}, allowed by the trust policy`,
      );
    }
  }

  // manifest_subject (and the predicate it carries)
  let predicate: ManifestPredicate | null = null;
  if (!statement) {
    skip("manifest_subject", "the signature did not verify");
  } else {
    const p = ManifestPredicate.safeParse(statement.predicate);
    const digests = statement.subject.map((s) => s.digest.sha256);
    if (!p.success) {
      fail(
        "manifest_subject",
        `the manifest predicate is malformed at ${p.error.issues[0]?.path.join(".") || "predicate"}: ${p.error.issues[0]?.message}`,
        "sign with baton sign, which writes model, recipe_name, issued_at and expires_at",
      );
    } else if (!digests.includes(input.manifest_digest)) {
      fail(
        "manifest_subject",
        `the bundle's subject is sha256:${digests.join(", sha256:")}, but this recipe compiles to manifest sha256:${input.manifest_digest}`,
        "sign the manifest compiled from exactly this recipe (baton sign <recipe> prints its digest); the recipe changed after signing or the bundle belongs to another manifest",
      );
    } else if (p.data.model !== input.manifest.model) {
      fail(
        "manifest_subject",
        `the signed predicate names model ${p.data.model}, the manifest is for ${input.manifest.model}`,
        "sign the manifest of this model",
      );
    } else {
      predicate = p.data;
      pass(
        "manifest_subject",
        `the bundle's subject is the manifest compiled from this recipe, sha256:${input.manifest_digest} (the plan run may differ where the fleet differs from the recipe: baseline.recipe_manifest_digest)`,
      );
    }
  }

  // manifest_expiry
  let issuedAt: number | null = null;
  let expiresAt: number | null = null;
  if (!predicate) {
    skip("manifest_expiry", "no verified manifest predicate");
  } else {
    issuedAt = Date.parse(predicate.issued_at);
    const cap = issuedAt + policy.manifest.maxAgeMs;
    expiresAt = predicate.expires_at ? Math.min(Date.parse(predicate.expires_at), cap) : cap;
    if (issuedAt > input.now + CLOCK_SKEW_MS) {
      fail(
        "manifest_expiry",
        `the manifest was signed for ${predicate.issued_at}, in the future (engine time ${iso(input.now)})`,
        "check the signer's clock and sign again",
      );
    } else if (input.now >= expiresAt) {
      fail(
        "manifest_expiry",
        `the signed manifest expired at ${iso(expiresAt)} (issued ${predicate.issued_at}, policy max_age ${Math.round(policy.manifest.maxAgeMs / 3_600_000)}h)`,
        "sign the manifest again (a fresh issued_at), or raise manifest.max_age in the trust policy",
      );
    } else {
      pass("manifest_expiry", `valid until ${iso(expiresAt)}`);
    }
  }

  // manifest_freshness (The Update Framework's freeze and rollback attacks)
  const mark = input.mark;
  if (issuedAt === null) {
    skip("manifest_freshness", "no verified issue time");
  } else if (!mark) {
    pass("manifest_freshness", `first signed manifest admitted for model ${input.manifest.model}`);
  } else if (
    issuedAt > mark.issued_at ||
    (issuedAt === mark.issued_at && mark.manifest_digest === input.manifest_digest)
  ) {
    pass(
      "manifest_freshness",
      `issued ${iso(issuedAt)}, not older than the last admitted manifest (${mark.release_id}, issued ${iso(mark.issued_at)})`,
    );
  } else if (input.rollback) {
    pass(
      "manifest_freshness",
      `older than the last admitted manifest (${mark.release_id}, issued ${iso(mark.issued_at)}); admitted as an explicit rollback`,
    );
  } else {
    fail(
      "manifest_freshness",
      `the manifest was issued ${iso(issuedAt)}, older than the last admitted manifest for model ${mark.model} (release ${mark.release_id}, sha256:${mark.manifest_digest.slice(0, 12)}…, issued ${iso(mark.issued_at)}): a replayed or rolled-back manifest`,
      "sign the manifest again (a newer issued_at), or start it as an explicit rollback (baton rollback)",
    );
  }

  // image attestations: verified ones whose subject is the image
  const image = imageDigest(input.manifest.image);
  const verified: { statement: Statement; signer: SignerIdentity }[] = [];
  const rejected: string[] = [];
  for (const [i, a] of input.attestations.entries()) {
    const v = verifier.verify(a, policy.images.signers);
    if (!v.ok) rejected.push(`attestation ${i}: ${v.message}`);
    else verified.push(v);
  }
  const aboutImage = (s: Statement) => s.subject.some((x) => x.digest.sha256 === image);

  if (policy.images.provenance === "off") {
    skip(
      "image_provenance",
      "the trust policy does not require provenance (images.provenance: off)",
    );
  } else {
    const prov = verified.filter((v) => v.statement.predicateType === SLSA_PROVENANCE_V1);
    const mine = prov.filter((v) => aboutImage(v.statement));
    if (prov.length === 0) {
      fail(
        "image_provenance",
        `no verified SLSA provenance attestation for ${input.manifest.image}${rejected.length ? ` (${rejected.join("; ")})` : ""}`,
        "attest the image's build (actions/attest-build-provenance) and send the bundle with the recipe (baton start --attestation)",
      );
    } else if (mine.length === 0) {
      const subjects = prov.flatMap((v) =>
        v.statement.subject.map((s) => `sha256:${s.digest.sha256}`),
      );
      fail(
        "image_provenance",
        `the provenance attestation's subject is ${subjects.join(", ")}, not the image's digest sha256:${image}`,
        "send the provenance of the image the recipe pins (the digest after @sha256:), or pin the attested image",
      );
    } else {
      const problems: string[] = [];
      let ok: string | null = null;
      for (const v of mine) {
        const p = SlsaProvenance.safeParse(v.statement.predicate);
        if (!p.success) {
          problems.push("the provenance predicate is not SLSA v1");
          continue;
        }
        const builder = p.data.runDetails.builder.id;
        const repo = (p.data.buildDefinition.externalParameters.workflow?.repository ?? "").replace(
          /\/+$/,
          "",
        );
        if (!policy.images.builders.includes(builder)) {
          problems.push(
            `builder ${builder} is not allowed (allowed: ${policy.images.builders.join(", ")})`,
          );
        } else if (!policy.images.sourceRepositories.includes(repo)) {
          problems.push(
            `source repository ${repo || "(none)"} is not allowed (allowed: ${policy.images.sourceRepositories.join(", ")})`,
          );
        } else {
          ok = `built by ${builder} from ${repo}, signed by ${describeSigner(v.signer)}`;
          break;
        }
      }
      if (ok) pass("image_provenance", ok);
      else
        fail(
          "image_provenance",
          `provenance for sha256:${image}: ${problems.join("; ")}`,
          "build the image with an allowed builder from an allowed repository, or extend images.builders / images.source_repositories in the trust policy",
        );
    }
  }

  if (policy.images.sbom === "off") {
    skip("image_sbom", "the trust policy does not require an SBOM (images.sbom: off)");
  } else {
    const sbom = verified.find(
      (v) =>
        (SBOM_PREDICATE_TYPES as readonly string[]).includes(v.statement.predicateType) &&
        aboutImage(v.statement),
    );
    if (sbom) pass("image_sbom", `SBOM (${sbom.statement.predicateType}) for sha256:${image}`);
    else
      fail(
        "image_sbom",
        `no verified SBOM attestation (SPDX or CycloneDX) whose subject is sha256:${image}`,
        "attest the image's SBOM (actions/attest-sbom) and send the bundle with the recipe (baton start --attestation)",
      );
  }

  return {
    ...base,
    mode: "enforce",
    ok: checks.every((c) => c.outcome !== "fail"),
    checks,
    signer,
    issued_at: issuedAt,
    expires_at: expiresAt,
  };
}

function signatureFix(reason: string): string {
  switch (reason) {
    case "untrusted_key":
      return "sign with a key the trust policy lists under manifest.signers.keys, or add its public key there";
    case "untrusted_identity":
      return "sign from a workflow the trust policy lists under manifest.signers.identities (repository, workflow, ref)";
    case "no_trusted_root":
      return "set trusted_root in the trust policy (gh attestation trusted-root > root.json)";
    case "malformed":
    case "not_in_toto":
      return "send the Sigstore bundle JSON that baton sign (or the recipe workflow) wrote, unchanged";
    default:
      return "sign the manifest again; the bundle was altered or signed by another key";
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
