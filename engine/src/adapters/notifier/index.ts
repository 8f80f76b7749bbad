/** Notifier adapters and the wiring from configuration (docs/engine.md "Notifications"). */
import type { Notifier } from "../../ports/notifier.ts";
import { GitHubCommitCommentNotifier } from "./github.ts";
import { WebhookNotifier } from "./webhook.ts";

export { GitHubCommitCommentNotifier } from "./github.ts";
export { slackBody, WebhookNotifier } from "./webhook.ts";

/**
 * What the notifiers are built from: the channels of `BATON_NOTIFY_*` and the engine's GitHub
 * repository and token (the engine's configuration has this shape; declared here so the
 * adapter depends on nothing above the ports).
 */
export interface NotifierSettings {
  notify?: {
    webhook: { url: string; secret: string } | null;
    slack: { url: string; secret: string | null } | null;
    github: boolean;
  };
  githubRepository: string | null;
  githubToken: string | null;
  githubApiUrl?: string;
  githubTimeoutMs?: number;
}

/** The notifiers `config.notify` turns on, in channel order webhook, slack, github. */
export function notifiersFromConfig(config: NotifierSettings): Notifier[] {
  const n = config.notify;
  if (!n) return [];
  const out: Notifier[] = [];
  if (n.webhook) {
    out.push(new WebhookNotifier({ channel: "webhook", template: "baton", ...n.webhook }));
  }
  if (n.slack) out.push(new WebhookNotifier({ channel: "slack", template: "slack", ...n.slack }));
  if (n.github && config.githubRepository && config.githubToken) {
    out.push(
      new GitHubCommitCommentNotifier({
        repository: config.githubRepository,
        token: config.githubToken,
        ...(config.githubApiUrl ? { baseUrl: config.githubApiUrl } : {}),
        ...(config.githubTimeoutMs ? { timeoutMs: config.githubTimeoutMs } : {}),
      }),
    );
  }
  return out;
}
