/**
 * The engine's settings of what a committed change deserves besides its transition's effects:
 * who is told (notifiers and the kinds sent) and where releases show as GitHub deployments;
 * `effectsPolicyOf` turns them into the pure domain's `EffectsPolicy` (domain/change-effects.ts).
 */
import type { EffectsPolicy } from "../domain/change-effects.ts";
import type { NoticeKind } from "../domain/notifications.ts";
import type { Notifier } from "../ports/notifier.ts";

/** The engine's notification settings. */
export interface NotifyPolicy {
  notifiers: Notifier[];
  /** Notice kinds sent (a recipe's `notify.on` narrows them per release). */
  events: ReadonlySet<NoticeKind>;
  /** Retry schedule: first delay (ms, doubling, capped at 5 min) and tries in all. */
  retry: { baseMs: number; maxTries: number };
  /** Dashboard base URL for the release link (the public URL by default). */
  dashboardUrl?: string;
}

/** Where releases show as GitHub deployments. */
export interface DeploymentsPolicy {
  /** Environment of a release whose recipe names none, e.g. `production`. */
  environment: string;
  /** Ref a deployment names when the recipe pins no `tool_revision` (e.g. `main`). */
  ref: string;
  /** Retry schedule: first delay (ms, doubling, capped at 5 min) and tries in all. */
  retry: { baseMs: number; maxTries: number };
  /** Dashboard base URL for the release link (the public URL by default). */
  dashboardUrl?: string;
}

/**
 * What a change deserves under these settings (domain/change-effects.ts): notices to the
 * configured notifiers' channels (off when there are none), deployment statuses when on.
 */
export function effectsPolicyOf(o: {
  publicUrl: string;
  notify?: NotifyPolicy | undefined;
  deployments?: DeploymentsPolicy | undefined;
}): EffectsPolicy {
  const base = (url: string | undefined) => (url ?? o.publicUrl).replace(/\/+$/, "");
  const n = o.notify && o.notify.notifiers.length > 0 ? o.notify : null;
  const d = o.deployments ?? null;
  return {
    notify: n
      ? {
          channels: n.notifiers.map((x) => x.channel),
          events: n.events,
          url: base(n.dashboardUrl),
        }
      : null,
    deployments: d ? { environment: d.environment, ref: d.ref, url: base(d.dashboardUrl) } : null,
  };
}
