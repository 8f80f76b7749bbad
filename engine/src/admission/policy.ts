/**
 * The engine's trust policy (docs/trust.md): which signers may publish manifests, which may
 * attest images, which builders and source repositories are allowed, whether an SBOM is
 * required, and how long a signed manifest stays valid. Engine configuration, read once at
 * start-up (`BATON_TRUST_POLICY`, a YAML or JSON file) and validated with zod: a bad policy
 * stops the engine with one message per field.
 */
import { createPublicKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import * as z from "zod";
import { BatonError, type Problem } from "../domain/errors.ts";

/** GitHub Actions' OIDC issuer (the `iss` of its ID tokens, Fulcio's issuer extension). */
export const GITHUB_OIDC_ISSUER = "https://token.actions.githubusercontent.com";

/** A signing key allowed by the policy: `id` is the bundle's key hint. */
const KeyRule = z
  .object({
    key_id: z
      .string()
      .min(1)
      .max(200)
      .describe("The key hint the bundle carries (baton sign --key-id)."),
    public_key: z.string().min(1).optional().describe("PEM public key (SPKI)."),
    public_key_file: z
      .string()
      .min(1)
      .optional()
      .describe("File holding the PEM public key, relative to the policy file."),
  })
  .strict()
  .refine((k) => (k.public_key ? 1 : 0) + (k.public_key_file ? 1 : 0) === 1, {
    message: "give exactly one of public_key or public_key_file",
  });

/** A keyless (Fulcio certificate) identity allowed by the policy: a GitHub workflow. */
const IdentityRule = z
  .object({
    issuer: z.string().url().default(GITHUB_OIDC_ISSUER).describe("OIDC issuer of the signer."),
    repository: z
      .string()
      .regex(/^[\w.-]+\/[\w.-]+$/, "repository must be owner/name")
      .describe("Repository whose workflow signs, owner/name."),
    workflow: z
      .string()
      .regex(
        /^\.github\/workflows\/[\w.-]+\.ya?ml$/,
        "workflow must be .github/workflows/<file>.yml",
      )
      .describe("Workflow file that signs, e.g. .github/workflows/recipe.yml."),
    ref: z
      .string()
      .regex(/^refs\/(heads|tags)\/\S+$/, "ref must be refs/heads/<branch> or refs/tags/<tag>")
      .describe("Git ref the workflow ran from, e.g. refs/heads/main."),
  })
  .strict();

/** Who may sign one kind of statement: keys, keyless identities, or both. */
const Signers = z
  .object({
    keys: z.array(KeyRule).default([]),
    identities: z.array(IdentityRule).default([]),
  })
  .strict();

const Duration = z
  .string()
  .regex(/^\d+[smhd]$/, "a duration is a number and a unit: 30m, 12h, 7d")
  .transform((s) => {
    const n = Number(s.slice(0, -1));
    const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[s.slice(-1) as "s"];
    return n * unit;
  });

/** The policy file as written. */
export const TrustPolicyFile = z
  .object({
    version: z.literal(1, { error: "version must be 1" }),
    trusted_root: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Sigstore trusted root (JSON) for keyless certificates: `gh attestation trusted-root`, relative to the policy file.",
      ),
    manifest: z
      .object({
        signers: Signers,
        max_age: Duration.default(30 * 86_400_000).describe(
          "Longest validity of a signed manifest from its issued_at (default 30d).",
        ),
      })
      .strict(),
    images: z
      .object({
        provenance: z.enum(["required", "off"]).default("required"),
        sbom: z.enum(["required", "off"]).default("off"),
        signers: Signers.optional().describe(
          "Who may sign image attestations (default: the manifest's signers).",
        ),
        builders: z.array(z.string().min(1)).default([]).describe("Allowed SLSA builder ids."),
        source_repositories: z
          .array(z.string().min(1))
          .default([])
          .describe("Allowed source repositories (https://github.com/owner/name)."),
      })
      .strict()
      .default({ provenance: "required", sbom: "off", builders: [], source_repositories: [] }),
    keyless: z
      .object({
        tlog_threshold: z.number().int().min(0).max(4).default(0),
        ctlog_threshold: z.number().int().min(0).max(4).default(1),
      })
      .strict()
      .default({ tlog_threshold: 0, ctlog_threshold: 1 }),
  })
  .strict();

/** An allowed key, resolved to its PEM. */
export interface AllowedKey {
  key_id: string;
  public_key_pem: string;
}

/** An allowed keyless signer: the certificate SAN and issuer it must carry. */
export interface AllowedIdentity {
  issuer: string;
  /** `https://github.com/<owner>/<repo>/<workflow>@<ref>`, as Fulcio writes it for GitHub. */
  san: string;
  repository: string;
}

/** Allowed signers of one kind of statement. */
export interface SignerSet {
  keys: AllowedKey[];
  identities: AllowedIdentity[];
}

/** The validated policy. Times in ms. */
export interface TrustPolicy {
  /** Sigstore `TrustedRoot` JSON (parsed), or null when only keys are allowed. */
  trustedRoot: unknown | null;
  manifest: { signers: SignerSet; maxAgeMs: number };
  images: {
    provenance: "required" | "off";
    sbom: "required" | "off";
    signers: SignerSet;
    builders: string[];
    sourceRepositories: string[];
  };
  keyless: { tlogThreshold: number; ctlogThreshold: number };
}

/** How the engine admits manifests (docs/trust.md "Modes"). */
export type AdmissionConfig =
  /** Verify under `policy`; refuse what fails. */
  | { mode: "enforce"; policy: TrustPolicy }
  /** No policy configured: every start is refused with check `manifest_signature` (unsigned). */
  | { mode: "unconfigured" }
  /** `BATON_ADMISSION=off`: checks are recorded as skipped; for local use only. */
  | { mode: "off" };

/** The SAN Fulcio gives a GitHub Actions workflow's certificate. */
export function githubWorkflowSan(repository: string, workflow: string, ref: string): string {
  return `https://github.com/${repository}/${workflow}@${ref}`;
}

/**
 * Validates a parsed policy document; `baseDir` resolves relative file names.
 * @throws BatonError `bad_request` with one problem per bad field (path `trust_policy.<field>`).
 */
export function parseTrustPolicy(value: unknown, baseDir: string): TrustPolicy {
  const r = TrustPolicyFile.safeParse(value);
  if (!r.success) {
    throw policyError(
      r.error.issues.map((i) => ({
        path: ["trust_policy", ...i.path.map(String)].join("."),
        message: i.message,
        fix: "correct the trust policy file (docs/trust.md)",
      })),
    );
  }
  const p = r.data;
  const problems: Problem[] = [];
  const signers = (s: z.infer<typeof Signers>, where: string): SignerSet => ({
    keys: s.keys.map((k, i) => {
      const path = `trust_policy.${where}.keys.${i}`;
      let pem = k.public_key ?? "";
      if (k.public_key_file) {
        try {
          pem = readFileSync(resolve(baseDir, k.public_key_file), "utf8");
        } catch (e) {
          problems.push({
            path,
            message: `cannot read ${k.public_key_file}: ${(e as Error).message}`,
            fix: "point public_key_file at a readable PEM file",
          });
        }
      }
      if (pem) {
        try {
          createPublicKey(pem);
        } catch {
          problems.push({
            path,
            message: `key ${k.key_id} is not a PEM public key`,
            fix: "give the SPKI PEM (-----BEGIN PUBLIC KEY-----), e.g. from baton keygen",
          });
        }
      }
      return { key_id: k.key_id, public_key_pem: pem };
    }),
    identities: s.identities.map((id) => ({
      issuer: id.issuer,
      san: githubWorkflowSan(id.repository, id.workflow, id.ref),
      repository: id.repository,
    })),
  });
  const manifestSigners = signers(p.manifest.signers, "manifest.signers");
  if (manifestSigners.keys.length === 0 && manifestSigners.identities.length === 0) {
    problems.push({
      path: "trust_policy.manifest.signers",
      message: "no signer is allowed, so no manifest could ever be admitted",
      fix: "list at least one key or identity under manifest.signers",
    });
  }
  const imageSigners = p.images.signers
    ? signers(p.images.signers, "images.signers")
    : manifestSigners;
  let trustedRoot: unknown | null = null;
  const needsRoot = manifestSigners.identities.length > 0 || imageSigners.identities.length > 0;
  if (p.trusted_root) {
    try {
      trustedRoot = JSON.parse(readFileSync(resolve(baseDir, p.trusted_root), "utf8"));
    } catch (e) {
      problems.push({
        path: "trust_policy.trusted_root",
        message: `cannot read ${p.trusted_root} as JSON: ${(e as Error).message}`,
        fix: "point trusted_root at a Sigstore trusted root, e.g. the output of `gh attestation trusted-root`",
      });
    }
  } else if (needsRoot) {
    problems.push({
      path: "trust_policy.trusted_root",
      message: "keyless identities are allowed but no trusted_root is given",
      fix: "set trusted_root to a Sigstore trusted root JSON file (gh attestation trusted-root > root.json)",
    });
  }
  if (p.images.provenance === "required" && p.images.builders.length === 0) {
    problems.push({
      path: "trust_policy.images.builders",
      message: "provenance is required but no builder is allowed",
      fix: "list allowed builder ids, e.g. https://github.com/actions/runner/github-hosted, or set provenance: off",
    });
  }
  if (p.images.provenance === "required" && p.images.source_repositories.length === 0) {
    problems.push({
      path: "trust_policy.images.source_repositories",
      message: "provenance is required but no source repository is allowed",
      fix: "list allowed repositories, e.g. https://github.com/acme/models, or set provenance: off",
    });
  }
  if (problems.length > 0) throw policyError(problems);
  return {
    trustedRoot,
    manifest: { signers: manifestSigners, maxAgeMs: p.manifest.max_age },
    images: {
      provenance: p.images.provenance,
      sbom: p.images.sbom,
      signers: imageSigners,
      builders: p.images.builders,
      sourceRepositories: p.images.source_repositories.map((s) => s.replace(/\/+$/, "")),
    },
    keyless: { tlogThreshold: p.keyless.tlog_threshold, ctlogThreshold: p.keyless.ctlog_threshold },
  };
}

/** Reads and validates a policy file (YAML or JSON). @throws BatonError `bad_request`. */
export function loadTrustPolicy(file: string): TrustPolicy {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    throw policyError([
      {
        path: "BATON_TRUST_POLICY",
        message: `cannot read ${file}: ${(e as Error).message}`,
        fix: "point BATON_TRUST_POLICY at the trust policy file (docs/trust.md)",
      },
    ]);
  }
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (e) {
    throw policyError([
      {
        path: "BATON_TRUST_POLICY",
        message: `${file} is not valid YAML/JSON: ${(e as Error).message.split("\n")[0]}`,
        fix: "fix the policy file's syntax",
      },
    ]);
  }
  return parseTrustPolicy(value, dirname(resolve(file)));
}

/**
 * The admission mode from the environment: `BATON_TRUST_POLICY` (a file) enforces it;
 * `BATON_ADMISSION=off` turns admission off (local use); neither is `unconfigured`, which
 * refuses every start as unsigned. Both set is a configuration error.
 */
export function admissionFromEnv(env: Record<string, string | undefined>): AdmissionConfig {
  const file = env.BATON_TRUST_POLICY?.trim();
  const off = env.BATON_ADMISSION?.trim();
  if (off && off !== "off" && off !== "on") {
    throw policyError([
      {
        path: "BATON_ADMISSION",
        message: `BATON_ADMISSION must be on or off, not ${JSON.stringify(off)}`,
        fix: "unset it (admission on), or set BATON_ADMISSION=off for local use only",
      },
    ]);
  }
  if (file && off === "off") {
    throw policyError([
      {
        path: "BATON_ADMISSION",
        message: "BATON_ADMISSION=off and BATON_TRUST_POLICY are both set",
        fix: "unset BATON_ADMISSION to enforce the policy, or unset BATON_TRUST_POLICY",
      },
    ]);
  }
  if (file) return { mode: "enforce", policy: loadTrustPolicy(file) };
  if (off === "off") return { mode: "off" };
  return { mode: "unconfigured" };
}

function policyError(problems: Problem[]): BatonError {
  // The variable's name once: a message that names it already is not prefixed with it again.
  const lines = problems
    .map((p) => `  - ${p.message.includes(p.path) ? "" : `${p.path}: `}${p.message}; fix: ${p.fix}`)
    .join("\n");
  return new BatonError("bad_request", `[engine] invalid trust policy:\n${lines}`, problems);
}
