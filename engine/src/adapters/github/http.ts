/**
 * The `fetch` every Octokit client of the engine uses: one timeout per request (the App token
 * exchange included) and one pinned REST API version (`X-GitHub-Api-Version`; GitHub answers
 * 400 to a version it does not serve, so a change of version is a deliberate code change).
 */

/** The REST API version every request names. */
export const GITHUB_API_VERSION = "2022-11-28";

/** Public GitHub's REST API root; GitHub Enterprise Server: `https://HOST/api/v3`. */
export const GITHUB_DOT_COM_API = "https://api.github.com";

/** A `fetch` that aborts after `timeoutMs` ms and sets `x-github-api-version`. */
export function gitHubFetch(timeoutMs: number): typeof fetch {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set("x-github-api-version", GITHUB_API_VERSION);
    return fetch(input, {
      ...init,
      headers,
      signal: init?.signal
        ? AbortSignal.any([init.signal, AbortSignal.timeout(timeoutMs)])
        : AbortSignal.timeout(timeoutMs),
    });
  };
}
