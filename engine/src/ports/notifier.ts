/**
 * Notifier port: tells people about a release (a webhook, Slack, a GitHub commit comment).
 * Notices are decided in the transition's commit and written to the outbox in the same
 * transaction (`NotifyEffect`); the reconciler performs them after the commit, retries with
 * backoff, and never holds a transition up (docs/engine.md "Notifications").
 */
import type { Notice } from "../domain/notifications.ts";

export type NotifyResult =
  | { ok: true; status: number | null }
  /** retryable: network error, timeout, 5xx or 429: try again later; otherwise give up. */
  | { ok: false; retryable: boolean; status: number | null; message: string };

export interface Notifier {
  /** Channel name used in configuration and in the outbox (`webhook`, `slack`, `github`). */
  readonly channel: string;
  /**
   * Delivers one notice. `delivery` is stable across retries and engine restarts (receivers
   * deduplicate on it: delivery is at least once). Never throws: the outcome is data.
   */
  send(notice: Notice, delivery: string): Promise<NotifyResult>;
}
