/**
 * in-toto Statements (https://github.com/in-toto/attestation, v1) as Baton signs and reads
 * them: the manifest statement (subject = the manifest digest), and the image attestations a
 * build publishes (SLSA provenance, SBOM), in the form GitHub artifact attestations use. The
 * schema is the type; everything read from a bundle goes through `safeParse`.
 */
import * as z from "zod";
import { lazySchema } from "../protocol/lazy-schema.ts";

/** DSSE payload type of an in-toto Statement. */
export const IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json";
/** `_type` of an in-toto Statement v1. */
export const STATEMENT_TYPE = "https://in-toto.io/Statement/v1";
/** Predicate type of Baton's signed manifest. */
export const MANIFEST_PREDICATE_TYPE = "https://baton.dev/attestations/manifest/v1";
/** SLSA provenance v1 (what `actions/attest-build-provenance` writes). */
export const SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1";
/** SBOM predicate types accepted (`actions/attest-sbom`: SPDX or CycloneDX). */
export const SBOM_PREDICATE_TYPES = [
  "https://spdx.dev/Document",
  "https://spdx.dev/Document/v2.2",
  "https://spdx.dev/Document/v2.3",
  "https://cyclonedx.org/bom",
  "https://cyclonedx.org/bom/v1.4",
  "https://cyclonedx.org/bom/v1.5",
  "https://cyclonedx.org/bom/v1.6",
] as const;

const Hex64 = lazySchema(() =>
  z.string().regex(/^[a-f0-9]{64}$/, "must be 64 lowercase hex characters"),
);

/** One subject of a Statement: a name and its digests (we require sha256). */
export const Subject = lazySchema(() =>
  z.object({
    name: z.string(),
    digest: z.object({ sha256: Hex64 }).passthrough(),
  }),
);

/** An in-toto Statement v1 with any predicate. */
export const Statement = lazySchema(() =>
  z.object({
    _type: z.literal(STATEMENT_TYPE),
    subject: z.array(Subject).min(1),
    predicateType: z.string().min(1),
    predicate: z.unknown(),
  }),
);
export type Statement = z.infer<typeof Statement>;

/** What a signed manifest says besides its digest. Times are ISO 8601 (UTC). */
export const ManifestPredicate = lazySchema(() =>
  z.object({
    model: z.string().min(1),
    recipe_name: z.string().min(1),
    /** When the manifest was signed; orders manifests of one model (freeze / rollback check). */
    issued_at: z.iso.datetime({ offset: true }),
    /** After this the manifest is not admitted (the policy's max_age may cut it shorter). */
    expires_at: z.iso.datetime({ offset: true }).optional(),
  }),
);
export type ManifestPredicate = z.infer<typeof ManifestPredicate>;

/** The part of SLSA provenance v1 admission reads (GitHub's layout). */
export const SlsaProvenance = lazySchema(() =>
  z.object({
    buildDefinition: z.object({
      externalParameters: z
        .object({
          workflow: z.object({ repository: z.string() }).passthrough().optional(),
        })
        .passthrough(),
    }),
    runDetails: z.object({ builder: z.object({ id: z.string() }).passthrough() }).passthrough(),
  }),
);

/** The manifest statement: subject = the manifest digest, predicate = model, times. */
export function manifestStatement(o: {
  manifest_digest: string;
  model: string;
  recipe_name: string;
  issued_at: Date;
  expires_at?: Date;
}): Statement {
  const predicate: ManifestPredicate = {
    model: o.model,
    recipe_name: o.recipe_name,
    issued_at: o.issued_at.toISOString(),
    ...(o.expires_at ? { expires_at: o.expires_at.toISOString() } : {}),
  };
  return {
    _type: STATEMENT_TYPE,
    subject: [
      { name: `baton-manifest:${o.model}/${o.recipe_name}`, digest: { sha256: o.manifest_digest } },
    ],
    predicateType: MANIFEST_PREDICATE_TYPE,
    predicate,
  };
}

/** Predicate type of a signed, closed release record (docs/record.md). */
export const RECORD_PREDICATE_TYPE = "https://baton.dev/attestations/release-record/v1";

/** What a signed release record says besides its digest. */
export const RecordPredicate = lazySchema(() =>
  z.object({
    release_id: z.string().min(1),
    model: z.string().min(1),
    /** The release's terminal state when the record was signed. */
    state: z.string().min(1),
  }),
);
export type RecordPredicate = z.infer<typeof RecordPredicate>;

/** The record statement: subject = the closed record's digest (sha256 hex). */
export function recordStatement(o: {
  record_digest: string;
  release_id: string;
  model: string;
  state: string;
}): Statement {
  const predicate: RecordPredicate = { release_id: o.release_id, model: o.model, state: o.state };
  return {
    _type: STATEMENT_TYPE,
    subject: [{ name: `baton-record:${o.release_id}`, digest: { sha256: o.record_digest } }],
    predicateType: RECORD_PREDICATE_TYPE,
    predicate,
  };
}

/** The sha256 hex of an image reference pinned by digest (`name@sha256:<hex>`). */
export function imageDigest(image: string): string {
  return image.slice(image.lastIndexOf("@sha256:") + "@sha256:".length);
}

/** The image name without its digest (`registry/name[:tag]`). */
export function imageName(image: string): string {
  return image.slice(0, image.lastIndexOf("@"));
}

/** The builder id GitHub-hosted runners write into SLSA provenance. */
export const GITHUB_HOSTED_BUILDER = "https://github.com/actions/runner/github-hosted";

/**
 * A SLSA provenance v1 Statement for `image` in GitHub's layout (what
 * `actions/attest-build-provenance` signs). Used by the demo, which has no GitHub build, and
 * by tests; a real pipeline gets it from its build job.
 */
export function provenanceStatement(
  image: string,
  o: { builder: string; repository: string; workflow?: string; ref?: string },
): Statement {
  return {
    _type: STATEMENT_TYPE,
    subject: [{ name: imageName(image), digest: { sha256: imageDigest(image) } }],
    predicateType: SLSA_PROVENANCE_V1,
    predicate: {
      buildDefinition: {
        buildType: "https://actions.github.io/buildtypes/workflow/v1",
        externalParameters: {
          workflow: {
            ref: o.ref ?? "refs/heads/main",
            repository: o.repository,
            path: o.workflow ?? ".github/workflows/build.yml",
          },
        },
        internalParameters: {},
        resolvedDependencies: [],
      },
      runDetails: { builder: { id: o.builder }, metadata: {} },
    },
  };
}

/** A minimal SPDX SBOM Statement for `image` (what `actions/attest-sbom` signs). */
export function sbomStatement(image: string, packages: string[] = []): Statement {
  return {
    _type: STATEMENT_TYPE,
    subject: [{ name: imageName(image), digest: { sha256: imageDigest(image) } }],
    predicateType: "https://spdx.dev/Document/v2.3",
    predicate: {
      spdxVersion: "SPDX-2.3",
      SPDXID: "SPDXRef-DOCUMENT",
      name: imageName(image),
      packages: packages.map((p, i) => ({ SPDXID: `SPDXRef-${i}`, name: p })),
    },
  };
}
