/**
 * Image attestations GitHub holds for an image digest (what `actions/attest-build-provenance`
 * and `actions/attest-sbom` stored), read through the attestations API with Octokit:
 * `GET /repos/{owner}/{repo}/attestations/sha256:<digest>`. `start-pending
 * --github-attestations` sends them with the recipe so admission can check provenance and
 * SBOM (docs/trust.md "Image attestations").
 *
 * GitHub lists an attestation with its Sigstore bundle inline (`bundle`), or only by reference
 * (`bundle` null, `bundle_url`: a pre-signed, time-limited URL on blob storage that serves the
 * bundle Snappy-compressed, `application/x-snappy`). A `bundle_url` is fetched without the
 * GitHub token (it would leak to the blob host), bounded in time and size, over https (plain
 * http only to a loopback address, as test stand-ins serve it; every redirect hop is held to the
 * same rule, at most `MAX_REDIRECTS` of them), and decompressed with
 * `snappyjs` (plain JSON is taken as it is).
 */
import { Octokit } from "@octokit/rest";
import { uncompress } from "snappyjs";
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

/** Per request, ms (the list and each bundle_url). */
const TIMEOUT_MS = 30_000;
/** A bundle_url's body and its decompressed bundle, bytes at most. */
export const BUNDLE_MAX_BYTES = 16 * 1024 * 1024;

/** One entry of the list as GitHub documents it (@octokit/openapi `repos/list-attestations`). */
interface ListedAttestation {
  bundle?: unknown;
  bundle_url?: string;
  repository_id?: number;
  initiator?: string;
}

const LOOPBACK = new Set(["127.0.0.1", "[::1]", "localhost"]);

/** Redirect statuses followed (by hand, each hop re-checked), at most `MAX_REDIRECTS` of them. */
const REDIRECT = new Set([301, 302, 303, 307, 308]);
export const MAX_REDIRECTS = 5;

/**
 * Why `u` may not be fetched (`"<scheme>//<host> is refused: ..."`), or null when it may: https,
 * or plain http to a loopback address. A redirect (`from` set) reaches loopback only from
 * loopback, so a remote host cannot send the fetch into this machine.
 */
function urlRefusal(u: URL, from: URL | null): string | null {
  const loopback = LOOPBACK.has(u.hostname);
  if (u.protocol !== "https:" && !(u.protocol === "http:" && loopback)) {
    return `${u.protocol}//${u.host} is refused: only https (or http to a loopback address) is fetched`;
  }
  if (from && loopback && !LOOPBACK.has(from.hostname)) {
    return `${u.protocol}//${u.host} is refused: a redirect from ${from.host} may not lead to a loopback address`;
  }
  return null;
}

/** Reads `res`'s body, refusing more than `max` bytes (by Content-Length, then as it streams). */
async function boundedBody(res: Response, max: number): Promise<Uint8Array> {
  const declared = Number(res.headers.get("content-length") ?? "");
  if (Number.isFinite(declared) && declared > max) {
    await res.body?.cancel();
    throw new Error(`its body is ${declared} bytes, more than the ${max} allowed`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body?.getReader();
  if (!reader) return new Uint8Array();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      throw new Error(`its body is more than the ${max} bytes allowed`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/**
 * The Sigstore bundle at `bundle_url`: fetched without credentials within `TIMEOUT_MS` (all
 * hops together), following at most `MAX_REDIRECTS` redirects each re-checked against the
 * https-or-loopback rule, at most `BUNDLE_MAX_BYTES` compressed and decompressed,
 * Snappy-decoded unless it is plain JSON.
 * @throws Error saying what went wrong (URL or redirect refused, too many redirects, HTTP
 *   status, timeout, size, not a bundle).
 */
export async function fetchBundle(url: string): Promise<unknown> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error("bundle_url is not a URL");
  }
  const refused = urlRefusal(u, null);
  if (refused) throw new Error(`bundle_url ${refused}`);
  // Redirects are followed here, one hop at a time, so that every hop meets the rule the
  // bundle_url met (fetch's own `follow` would go on to plain http or to any host).
  const signal = AbortSignal.timeout(TIMEOUT_MS);
  let res: Response;
  for (let hop = 0; ; hop++) {
    try {
      res = await fetch(u, {
        redirect: "manual",
        signal,
        headers: { accept: "application/x-snappy, application/json" },
      });
    } catch (e) {
      const err = e as Error;
      throw new Error(
        err.name === "TimeoutError"
          ? `no answer within ${TIMEOUT_MS} ms`
          : `cannot reach it (${err.message})`,
      );
    }
    if (!REDIRECT.has(res.status)) break;
    await res.body?.cancel();
    const location = res.headers.get("location");
    if (!location) throw new Error(`HTTP ${res.status} without a Location to follow`);
    let next: URL;
    try {
      next = new URL(location, u);
    } catch {
      throw new Error(`redirect ${hop + 1} (HTTP ${res.status}) is to something that is not a URL`);
    }
    if (hop + 1 > MAX_REDIRECTS) {
      throw new Error(
        `more than ${MAX_REDIRECTS} redirects (last to ${next.protocol}//${next.host}${next.pathname}); a bundle_url is fetched after at most ${MAX_REDIRECTS}`,
      );
    }
    const hopRefused = urlRefusal(next, u);
    if (hopRefused) throw new Error(`redirect ${hop + 1} (HTTP ${res.status}) to ${hopRefused}`);
    u = next;
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new Error(`HTTP ${res.status}`);
  }
  const body = await boundedBody(res, BUNDLE_MAX_BYTES);
  const json = body[0] === 0x7b; // "{": served uncompressed
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(
      json ? body : uncompress(body, BUNDLE_MAX_BYTES),
    );
  } catch (e) {
    throw new Error(`its body is neither JSON nor a Snappy block (${(e as Error).message})`);
  }
  let bundle: unknown;
  try {
    bundle = JSON.parse(text);
  } catch (e) {
    throw new Error(`its bundle is not JSON (${(e as Error).message})`);
  }
  if (!bundle || typeof bundle !== "object" || Array.isArray(bundle) || !("mediaType" in bundle)) {
    throw new Error("it is not a Sigstore bundle (no mediaType)");
  }
  return bundle;
}

/**
 * The Sigstore bundles GitHub holds for `sha256:<digest>` (at most 100, one page): inline
 * ones as listed, the others fetched from their `bundle_url`. None (404) is an empty list;
 * admission then names what is missing. `withoutBundle` counts entries with neither.
 * @throws Error naming the repository and the status when the API refuses or cannot be reached,
 *   or naming the attestation (its position, repository id, URL host) whose bundle_url fails.
 */
export async function githubAttestations(
  src: GitHubAttestationSource,
  digest: string,
): Promise<{ bundles: unknown[]; withoutBundle: number; fetched: number }> {
  const [owner, repo] = src.repository.split("/") as [string, string];
  const octokit = new Octokit({
    auth: src.token,
    baseUrl: src.apiUrl.replace(/\/+$/, ""),
    userAgent: "baton-cli",
    request: { fetch: gitHubFetch(TIMEOUT_MS), retries: 0 },
    log: { debug() {}, info() {}, warn() {}, error() {} },
  });
  let list: ListedAttestation[];
  try {
    const res = await octokit.rest.repos.listAttestations({
      owner,
      repo,
      subject_digest: `sha256:${digest}`,
      per_page: 100,
    });
    list = (res.data.attestations ?? []) as ListedAttestation[];
  } catch (e) {
    const status = (e as { status?: number }).status;
    if (status === 404) return { bundles: [], withoutBundle: 0, fetched: 0 };
    throw new Error(
      `cannot read the attestations of sha256:${digest.slice(0, 12)}… in ${src.repository} (${status ? `HTTP ${status}` : (e as Error).message}); the job needs permissions: attestations: read and GITHUB_TOKEN`,
    );
  }
  const bundles: unknown[] = [];
  let withoutBundle = 0;
  let fetched = 0;
  for (const [i, a] of list.entries()) {
    if (a.bundle !== undefined && a.bundle !== null) {
      bundles.push(a.bundle);
      continue;
    }
    if (typeof a.bundle_url !== "string" || a.bundle_url === "") {
      withoutBundle++;
      continue;
    }
    try {
      bundles.push(await fetchBundle(a.bundle_url));
      fetched++;
    } catch (e) {
      let where = "";
      try {
        const u = new URL(a.bundle_url);
        where = ` at ${u.protocol}//${u.host}${u.pathname}`;
      } catch {}
      throw new Error(
        `cannot fetch the bundle of attestation ${i + 1} of ${list.length} (repository_id ${a.repository_id ?? "?"}) of sha256:${digest.slice(0, 12)}… in ${src.repository} from its bundle_url${where}: ${(e as Error).message}; bundle_url links expire: run the job again, or check that this machine reaches GitHub's blob storage`,
      );
    }
  }
  return { bundles, withoutBundle, fetched };
}
