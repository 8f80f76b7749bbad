/**
 * GitHub notifier: a commit comment on the commit the release's tools ran from
 * (`POST /repos/{owner}/{repo}/commits/{sha}/comments`), through Octokit with the engine's
 * GitHub token. A notice with no known commit (nothing ran yet and no `tool_revision`) is
 * given up with a message, never retried. Outcomes like the dispatcher's: 5xx, 429 and network
 * errors retryable; other 4xx given up.
 */
import { Octokit } from "@octokit/rest";
import type { Notice } from "../../domain/notifications.ts";
import { stepLabel } from "../../domain/notifications.ts";
import type { Notifier, NotifyResult } from "../../ports/notifier.ts";
import { gitHubFetch } from "../github/http.ts";

export interface GitHubNotifierOptions {
  /** `owner/name`. */
  repository: string;
  token: string;
  /** REST API root (GHES or a stand-in); default `https://api.github.com`. */
  baseUrl?: string;
  timeoutMs?: number;
}

/** The Markdown body of a commit comment for `n`; `delivery` rides in an HTML comment. */
export function commentBody(n: Notice, delivery: string): string {
  const lines = [`**[${n.release_id}](${n.url})** ${n.summary}`, ""];
  lines.push(`- state: \`${n.state}\`${n.cause === "operator_abort" ? " (operator abort)" : ""}`);
  if (n.step) lines.push(`- ${stepLabel(n.step)}: \`${n.step.state}\``);
  if (n.step?.error) lines.push(`- error: ${n.step.error.slice(0, 500)}`);
  else if (n.reason) lines.push(`- why: ${n.reason.slice(0, 500)}`);
  lines.push(`- image: \`${n.image}\``, "", `<!-- baton-delivery: ${delivery} -->`);
  return lines.join("\n");
}

export class GitHubCommitCommentNotifier implements Notifier {
  readonly channel = "github";
  private readonly octokit: Octokit;
  private readonly owner: string;
  private readonly repo: string;

  constructor(o: GitHubNotifierOptions) {
    const [owner, repo] = o.repository.split("/");
    this.owner = owner ?? "";
    this.repo = repo ?? "";
    this.octokit = new Octokit({
      auth: o.token,
      ...(o.baseUrl ? { baseUrl: o.baseUrl } : {}),
      request: { fetch: gitHubFetch(o.timeoutMs ?? 10_000) },
      log: { debug() {}, info() {}, warn() {}, error() {} },
    });
  }

  async send(notice: Notice, delivery: string): Promise<NotifyResult> {
    if (!notice.commit_sha) {
      return {
        ok: false,
        retryable: false,
        status: null,
        message:
          "[notifier] github: no commit to comment on (no step ran and the recipe pins no tool_revision)",
      };
    }
    try {
      const res = await this.octokit.rest.repos.createCommitComment({
        owner: this.owner,
        repo: this.repo,
        commit_sha: notice.commit_sha,
        body: commentBody(notice, delivery),
      });
      return { ok: true, status: res.status };
    } catch (err) {
      const e = err as { status?: number; message?: string };
      const status = typeof e.status === "number" && e.status > 0 ? e.status : null;
      const retryable = status === null || status >= 500 || status === 429;
      return {
        ok: false,
        retryable,
        status,
        message: `[notifier] github ${status ? `answered HTTP ${status}` : "unreachable"}: ${e.message ?? "no message"}`,
      };
    }
  }
}
