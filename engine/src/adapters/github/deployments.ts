/**
 * GitHub adapter of the deployments port: one GitHub deployment per release, a deployment status
 * per move, so the repository's Deployments page shows the fleet's history
 * (docs/engine.md "GitHub Deployments").
 *
 * - The deployment: `POST /repos/{owner}/{repo}/deployments` with the release's environment and
 *   ref, `task: deploy:baton-<release>`, `auto_merge: false` (never merge anything),
 *   `required_contexts: []` (the contract check already ran) and the release in `payload.baton`.
 *   Found again by `GET …/deployments?environment=&task=` and the payload's release uid, so a
 *   repeat after a lost answer never creates a second one.
 * - The status: `POST …/deployments/{id}/statuses` with `log_url` = the release page and a
 *   description of at most 140 characters. A status that ranks below the deployment's latest
 *   (in_progress < failure, success < error < inactive) is skipped: a retried old status never
 *   overwrites a newer one.
 * - `success` then marks the environment's previous successful Baton deployment `inactive`
 *   (superseded; GitHub's `auto_inactive` skips production environments, so Baton does it).
 *
 * Requests go through `@octokit/core`'s `request` (as the dispatcher's do). Its JSON decoder
 * gives integers past 2^53 - 1 as bigints; deployment ids are far below that and are read as
 * numbers.
 *
 * Outcomes like the notifiers': network errors, timeouts, 5xx, 429 and rate-limit 403s are
 * retryable; other 4xx are given up with GitHub's message and the fix.
 */
import { createAppAuth } from "@octokit/auth-app";
import { Octokit } from "@octokit/core";
import type { DeploymentReport, DeploymentStatusState } from "../../domain/types.ts";
import type { DeploymentTracker } from "../../ports/deployments.ts";
import type { NotifyResult } from "../../ports/notifier.ts";
import type { GitHubAuth } from "./dispatcher.ts";
import { GITHUB_DOT_COM_API, gitHubFetch } from "./http.ts";

export interface GitHubDeploymentsOptions {
  /** `owner/name` of the repository whose Deployments page shows the releases. */
  repository: string;
  /** Token (`deployments: write`) or GitHub App installation (Deployments: read and write). */
  auth: GitHubAuth;
  /** REST API root; default `https://api.github.com` (GHES: `https://HOST/api/v3`). */
  baseUrl?: string;
  /** Per request timeout (ms). Default 10,000. */
  timeoutMs?: number;
}

/** Deployments scanned for a superseded success (newest first); older ones were inactivated by it. */
const SUPERSEDE_SCAN = 30;

const RANK: Record<string, number> = {
  queued: 0,
  pending: 0,
  in_progress: 1,
  failure: 2,
  success: 2,
  error: 3,
  inactive: 4,
};

/** The deployment task of a release: `deploy:baton-<release id>`. */
export function deploymentTask(releaseId: string): string {
  return `deploy:baton-${releaseId}`;
}

interface ErrorLike {
  status?: number;
  message?: string;
  response?: { status: number; data?: unknown; headers?: Record<string, string | undefined> };
}

function failure(err: unknown, what: string): NotifyResult & { ok: false } {
  const e = (err ?? {}) as ErrorLike;
  const status =
    e.response?.status ?? (typeof e.status === "number" && e.status > 0 ? e.status : null);
  const data = e.response?.data as { message?: unknown; errors?: unknown } | undefined;
  const gh =
    data && typeof data === "object" && typeof data.message === "string"
      ? `${data.message}${Array.isArray(data.errors) && data.errors.length > 0 ? ` ${JSON.stringify(data.errors).slice(0, 300)}` : ""}`
      : (e.message ?? String(err));
  const rateLimited =
    status === 403 &&
    (e.response?.headers?.["x-ratelimit-remaining"] === "0" || /rate limit/i.test(gh));
  const retryable = status === null || status >= 500 || status === 429 || rateLimited;
  let fix = "";
  if (status === 401) fix = "; check GITHUB_TOKEN or the GitHub App id, key and installation";
  else if (status === 403 && !rateLimited)
    fix = "; the token or App needs `deployments: write` on the repository";
  else if (status === 404) fix = "; check GITHUB_REPOSITORY and that the credential can see it";
  else if (status === 422 && /ref/i.test(gh))
    fix =
      "; set BATON_GITHUB_DEPLOYMENT_REF to a branch that exists, or pin tool_revision in the recipe";
  return {
    ok: false,
    retryable,
    status,
    message: `[github] ${what} ${status ? `answered HTTP ${status}` : "failed"}: ${gh}${fix}`,
  };
}

/** Reports releases as GitHub deployments and deployment statuses. */
export class GitHubDeployments implements DeploymentTracker {
  private readonly octokit: Octokit;
  readonly owner: string;
  readonly repo: string;
  /** One report at a time per release (the in_progress and the next status never race). */
  private readonly chains = new Map<string, Promise<unknown>>();

  /** @throws Error when `repository` is not `owner/name`. */
  constructor(o: GitHubDeploymentsOptions) {
    const m = /^([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+)$/.exec(o.repository);
    if (!m) {
      throw new Error(
        `[github] repository ${JSON.stringify(o.repository)} is not owner/name; set GITHUB_REPOSITORY, e.g. acme/models`,
      );
    }
    this.owner = m[1]!;
    this.repo = m[2]!;
    const common = {
      baseUrl: o.baseUrl ?? GITHUB_DOT_COM_API,
      userAgent: "baton-engine",
      request: { fetch: gitHubFetch(o.timeoutMs ?? 10_000) },
      log: { debug() {}, info() {}, warn() {}, error() {} },
    };
    this.octokit =
      o.auth.kind === "token"
        ? new Octokit({ ...common, auth: o.auth.token })
        : new Octokit({
            ...common,
            authStrategy: createAppAuth,
            auth: {
              appId: o.auth.appId,
              privateKey: o.auth.privateKey.replace(/\\n/g, "\n"),
              installationId: o.auth.installationId,
            },
          });
  }

  report(r: DeploymentReport): Promise<NotifyResult> {
    const key = `${r.release_id}.${r.uid ?? ""}`;
    const prev = this.chains.get(key) ?? Promise.resolve();
    const next = prev.then(
      () => this.reportNow(r),
      () => this.reportNow(r),
    );
    this.chains.set(key, next);
    void next.finally(() => {
      if (this.chains.get(key) === next) this.chains.delete(key);
    });
    return next;
  }

  private async reportNow(r: DeploymentReport): Promise<NotifyResult> {
    const base = { owner: this.owner, repo: this.repo };
    let id: number;
    try {
      const found = await this.find(r);
      if (found !== null) id = found;
      else if (r.state === "in_progress" || r.state === "success" || r.state === "failure") {
        const res = await this.octokit.request("POST /repos/{owner}/{repo}/deployments", {
          ...base,
          ref: r.ref,
          task: deploymentTask(r.release_id),
          auto_merge: false,
          required_contexts: [],
          environment: r.environment,
          description: `${r.recipe_name}: ${r.model} → ${r.image}`.slice(0, 400),
          payload: {
            baton: {
              release_id: r.release_id,
              uid: r.uid,
              recipe: r.recipe_name,
              model: r.model,
              image: r.image,
            },
          },
        });
        if (res.status !== 201 || !("id" in res.data)) {
          return {
            ok: false,
            retryable: false,
            status: res.status,
            message: `[github] creating the deployment of ${r.release_id} answered HTTP ${res.status} without a deployment: ${JSON.stringify(res.data).slice(0, 200)}`,
          };
        }
        id = Number(res.data.id);
      } else {
        // Nothing to mark inactive or in error: the release never showed as a deployment.
        return { ok: true, status: null };
      }
    } catch (err) {
      return failure(err, `the deployment of ${r.release_id} in ${r.environment}`);
    }
    try {
      const latest = await this.latestStatus(id);
      if (!statusMayFollow(latest?.state ?? null, r.state)) return { ok: true, status: null };
      const res = await this.octokit.request(
        "POST /repos/{owner}/{repo}/deployments/{deployment_id}/statuses",
        {
          ...base,
          deployment_id: id,
          state: r.state,
          log_url: r.log_url,
          description: r.description,
          environment: r.environment,
          auto_inactive: false,
        },
      );
      if (r.state === "success") {
        const gone = await this.supersede(r, id);
        if (!gone.ok) return gone;
      }
      return { ok: true, status: res.status };
    } catch (err) {
      return failure(err, `the ${r.state} status of ${r.release_id} (deployment ${id})`);
    }
  }

  /** The release's deployment id, or null when it has none yet. */
  private async find(r: DeploymentReport): Promise<number | null> {
    const res = await this.octokit.request("GET /repos/{owner}/{repo}/deployments", {
      owner: this.owner,
      repo: this.repo,
      environment: r.environment,
      task: deploymentTask(r.release_id),
      per_page: 100,
    });
    // Oldest first: if two engines ever created one each, both report to the same one.
    const mine = res.data
      .filter((d) => {
        const p = d.payload as { baton?: { release_id?: unknown; uid?: unknown } } | string;
        return (
          typeof p === "object" &&
          p?.baton?.release_id === r.release_id &&
          (p.baton.uid ?? null) === r.uid
        );
      })
      .map((d) => Number(d.id))
      .sort((a, b) => a - b);
    return mine[0] ?? null;
  }

  /** The newest status of deployment `id`, or null when it has none. */
  private async latestStatus(id: number): Promise<{ state: string; log_url: string } | null> {
    const res = await this.octokit.request(
      "GET /repos/{owner}/{repo}/deployments/{deployment_id}/statuses",
      {
        owner: this.owner,
        repo: this.repo,
        deployment_id: id,
        per_page: 1,
      },
    );
    const s = res.data[0];
    return s ? { state: s.state, log_url: s.log_url ?? s.target_url ?? "" } : null;
  }

  /** Marks the environment's previous successful Baton deployment(s) inactive. */
  private async supersede(r: DeploymentReport, current: number): Promise<NotifyResult> {
    try {
      const res = await this.octokit.request("GET /repos/{owner}/{repo}/deployments", {
        owner: this.owner,
        repo: this.repo,
        environment: r.environment,
        per_page: SUPERSEDE_SCAN,
      });
      for (const d of res.data) {
        const did = Number(d.id);
        if (did >= current || !d.task.startsWith("deploy:baton-")) continue;
        const latest = await this.latestStatus(did);
        if (latest?.state !== "success") continue;
        await this.octokit.request(
          "POST /repos/{owner}/{repo}/deployments/{deployment_id}/statuses",
          {
            owner: this.owner,
            repo: this.repo,
            deployment_id: did,
            state: "inactive",
            ...(latest.log_url ? { log_url: latest.log_url } : {}),
            description: `superseded by ${r.release_id}`.slice(0, 140),
            auto_inactive: false,
          },
        );
        // Each success inactivates the one before it: older ones are inactive already.
        break;
      }
      return { ok: true, status: null };
    } catch (err) {
      return failure(err, `marking the deployment before ${r.release_id} inactive`);
    }
  }
}

/** Exported for tests: whether a status of `state` may follow one of `latest`. */
export function statusMayFollow(latest: string | null, state: DeploymentStatusState): boolean {
  if (latest === null) return true;
  if (latest === state) return false;
  return (RANK[state] ?? 0) > (RANK[latest] ?? 0) || latest === "in_progress";
}
