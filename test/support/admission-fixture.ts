/**
 * Trust set-up for admission tests: a signing key and a second (unlisted) one, an offline
 * Sigstore (mock Fulcio + TSA, see sigstore-mock.ts), a trust policy file naming them, and
 * helpers that sign manifests and image attestations the way `baton sign` and GitHub do.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SerializedBundle } from "@sigstore/bundle";
import {
  type AdmissionConfig,
  loadTrustPolicy,
  type TrustPolicy,
} from "../../engine/src/admission/policy.ts";
import {
  generateSigningKey,
  type SigningKey,
  signKeyless,
  signManifest,
  signWithKey,
} from "../../engine/src/admission/sign.ts";
import {
  GITHUB_HOSTED_BUILDER,
  provenanceStatement,
  sbomStatement,
} from "../../engine/src/admission/statement.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { type MockSigstore, startMockSigstore } from "./sigstore-mock.ts";

export const REPO = "acme/models";
export const WORKFLOW = ".github/workflows/recipe.yml";
export const REF = "refs/heads/main";
export const SOURCE_REPO = `https://github.com/${REPO}`;

export interface Trust {
  dir: string;
  policyFile: string;
  policy: TrustPolicy;
  admission: AdmissionConfig;
  key: SigningKey;
  /** A key the policy does not list. */
  otherKey: SigningKey;
  sigstore: MockSigstore;
  /** Signs the manifest compiled from `recipe` (key-based unless `keyless`). */
  sign(
    recipe: RecipeInput,
    o?: {
      issued_at?: Date;
      valid_for_ms?: number;
      key?: SigningKey;
      keyless?: { repository?: string; ref?: string };
    },
  ): Promise<SerializedBundle>;
  /** Provenance for `image` (by default an allowed builder and repository). */
  provenance(
    image: string,
    o?: { builder?: string; repository?: string; key?: SigningKey },
  ): Promise<SerializedBundle>;
  sbom(image: string): Promise<SerializedBundle>;
  close(): Promise<void>;
}

/** Builds the trust set-up; `policy` overrides parts of the policy document. */
export async function makeTrust(policy: Record<string, unknown> = {}): Promise<Trust> {
  const dir = mkdtempSync(join(tmpdir(), "baton-trust-"));
  const sigstore = await startMockSigstore();
  const k = generateSigningKey();
  const o = generateSigningKey();
  const key: SigningKey = { key_id: "release-key-1", private_key_pem: k.private_key_pem };
  const otherKey: SigningKey = { key_id: "release-key-1", private_key_pem: o.private_key_pem };
  writeFileSync(join(dir, "release-key-1.pub"), k.public_key_pem);
  writeFileSync(join(dir, "trusted_root.json"), JSON.stringify(sigstore.trustedRoot));
  const doc = {
    version: 1,
    trusted_root: "trusted_root.json",
    manifest: {
      signers: {
        keys: [{ key_id: "release-key-1", public_key_file: "release-key-1.pub" }],
        identities: [{ repository: REPO, workflow: WORKFLOW, ref: REF }],
      },
      max_age: "30d",
    },
    images: {
      provenance: "required",
      sbom: "off",
      builders: [GITHUB_HOSTED_BUILDER],
      source_repositories: [SOURCE_REPO],
    },
    ...policy,
  };
  const policyFile = join(dir, "trust-policy.json");
  writeFileSync(policyFile, JSON.stringify(doc, null, 2));
  const loaded = loadTrustPolicy(policyFile);
  const keyless = (repository = REPO, ref = REF) => ({
    fulcioURL: sigstore.url,
    tsaServerURL: sigstore.url,
    tlogUpload: false,
    identityToken: sigstore.githubToken({ repository, workflow: WORKFLOW, ref }),
  });
  return {
    dir,
    policyFile,
    policy: loaded,
    admission: { mode: "enforce", policy: loaded },
    key,
    otherKey,
    sigstore,
    sign(recipe, so = {}) {
      const c = compileRecipeInput(recipe);
      return signManifest(c, {
        ...(so.keyless
          ? { keyless: keyless(so.keyless.repository, so.keyless.ref) }
          : { key: so.key ?? key }),
        ...(so.issued_at ? { issued_at: so.issued_at } : {}),
        ...(so.valid_for_ms ? { valid_for_ms: so.valid_for_ms } : {}),
      });
    },
    provenance(image, po = {}) {
      return signWithKey(
        provenanceStatement(image, {
          builder: po.builder ?? GITHUB_HOSTED_BUILDER,
          repository: po.repository ?? SOURCE_REPO,
        }),
        po.key ?? key,
      );
    },
    sbom(image) {
      return signKeyless(sbomStatement(image, ["busybox"]), keyless());
    },
    async close() {
      await sigstore.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
