/**
 * Webhook notifier: POSTs each notice as JSON to one URL, signed like the runner's callbacks
 * (engine/src/protocol/credential.ts): `x-baton-signature: sha256=<hex HMAC-SHA256 of
 * "<timestamp>." + raw body>` and `x-baton-timestamp`, plus `x-baton-delivery` (stable across
 * retries; deduplicate on it) and `x-baton-event` (the notice kind).
 *
 * Templates: `baton` sends the notice itself (`Notice`, engine/src/domain/notifications.ts);
 * `slack` sends Slack's incoming-webhook shape (`text` + `blocks`), which Slack, Mattermost and
 * most chat tools accept. Outcomes: 2xx delivered; 5xx, 429, network errors and timeouts
 * retryable; any other status is given up (a wrong URL does not get better by retrying).
 */
import type { Notice } from "../../domain/notifications.ts";
import { stepLabel } from "../../domain/notifications.ts";
import type { Notifier, NotifyResult } from "../../ports/notifier.ts";
import { signBody } from "../../protocol/credential.ts";

export const DELIVERY_HEADER = "x-baton-delivery";
export const EVENT_HEADER = "x-baton-event";

export interface WebhookNotifierOptions {
  /** Channel name (`webhook` or `slack`). */
  channel: string;
  url: string;
  /** HMAC secret; null sends no signature (e.g. a Slack URL, whose secret is the URL itself). */
  secret: string | null;
  template: "baton" | "slack";
  /** Per request timeout (ms). Default 10,000. */
  timeoutMs?: number;
  /** Epoch ms for the signature timestamp (tests). */
  now?: () => number;
}

const ICON: Record<Notice["kind"], string> = {
  failed: ":red_circle:",
  paused: ":double_vertical_bar:",
  waiting_for_rerun: ":repeat:",
  waiting_for_promotion: ":raised_hand:",
  abandoned: ":warning:",
  waiting: ":hourglass:",
  needs_operator: ":rotating_light:",
  succeeded: ":white_check_mark:",
  rolled_back: ":leftwards_arrow_with_hook:",
  aborted: ":no_entry:",
  ended: ":white_circle:",
  drift: ":twisted_rightwards_arrows:",
  incident: ":fire:",
  drill_due: ":alarm_clock:",
};

/** The Slack incoming-webhook body of a notice (`text` is the fallback and the push text). */
export function slackBody(n: Notice): Record<string, unknown> {
  const fields = [
    `*Release* <${n.url}|${n.release_id}> · ${n.recipe_name} · model ${n.model}`,
    `*State* ${n.state.replace("_", " ")}${n.cause === "operator_abort" ? " (operator abort)" : ""}`,
  ];
  if (n.step) {
    fields.push(
      `*Step* ${stepLabel(n.step)} ${n.step.state}${n.step.error ? `\n> ${n.step.error.slice(0, 500)}` : ""}`,
    );
  }
  if (n.reason && !n.step?.error) fields.push(`*Why* ${n.reason.slice(0, 500)}`);
  return {
    text: `${ICON[n.kind]} ${n.summary}`,
    blocks: [
      {
        type: "section",
        text: { type: "mrkdwn", text: `${ICON[n.kind]} *${n.summary.slice(0, 200)}*` },
      },
      { type: "section", text: { type: "mrkdwn", text: fields.join("\n") } },
      { type: "context", elements: [{ type: "mrkdwn", text: `<${n.url}|Open the release page>` }] },
    ],
  };
}

export class WebhookNotifier implements Notifier {
  readonly channel: string;
  constructor(private readonly o: WebhookNotifierOptions) {
    this.channel = o.channel;
  }

  async send(notice: Notice, delivery: string): Promise<NotifyResult> {
    const body = JSON.stringify(this.o.template === "slack" ? slackBody(notice) : notice);
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "user-agent": "baton-notifier/1",
      [DELIVERY_HEADER]: delivery,
      [EVENT_HEADER]: notice.kind,
      ...(this.o.secret ? signBody(this.o.secret, body, this.o.now?.() ?? Date.now()) : {}),
    };
    let res: Response;
    try {
      res = await fetch(this.o.url, {
        method: "POST",
        headers,
        body,
        redirect: "error",
        signal: AbortSignal.timeout(this.o.timeoutMs ?? 10_000),
      });
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      const why = e.name === "TimeoutError" ? "timed out" : (e.cause?.code ?? e.message);
      return {
        ok: false,
        retryable: true,
        status: null,
        message: `[notifier] ${this.channel}: ${why}`,
      };
    }
    const text = await res.text().catch(() => "");
    if (res.ok) return { ok: true, status: res.status };
    const retryable = res.status >= 500 || res.status === 429 || res.status === 408;
    return {
      ok: false,
      retryable,
      status: res.status,
      message: `[notifier] ${this.channel} answered HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ""}`,
    };
  }
}
