/**
 * Image attestations GitHub holds for an image digest (what `actions/attest-build-provenance`
 * and `actions/attest-sbom` stored), read through the attestations API with Octokit:
 * `GET /repos/{owner}/{repo}/attestations/sha256:<digest>`. `start-pending
 * --github-attestations` sends them with the recipe so admission can check provenance and
 * SBOM (docs/trust.md "Image attestations").
 */
import { Octokit } from "@octokit/rest";
import { gitHubFetch } from "../adapters/github/http.ts";

/** Where to read attestations: the API, the repository that attested the build, a token. */
export interface GitHubAttestationSource {
  /** API base URL (GITHUB_API_URL), e.g. https://api.github.com. */
  apiUrl: string;
  /** owner/name of the repository whose workflow attested the image. */
  repository: string;
  /** A token that may read its attestations (`attestations: read`). */
  token: string;
}

/** Per request, ms. */
const TIMEOUT_MS = 30_000;

/**
 * The Sigstore bundles GitHub holds for `sha256:<digest>` (at most 100, one page). None
 * (404) is an empty list; admission then names what is missing.
 * @throws Error naming the repository and the status when the API refuses or cannot be reached.
 */
export async function githubAttestations(
  src: GitHubAttestationSource,
  digest: string,
): Promise<{ bundles: unknown[]; withoutBundle: number }> {
  const [owner, repo] = src.repository.split("/") as [string, string];
  const octokit = new Octokit({
    auth: src.token,
    baseUrl: src.apiUrl.replace(/\/+$/, ""),
    userAgent: "baton-cli",
    request: { fetch: gitHubFetch(TIMEOUT_MS), retries: 0 },
    log: { debug() {}, info() {}, warn() {}, error() {} },
  });
  try {
    const res = await octokit.rest.repos.listAttestations({
      owner,
      repo,
      subject_digest: `sha256:${digest}`,
      per_page: 100,
    });
    const list = (res.data.attestations ?? []) as { bundle?: unknown }[];
    const bundles = list.map((a) => a.bundle).filter((b) => b !== undefined && b !== null);
    return { bundles, withoutBundle: list.length - bundles.length };
  } catch (e) {
    const status = (e as { status?: number }).status;
    if (status === 404) return { bundles: [], withoutBundle: 0 };
    throw new Error(
      `cannot read the attestations of sha256:${digest.slice(0, 12)}… in ${src.repository} (${status ? `HTTP ${status}` : (e as Error).message}); the job needs permissions: attestations: read and GITHUB_TOKEN`,
    );
  }
}
