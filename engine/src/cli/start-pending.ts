/**
 * `baton start-pending <recipe…>`: starts every recipe whose manifest digest has no release
 * yet, and nothing else. This is what the recipe workflow runs on the default branch: it looks
 * at every recipe in the tree, not at a `before..HEAD` diff, so a run GitHub cancelled, a
 * force-push or a zero `before` (new branch) cannot lose a merged recipe, and a recipe that
 * already has a release (any state) is never started twice. A recipe that fails the contract
 * check, an engine that cannot be listed, or a start the engine refuses fails the command
 * (exit 1) after the other recipes were handled; nothing is skipped silently.
 *
 * With `key` (self-hosted, key-based signing, docs/trust.md "Signing"), each recipe it starts
 * is sent as a signed start: its compiled manifest signed with that PEM key under `key_id` (the
 * Sigstore bundle `baton sign --key` writes), so admission verifies it against the public key
 * the engine's trust policy lists.
 *
 * With `keyless` (GitHub Actions, docs/trust.md "Signing from the recipe workflow"), each
 * manifest is signed with the runner's OIDC identity through sigstore-js: the token comes from
 * `ACTIONS_ID_TOKEN_REQUEST_URL` (the job needs `permissions: id-token: write`), Fulcio issues
 * a certificate naming the repository, workflow and ref, and Rekor or a TSA witnesses the
 * time. `attestations` (image provenance / SBOM bundles) are sent with every started recipe;
 * admission uses those whose subject is the recipe's image digest. With `github`, the
 * attestations GitHub holds for each recipe's image digest are read and sent too.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import type { SerializedBundle } from "@sigstore/bundle";
import type { SignOptions } from "sigstore";
import type { ReleaseSummary } from "../ports/store.ts";
import { type Connection, EngineClient } from "./client.ts";
import type { Io } from "./commands.ts";
import { EXIT, type ExitCode } from "./errors.ts";
import type { GitHubAttestationSource } from "./github-attestations.ts";

/** One line: the error's message and each of its problems (path: message). */
function describe(e: unknown): string {
  const err = e as Error & { problems?: { path?: string; message?: string }[] };
  const problems = (err.problems ?? []).map((p) => `${p.path ?? ""}: ${p.message ?? ""}`);
  return [err.message, ...problems].join("; ");
}

/** Most list pages read (200 releases each) before giving up loudly. */
const MAX_PAGES = 500;

/** One recipe's outcome. `release` is the existing or new release id. */
export interface PendingOutcome {
  file: string;
  recipe_name?: string;
  manifest_digest?: string;
  outcome: "already_released" | "started" | "would_start" | "failed";
  release?: string;
  message: string;
}

async function allReleases(client: EngineClient): Promise<ReleaseSummary[]> {
  const out: ReleaseSummary[] = [];
  let before: number | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const q = new URLSearchParams({ limit: "200" });
    // `before` is exclusive: releases created in the same millisecond as the page's last one
    // are re-read by asking for before+1 and dropping the ids already seen.
    if (before !== undefined) q.set("before", String(before + 1));
    const res = await client.call<{ releases: ReleaseSummary[] }>("GET", `/v1/releases?${q}`);
    const seen = new Set(out.map((r) => r.id));
    const fresh = res.releases.filter((r) => !seen.has(r.id));
    out.push(...fresh);
    if (res.releases.length < 200 || fresh.length === 0) return out;
    before = Math.min(...res.releases.map((r) => r.created_at));
  }
  throw new Error(
    `[cli] more than ${MAX_PAGES * 200} releases; cannot tell which recipes have one`,
  );
}

/** The URI SAN of a keyless bundle's Fulcio certificate (the workflow identity), or "?". */
function certificateIdentity(bundle: SerializedBundle): string {
  const m = bundle.verificationMaterial;
  const raw =
    m.certificate?.rawBytes ??
    (m as { x509CertificateChain?: { certificates: { rawBytes: string }[] } }).x509CertificateChain
      ?.certificates[0]?.rawBytes;
  if (!raw) return "?";
  try {
    const san = new X509Certificate(Buffer.from(raw, "base64")).subjectAltName ?? "";
    return san.replace(/^URI:/, "") || "?";
  } catch {
    return "?";
  }
}

/** Runs the command; exit 1 when any recipe failed (the others are still handled). */
export async function startPending(
  conn: Connection,
  files: string[],
  o: {
    json: boolean;
    dryRun: boolean;
    /** Signs each started manifest with this key (PEM text and the policy's key id). */
    key?: { key_id: string; private_key_pem: string };
    /** Signs each started manifest keylessly (the CI's OIDC identity; URLs of the Sigstore). */
    keyless?: SignOptions;
    /** Image attestation bundles (provenance, SBOM) sent with every started recipe. */
    attestations?: unknown[];
    /** Also send the attestations GitHub holds for each recipe's image digest. */
    github?: GitHubAttestationSource;
  },
  io: Io,
): Promise<ExitCode> {
  const { compileRecipeText } = await import("../recipes/compile-text.ts");
  const { signManifest } = await import("../admission/sign.ts");
  const { imageDigest } = await import("../admission/statement.ts");
  const { githubAttestations } = await import("./github-attestations.ts");
  const client = new EngineClient(conn);
  const outcomes: PendingOutcome[] = [];
  const compiled: {
    file: string;
    text: string;
    name: string;
    digest: string;
    compiled: ReturnType<typeof compileRecipeText>;
  }[] = [];
  for (const file of files) {
    try {
      const text = readFileSync(file, "utf8");
      const c = compileRecipeText(text, file);
      compiled.push({
        file,
        text,
        name: c.manifest.recipe_name,
        digest: c.manifest_digest,
        compiled: c,
      });
    } catch (e) {
      outcomes.push({
        file,
        outcome: "failed",
        message: describe(e),
      });
    }
  }
  let releases: ReleaseSummary[] = [];
  try {
    releases = compiled.length ? await allReleases(client) : [];
  } catch (e) {
    for (const c of compiled)
      outcomes.push({
        file: c.file,
        recipe_name: c.name,
        manifest_digest: c.digest,
        outcome: "failed",
        message: `cannot list the engine's releases: ${describe(e)}`,
      });
    compiled.length = 0;
  }
  // Release id -> the digests it was started from (fetched lazily): its manifest's and, when
  // the engine compiled the plan against the control plane's observed baseline, the recipe's
  // own (`baseline.recipe_manifest_digest`), which is what this command computes.
  const digests = new Map<string, string[]>();
  for (const c of compiled) {
    const base = { file: c.file, recipe_name: c.name, manifest_digest: c.digest };
    try {
      let existing: string | undefined;
      // Oldest first, so the answer names the release that first took this digest.
      const candidates = releases
        .filter((r) => r.recipe_name === c.name)
        .sort((a, b) => a.created_at - b.created_at);
      for (const r of candidates) {
        if (!digests.has(r.id)) {
          const rec = await client.call<{
            manifest_digest: string;
            baseline?: { recipe_manifest_digest?: string } | null;
          }>("GET", `/v1/releases/${r.id}`);
          const recipeDigest = rec.baseline?.recipe_manifest_digest;
          digests.set(r.id, [rec.manifest_digest, ...(recipeDigest ? [recipeDigest] : [])]);
        }
        if (digests.get(r.id)?.includes(c.digest)) {
          existing = r.id;
          break;
        }
      }
      if (existing) {
        outcomes.push({
          ...base,
          outcome: "already_released",
          release: existing,
          message: `manifest ${c.digest.slice(0, 12)} already has release ${existing}`,
        });
        continue;
      }
      if (o.dryRun) {
        outcomes.push({ ...base, outcome: "would_start", message: "no release has this manifest" });
        continue;
      }
      let body = c.text;
      let type = /\.json$/i.test(c.file) ? "application/json" : "application/yaml";
      let attestations = o.attestations ?? [];
      let fetched = "";
      if (o.github) {
        const got = await githubAttestations(o.github, imageDigest(c.compiled.manifest.image));
        attestations = [...attestations, ...got.bundles];
        fetched = `, ${got.bundles.length} attestation(s) of the image from GitHub (${o.github.repository})${got.fetched ? ` (${got.fetched} fetched from bundle_url)` : ""}${got.withoutBundle ? `, ${got.withoutBundle} listed without a bundle or bundle_url (not sent)` : ""}`;
      }
      let signedBy = "";
      if (o.key || o.keyless) {
        // A signed start (docs/trust.md "Sending the bundle"): the recipe text and its bundle.
        const bundle = o.key
          ? await signManifest(c.compiled, { key: o.key })
          : await signManifest(c.compiled, { keyless: o.keyless ?? {} });
        signedBy = o.key
          ? `, manifest signed with key ${o.key.key_id}`
          : `, manifest signed keylessly by ${certificateIdentity(bundle)}`;
        body = JSON.stringify({ recipe: c.text, bundle, attestations });
        type = "application/json";
      } else if (attestations.length) {
        body = JSON.stringify({ recipe: c.text, attestations });
        type = "application/json";
      }
      const res = await client.call<{ id: string; state: string }>(
        "POST",
        "/v1/releases",
        body,
        type,
      );
      outcomes.push({
        ...base,
        outcome: "started",
        release: res.id,
        message: `started ${res.id} (state ${res.state})${signedBy}${o.attestations?.length ? `, ${o.attestations.length} image attestation file(s) sent` : ""}${fetched}`,
      });
    } catch (e) {
      outcomes.push({ ...base, outcome: "failed", message: describe(e) });
    }
  }
  if (o.json) io.out.write(`${JSON.stringify({ recipes: outcomes }, null, 2)}\n`);
  else {
    for (const r of outcomes) io.out.write(`${r.outcome.padEnd(16)} ${r.file}: ${r.message}\n`);
    if (files.length === 0) io.out.write("no recipe files given\n");
  }
  return outcomes.some((r) => r.outcome === "failed") ? EXIT.failed : EXIT.ok;
}
