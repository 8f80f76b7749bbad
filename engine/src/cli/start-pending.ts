/**
 * `baton start-pending <recipe…>`: the recipe workflow's start on the default branch. It looks
 * at every recipe in the tree, not at a `before..HEAD` diff, so a run GitHub cancelled, a
 * force-push or a zero `before` (new branch) cannot lose a merged recipe. For each recipe it
 * asks the engine what stands for the recipe's model (the model's source mark and the release
 * that defines its lanes) and decides with `pendingDecision` (domain/source-order.ts,
 * docs/lifecycle.md "Merge order is release order"):
 * - `already_released`: a true repeat, the recipe's content is that of the release standing for
 *   the newest commit, or the fleet runs it already; nothing is started;
 * - `superseded`: with `--commit`, the commit is older (by git history; by commit time when the
 *   histories are unrelated) than the newest the model's mark came from; nothing is started and
 *   the line names the release that stands (id, commit, image);
 * - `started`: anything else, a revert to earlier content included, sent with the commit
 *   (`source`), so the engine refuses it too if a newer commit got there first.
 * A recipe that fails the contract check, an engine that cannot be listed, a start the engine
 * refuses, or a superseded recipe fails the command (exit 1) after the other recipes were
 * handled; nothing is skipped silently.
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
import type { SerializedBundle } from "@sigstore/bundle";
import type { SignOptions } from "sigstore";
import {
  type ComparedRelease,
  pendingDecision,
  shortCommit,
  sourceOrder,
  sourceRefusalWords,
  standingRelease,
} from "../domain/source-order.ts";
import type { ReleaseState } from "../domain/states.ts";
import type { ReleaseSummary } from "../ports/store.ts";
import { readRecipeFileText } from "../recipes/read-file.ts";
import { type Connection, EngineClient } from "./client.ts";
import type { Io } from "./commands.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import type { GitSource } from "./git-source.ts";
import type { GitHubAttestationSource } from "./github-attestations.ts";

/** The newest release of `model` in `releases` (by creation, then number), any state. */
function newestRelease(releases: readonly ReleaseSummary[], model: string): ReleaseSummary | null {
  let best: ReleaseSummary | null = null;
  for (const r of releases) {
    if (r.model !== model) continue;
    if (
      !best ||
      r.created_at > best.created_at ||
      (r.created_at === best.created_at && Number(r.id.slice(1)) > Number(best.id.slice(1)))
    )
      best = r;
  }
  return best;
}

/** A model's source mark as `GET /v1/models/:model/source-mark` answers it. */
interface MarkJson {
  commit: string;
  committed_at: number;
  release: string;
  at: number;
}

/** One line: the error's message and each of its problems (path: message). */
function describe(e: unknown): string {
  const err = e as Error & { problems?: { path?: string; message?: string }[] };
  const problems = (err.problems ?? []).map((p) => `${p.path ?? ""}: ${p.message ?? ""}`);
  return [err.message, ...problems].join("; ");
}

/** Most list pages read (200 releases each) before giving up loudly. */
const MAX_PAGES = 500;

/**
 * One recipe's outcome. `release` is the release that stands (already_released, superseded) or
 * the new one (started).
 */
export interface PendingOutcome {
  file: string;
  recipe_name?: string;
  manifest_digest?: string;
  outcome: "already_released" | "superseded" | "started" | "would_start" | "failed";
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
    /**
     * The commit the recipe files come from (`--commit`): each start carries it, and a commit
     * older than a model's source mark is `superseded`. Absent: no ordering, no mark moved.
     */
    git?: GitSource;
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
      const text = readRecipeFileText(file);
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
  // Release id -> what a recipe is compared with (fetched lazily): its state, image and the
  // digests it was started from, its manifest's and, when the engine compiled the plan against
  // the control plane's observed baseline, the recipe's own (`baseline.recipe_manifest_digest`),
  // which is what this command computes.
  const seen = new Map<string, ComparedRelease & { image: string }>();
  const compared = async (id: string) => {
    let r = seen.get(id);
    if (!r) {
      const rec = await client.call<{
        state: ReleaseState;
        manifest_digest: string;
        manifest: { image: string };
        baseline?: { recipe_manifest_digest?: string } | null;
      }>("GET", `/v1/releases/${id}`);
      const recipeDigest = rec.baseline?.recipe_manifest_digest;
      r = {
        id,
        state: rec.state,
        image: rec.manifest.image,
        digests: [rec.manifest_digest, ...(recipeDigest ? [recipeDigest] : [])],
      };
      seen.set(id, r);
    }
    return r;
  };
  const source = o.git?.position;
  for (const c of compiled) {
    const base = { file: c.file, recipe_name: c.name, manifest_digest: c.digest };
    try {
      const fileProblem = o.git?.fileProblem(c.file);
      if (fileProblem) {
        outcomes.push({ ...base, outcome: "failed", message: `[cli] ${fileProblem}` });
        continue;
      }
      const model = c.compiled.manifest.model;
      const { mark } = await client.call<{ mark: MarkJson | null }>(
        "GET",
        `/v1/models/${encodeURIComponent(model)}/source-mark`,
      );
      // Without a mark yet (releases from before marks, or hand starts), the model's newest
      // release stands in for the mark's: a rolled-back recipe still on main is not retried.
      const newest = mark ? null : newestRelease(releases, model);
      const head = mark ? await compared(mark.release) : newest ? await compared(newest.id) : null;
      const standingSummary = standingRelease(releases, model);
      const standing = standingSummary ? await compared(standingSummary.id) : null;
      const markPosition = mark ? { commit: mark.commit, committed_at: mark.committed_at } : null;
      const order =
        o.git && source && markPosition
          ? sourceOrder(o.git.ancestry(markPosition.commit), source, markPosition)
          : "none";
      const decision = pendingDecision({ digest: c.digest, order, head, standing });
      const claim = source ? { ...source, after: mark?.commit ?? null } : null;
      if (decision.kind === "superseded" && mark && claim) {
        const r = head ?? (await compared(decision.release));
        outcomes.push({
          ...base,
          outcome: "superseded",
          release: decision.release,
          message: sourceRefusalWords(
            "older",
            claim,
            { ...mark, model, release_id: mark.release },
            { id: r.id, state: r.state, image: r.image },
            "cli",
          ),
        });
        continue;
      }
      if (decision.kind === "repeat") {
        const r = await compared(decision.release);
        let message =
          decision.of === "head"
            ? `manifest ${c.digest.slice(0, 12)} already has release ${r.id} (${r.state})${mark ? `, which stands for commit ${shortCommit(mark.commit)}` : ""}`
            : `the fleet runs manifest ${c.digest.slice(0, 12)} already: release ${r.id} (${r.state}) stands for model ${model}`;
        // The mark moves to this commit (standing for that release), so that a later re-run of
        // an older commit is refused even though nothing was started here.
        if (claim && !o.dryRun && (order === "newer" || order === "none")) {
          try {
            await client.call(
              "POST",
              `/v1/models/${encodeURIComponent(model)}/source-mark`,
              JSON.stringify({ ...claim, release: r.id }),
            );
            message += `; model ${model} now marked at commit ${shortCommit(claim.commit)}`;
          } catch (e) {
            outcomes.push({
              ...base,
              outcome: e instanceof CliError && e.code === "superseded" ? "superseded" : "failed",
              release: r.id,
              message: describe(e),
            });
            continue;
          }
        }
        outcomes.push({ ...base, outcome: "already_released", release: r.id, message });
        continue;
      }
      if (o.dryRun) {
        outcomes.push({
          ...base,
          outcome: "would_start",
          message: `manifest ${c.digest.slice(0, 12)} is not what stands for model ${model}`,
        });
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
        body = JSON.stringify({
          recipe: c.text,
          bundle,
          attestations,
          ...(claim ? { source: claim } : {}),
        });
        type = "application/json";
      } else if (attestations.length || claim) {
        body = JSON.stringify({
          recipe: c.text,
          attestations,
          ...(claim ? { source: claim } : {}),
        });
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
        message: `started ${res.id} (state ${res.state})${claim ? ` from commit ${shortCommit(claim.commit)}` : ""}${signedBy}${o.attestations?.length ? `, ${o.attestations.length} image attestation file(s) sent` : ""}${fetched}`,
      });
    } catch (e) {
      // The engine's own ordering check (a newer commit got there first) is not a failure of
      // this recipe but the same outcome as the one found here.
      const superseded = e instanceof CliError && e.code === "superseded";
      outcomes.push({
        ...base,
        outcome: superseded ? "superseded" : "failed",
        message: describe(e),
      });
    }
  }
  if (o.json) io.out.write(`${JSON.stringify({ recipes: outcomes }, null, 2)}\n`);
  else {
    for (const r of outcomes) io.out.write(`${r.outcome.padEnd(16)} ${r.file}: ${r.message}\n`);
    if (files.length === 0) io.out.write("no recipe files given\n");
  }
  return outcomes.some((r) => r.outcome === "failed" || r.outcome === "superseded")
    ? EXIT.failed
    : EXIT.ok;
}
