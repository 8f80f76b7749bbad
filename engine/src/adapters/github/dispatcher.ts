/**
 * Dispatcher that asks GitHub to run a step run: `POST /repos/{owner}/{repo}/dispatches`
 * (event type `release-step`) through `@octokit/core` (its `request`, without @octokit/rest's
 * table of every endpoint, which would add 83 KB to the Workers bundle), authenticated with a
 * token or as a GitHub App installation.
 *
 * Outcome classification (port contract, engine/src/ports/dispatcher.ts):
 * - 204 -> `{ ok: true }` (accepted only; GitHub returns no run id);
 * - 4xx (422 invalid payload, 404 repo/app not visible, 401 bad credentials, 403 missing
 *   permission) -> not retryable, GitHub's message kept (step run becomes `dispatch_failed`);
 * - 5xx, 429, 403 rate limits, network errors and timeouts -> retryable (send the same step
 *   run again; a duplicate delivery is fenced at preflight).
 * A payload over GitHub's limits is refused locally and never sent (failure case F01).
 *
 * Pacing (pacer.ts): dispatches are paced under GitHub's secondary rate limits; one without a
 * free slot is not sent and comes back as a throttled failure with `retry_at` (its slot), and a
 * 403/429 rate-limit answer blocks every dispatch until GitHub's `retry-after` /
 * `x-ratelimit-reset`. A throttled dispatch was not accepted by GitHub: the step run stays
 * `dispatching` and is sent at `retry_at` (it never counts as a failed try).
 */
import { createAppAuth } from "@octokit/auth-app";
import { Octokit } from "@octokit/core";
import type { Dispatcher, DispatchResult } from "../../ports/dispatcher.ts";
import { DISPATCH_EVENT_TYPE, DispatchPayload } from "../../protocol/messages.ts";
import { GITHUB_DOT_COM_API, gitHubFetch } from "./http.ts";
import { checkDispatchLimits } from "./limits.ts";
import {
  DispatchPacer,
  GITHUB_SECONDARY_LIMITS,
  type PacingLimits,
  rateLimitedUntil,
} from "./pacer.ts";

/** How the dispatcher authenticates to GitHub. */
export type GitHubAuth =
  /** A fine-grained or classic token with `contents: write` on the repository. */
  | { kind: "token"; token: string }
  /** A GitHub App (PEM private key, PKCS#1 or PKCS#8) installed on the repository. */
  | { kind: "app"; appId: string | number; privateKey: string; installationId: string | number };

export interface GitHubDispatcherOptions {
  /** `owner/name` of the repository holding `.github/workflows/release-step.yml`. */
  repository: string;
  auth: GitHubAuth;
  /** REST API root, default `https://api.github.com` (GHES: `https://HOST/api/v3`; tests: a stand-in). */
  baseUrl?: string;
  /** Per HTTP request timeout in ms (token exchange and dispatch each), default 10,000. */
  timeoutMs?: number;
  /** Budgets for dispatches; default GitHub's documented secondary limits (80/min, 500/h, 100 at once). */
  pacing?: PacingLimits;
  /** Clock for pacing (epoch ms); tests pass a fake one. Default `Date.now`. */
  now?: () => number;
}

/** Default per-request timeout (ms). */
export const DEFAULT_GITHUB_TIMEOUT_MS = 10_000;

const COMPONENT = "[github]";

interface ErrorLike {
  status?: number;
  message?: string;
  response?: { status: number; data?: unknown; headers?: Record<string, string | undefined> };
  request?: { url?: string };
  cause?: unknown;
}

function githubMessage(err: ErrorLike): string {
  const data = err.response?.data;
  if (data && typeof data === "object" && "message" in data) {
    const msg = String((data as { message: unknown }).message);
    const errors = (data as { errors?: unknown }).errors;
    return Array.isArray(errors) && errors.length > 0
      ? `${msg} ${errors.map((e) => (typeof e === "string" ? e : JSON.stringify(e))).join("; ")}`
      : msg;
  }
  if (typeof data === "string" && data.trim() !== "") return data.trim().slice(0, 500);
  return err.message ?? "no message";
}

function isTimeout(err: ErrorLike): boolean {
  const names = [err, err.cause].map((e) => (e as { name?: string } | undefined)?.name);
  return names.includes("TimeoutError") || names.includes("AbortError");
}

/** Classifies an Octokit failure into the port's result (exported for unit tests). */
export function classifyGitHubError(
  stepRunId: string,
  error: unknown,
  timeoutMs: number,
  now: number = Date.now(),
): DispatchResult & { ok: false } {
  const err = (error ?? {}) as ErrorLike;
  const during = err.request?.url?.includes("/access_tokens")
    ? " while creating the GitHub App installation access token"
    : "";
  const res = err.response;
  if (!res) {
    const what = isTimeout(err)
      ? `timed out after ${timeoutMs} ms${during}; GitHub may or may not have accepted it`
      : `could not reach GitHub${during}: ${err.message ?? String(error)}`;
    return {
      ok: false,
      retryable: true,
      status: null,
      message: `${COMPONENT} dispatch of ${stepRunId} ${what}; the same step run will be sent again`,
    };
  }
  const status = res.status;
  const msg = githubMessage(err);
  const headers = res.headers ?? {};
  const limitedUntil = rateLimitedUntil(status, headers, now);
  if (limitedUntil !== null) {
    return {
      ok: false,
      retryable: true,
      status,
      retry_at: limitedUntil,
      message: `${COMPONENT} dispatch of ${stepRunId} rate-limited by GitHub${during} (HTTP ${status}): ${msg}; it will be sent again at ${new Date(limitedUntil).toISOString()}`,
    };
  }
  if (status >= 500) {
    return {
      ok: false,
      retryable: true,
      status,
      message: `${COMPONENT} dispatch of ${stepRunId} failed${during} (HTTP ${status}): ${msg}; the same step run will be sent again`,
    };
  }
  return {
    ok: false,
    retryable: false,
    status,
    message: `${COMPONENT} dispatch of ${stepRunId} refused by GitHub${during} (HTTP ${status}): ${msg}${hint(status)}`,
  };
}

function hint(status: number): string {
  switch (status) {
    case 401:
      return "; check GITHUB_TOKEN, or the GitHub App id, private key and installation id";
    case 403:
      return "; the token or App needs `contents: write` on the repository";
    case 404:
      return "; check GITHUB_REPOSITORY and that the token or App installation can see it";
    default:
      return "";
  }
}

/** Dispatches step runs to GitHub Actions with `repository_dispatch`. */
export class GitHubDispatcher implements Dispatcher {
  readonly owner: string;
  readonly repo: string;
  private readonly octokit: Octokit;
  private readonly timeoutMs: number;
  /** Books send slots under the rate limits (exposed for diagnostics and tests). */
  readonly pacer: DispatchPacer;
  private readonly now: () => number;
  private inFlight = 0;
  private readonly waiters: (() => void)[] = [];

  /** @throws Error when `repository` is not `owner/name`. */
  constructor(options: GitHubDispatcherOptions) {
    const m = /^([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+)$/.exec(options.repository);
    if (!m) {
      throw new Error(
        `${COMPONENT} repository ${JSON.stringify(options.repository)} is not owner/name; set GITHUB_REPOSITORY, e.g. acme/models`,
      );
    }
    this.owner = m[1]!;
    this.repo = m[2]!;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_GITHUB_TIMEOUT_MS;
    this.now = options.now ?? Date.now;
    this.pacer = new DispatchPacer(options.pacing ?? GITHUB_SECONDARY_LIMITS, this.now);
    // One timeout for every request Octokit makes, the App token exchange included.
    const timedFetch = gitHubFetch(this.timeoutMs);
    const common = {
      baseUrl: options.baseUrl ?? GITHUB_DOT_COM_API,
      userAgent: "baton-engine",
      request: { fetch: timedFetch },
      log: { debug() {}, info() {}, warn() {}, error() {} },
    };
    const auth = options.auth;
    this.octokit =
      auth.kind === "token"
        ? new Octokit({ ...common, auth: auth.token })
        : new Octokit({
            ...common,
            authStrategy: createAppAuth,
            auth: {
              appId: auth.appId,
              // One-line env files often carry the PEM with literal "\n"; restore the newlines.
              privateKey: auth.privateKey.replace(/\\n/g, "\n"),
              installationId: auth.installationId,
            },
          });
  }

  /** Sends one dispatch. Never throws: refusals and failures are returned as data. */
  async dispatch(payload: DispatchPayload): Promise<DispatchResult> {
    const id = (payload as { step_run_id?: unknown })?.step_run_id;
    const stepRunId = typeof id === "string" ? id : "(no step_run_id)";
    const violations = checkDispatchLimits(DISPATCH_EVENT_TYPE, payload);
    if (violations.length > 0) {
      const detail = violations.map((v) => `${v.field}: ${v.githubMessage} (fix: ${v.fix})`);
      return {
        ok: false,
        retryable: false,
        status: null,
        message: `${COMPONENT} dispatch of ${stepRunId} not sent: over GitHub's limits, GitHub would answer 422: ${detail.join("; ")}`,
      };
    }
    const parsed = DispatchPayload.safeParse(payload);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return {
        ok: false,
        retryable: false,
        status: null,
        message: `${COMPONENT} dispatch of ${stepRunId} not sent: client_payload.${issue?.path.join(".") ?? ""} ${issue?.message ?? "is invalid"}; the engine built an invalid payload`,
      };
    }
    const dispatchSeq = (payload as { release?: { dispatch?: unknown } }).release?.dispatch;
    const slot = this.pacer.take(`${stepRunId}#${String(dispatchSeq)}`);
    if (!slot.now) {
      return {
        ok: false,
        retryable: true,
        status: null,
        retry_at: slot.at,
        message: `${COMPONENT} dispatch of ${stepRunId} held back: ${slot.why}; its slot is at ${new Date(slot.at).toISOString()}`,
      };
    }
    await this.takePlace();
    try {
      await this.octokit.request("POST /repos/{owner}/{repo}/dispatches", {
        owner: this.owner,
        repo: this.repo,
        event_type: DISPATCH_EVENT_TYPE,
        client_payload: payload as unknown as Record<string, unknown>,
      });
      return { ok: true };
    } catch (error) {
      const result = classifyGitHubError(stepRunId, error, this.timeoutMs, this.now());
      if (result.retry_at !== undefined) this.pacer.block(result.retry_at, result.message);
      return result;
    } finally {
      this.givePlace();
    }
  }

  /** Waits for one of `maxConcurrent` request places (GitHub: at most 100 at once). */
  private async takePlace(): Promise<void> {
    if (this.inFlight < this.pacer.limits.maxConcurrent) {
      this.inFlight++;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  private givePlace(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.inFlight--;
  }
}
