/**
 * What a committed change deserves besides the transition's own effects: the notices (one per
 * channel) and the GitHub deployment status, as outbox effects written in the same commit; and
 * the notices of a drift. Pure, like `transition`: release before and after, the event, the
 * time and the engine's settings in, effects as data out.
 */
import { buildDeploymentReport, deploymentStateFor } from "./deployments.ts";
import {
  buildDriftNotice,
  buildDrillDueNotice,
  buildIncidentNotice,
  buildNotice,
  type NoticeKind,
  noticeKindFor,
} from "./notifications.ts";
import type {
  DeploymentEffect,
  NotifyEffect,
  OutboxEffect,
  Release,
  ReleaseEvent,
} from "./types.ts";

/** The engine's settings that decide what a change deserves; `null` parts are off. */
export interface EffectsPolicy {
  /** Notices: the configured channels, the kinds sent (a recipe's `notify` narrows both). */
  notify: {
    channels: readonly string[];
    events: ReadonlySet<NoticeKind>;
    /** Dashboard base URL without a trailing `/` (release links). */
    url: string;
  } | null;
  /** GitHub deployment statuses. */
  deployments: {
    /** Environment of a release whose recipe names none. */
    environment: string;
    /** Ref a deployment names when the recipe pins no `tool_revision`. */
    ref: string;
    /** Dashboard base URL without a trailing `/` (the status's log URL). */
    url: string;
  } | null;
}

/** Nothing besides the transition's effects. */
export const NO_EFFECTS_POLICY: EffectsPolicy = { notify: null, deployments: null };

/** The page of release `id` under a dashboard base URL. */
function releaseUrl(base: string, id: string): string {
  return `${base}/releases/${encodeURIComponent(id)}`;
}

/** Channels `release`'s recipe wants of the configured ones, when it sends `kind`; else none. */
function channelsFor(
  policy: NonNullable<EffectsPolicy["notify"]>,
  release: Release,
  kind: NoticeKind,
): readonly string[] {
  const wanted = release.manifest.notify;
  if (!(wanted?.on ? wanted.on.includes(kind) : policy.events.has(kind))) return [];
  const only = wanted?.channels as string[] | undefined;
  return policy.channels.filter((c) => !only || only.includes(c));
}

/**
 * The notices the change `before` → `after` (by `event`, at `now`, epoch ms) deserves, one
 * per channel (docs/engine.md "Notifications"); the delivery id names the new version.
 */
export function changeNotices(
  before: Release,
  after: Release,
  event: ReleaseEvent,
  now: number,
  policy: EffectsPolicy,
): NotifyEffect[] {
  const p = policy.notify;
  if (!p) return [];
  const kind = noticeKindFor(before, after, event);
  if (!kind) return [];
  const channels = channelsFor(p, after, kind);
  if (channels.length === 0) return [];
  const notice = buildNotice(kind, before, after, { url: releaseUrl(p.url, after.id), at: now });
  return channels.map((channel) => ({
    type: "notify",
    channel,
    delivery: `${after.id}.${after.uid ?? "0"}.v${after.resource_version}.${kind}.${channel}`,
    notice,
    not_before: null,
  }));
}

/**
 * The GitHub deployment status the change `before` → `after` deserves (docs/engine.md "GitHub
 * Deployments"): none when deployments are off or the change moves no status.
 */
export function changeDeploymentStatus(
  before: Release,
  after: Release,
  event: ReleaseEvent | null,
  now: number,
  policy: EffectsPolicy,
): DeploymentEffect[] {
  const d = policy.deployments;
  if (!d) return [];
  const state = deploymentStateFor(before, after, event);
  if (!state) return [];
  const report = buildDeploymentReport(state, after, {
    environment: d.environment,
    ref: d.ref,
    url: releaseUrl(d.url, after.id),
    at: now,
  });
  return [
    {
      type: "deployment",
      delivery: `${after.id}.${after.uid ?? "0"}.v${after.resource_version}.${state}`,
      report,
      not_before: null,
    },
  ];
}

/** Everything a committed change deserves besides the transition's effects: notices, then status. */
export function changeEffects(
  before: Release,
  after: Release,
  event: ReleaseEvent,
  now: number,
  policy: EffectsPolicy,
): OutboxEffect[] {
  return [
    ...changeNotices(before, after, event, now, policy),
    ...changeDeploymentStatus(before, after, event, now, policy),
  ];
}

/**
 * The notices of a drift recorded on `release` (docs/drift.md), one per channel, written with
 * the drift entry; none when notices are off or the `drift` kind is not sent.
 */
export function driftNotices(
  release: Release,
  message: string,
  now: number,
  policy: EffectsPolicy,
  /** Part of each delivery's key: `drift` (lanes), `dependency-drift` (mutable dependencies). */
  tag = "drift",
): NotifyEffect[] {
  const p = policy.notify;
  if (!p) return [];
  const channels = channelsFor(p, release, "drift");
  if (channels.length === 0) return [];
  const notice = buildDriftNotice(release, message, {
    url: releaseUrl(p.url, release.id),
    at: now,
    ...(tag === "dependency-drift"
      ? { headline: "has mutable dependencies that need requalification" }
      : {}),
  });
  return channels.map((channel) => ({
    type: "notify",
    channel,
    delivery: `${release.id}.${release.uid ?? "0"}.${tag}.${now}.${channel}`,
    notice,
    not_before: null,
  }));
}

/**
 * The notices of a recovery drill falling due on `release`'s model (docs/recovery-actions.md
 * "The drill schedule"), one per channel, written with the `drill_due` history entry; none when
 * notices are off or the `drill_due` kind is not sent. `period` (the last passed drill it
 * follows, or `never`) keys the delivery: one due period is told once.
 */
export function drillDueNotices(
  release: Release,
  message: string,
  now: number,
  policy: EffectsPolicy,
  period: string,
): NotifyEffect[] {
  const p = policy.notify;
  if (!p) return [];
  const channels = channelsFor(p, release, "drill_due");
  if (channels.length === 0) return [];
  const notice = buildDrillDueNotice(release, message, {
    url: releaseUrl(p.url, release.id),
    at: now,
  });
  return channels.map((channel) => ({
    type: "notify",
    channel,
    delivery: `${release.id}.${release.uid ?? "0"}.drill-due.${period}.${channel}`,
    notice,
    not_before: null,
  }));
}

/**
 * The notices of an incident declared or resolved on `release`'s model (docs/incidents.md), one
 * per channel, written with the release's incident history entry; none when notices are off or
 * the `incident` kind is not sent. `tag` (`inc1-declared`) keys the delivery.
 */
export function incidentNotices(
  release: Release,
  text: string,
  now: number,
  policy: EffectsPolicy,
  tag: string,
): NotifyEffect[] {
  const p = policy.notify;
  if (!p) return [];
  const channels = channelsFor(p, release, "incident");
  if (channels.length === 0) return [];
  const notice = buildIncidentNotice(release, text, {
    url: releaseUrl(p.url, release.id),
    at: now,
  });
  return channels.map((channel) => ({
    type: "notify",
    channel,
    delivery: `${release.id}.${release.uid ?? "0"}.${tag}.${channel}`,
    notice,
    not_before: null,
  }));
}
