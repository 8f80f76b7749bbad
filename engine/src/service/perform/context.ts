/**
 * What performing one claimed outbox row needs: the ports, the commit side to feed outcomes
 * back to, and the lease check that keeps a paused engine from sending what another engine may
 * hold by now. Shared by the reconciler's loop and the performers beside this file.
 */
import type { Release, ReleaseEvent } from "../../domain/types.ts";
import type { Clock } from "../../ports/clock.ts";
import type { ControlPlane } from "../../ports/control-plane.ts";
import type { DeploymentTracker } from "../../ports/deployments.ts";
import type { Dispatcher } from "../../ports/dispatcher.ts";
import type { MetricsSource } from "../../ports/metrics-source.ts";
import type { Notifier } from "../../ports/notifier.ts";
import type { OutboxRow, Store } from "../../ports/store.ts";
import type { TargetProbe } from "../../ports/target-probe.ts";
import type { ApplyExtras } from "../kernel.ts";
import type { Logger } from "../logger.ts";

export interface ReconcilerDeps {
  store: Store;
  dispatcher: Dispatcher;
  controlPlane: ControlPlane;
  clock: Clock;
  publicUrl: string;
  log: Logger;
  /** The commit side (ReleaseService): feeds each outcome back, reads recent releases. */
  releases: ReleaseCommits;
  /** Where gates read their numbers; absent: every gate's evidence is missing. */
  metrics?: MetricsSource;
  /**
   * Asks lanes' machines what they run when a recovery is verified (its `observe`); absent:
   * the lanes' last runner reports are read instead.
   */
  targetProbe?: TargetProbe;
  /** Notifiers by channel name (`notify` rows); a row for a missing channel is dropped. */
  notifiers?: ReadonlyMap<string, Notifier>;
  /** Retry schedule of notices: first delay (ms, doubling, capped at 5 min) and tries in all. */
  notifyRetry?: { baseMs: number; maxTries: number };
  /** Where `deployment` rows go (GitHub Deployments); a row with none configured is dropped. */
  deployments?: DeploymentTracker;
  /** Retry schedule of deployment statuses (default 5 s doubling, 8 tries). */
  deploymentsRetry?: { baseMs: number; maxTries: number };
}

/** What the reconciler needs of the release service (implemented by `ReleaseService`). */
export interface ReleaseCommits {
  /** Applies an outcome event (with the outbox row to complete in the same commit). */
  apply(releaseId: string, event: ReleaseEvent, extras: ApplyExtras): Promise<{ ok: boolean }>;
  /** A recent copy of a release (only its immutable fields are used: id, manifest digest). */
  recentRelease(id: string): Promise<Release | null>;
}

/** One performer's view: the deps and the lease check of the reconciler performing the row. */
export interface PerformContext {
  deps: ReconcilerDeps;
  /**
   * Refuses to perform an effect whose claim lapsed (or lapses within the margin) before it is
   * sent. @throws LeaseLapsed
   */
  assertLeaseHeld(row: OutboxRow): void;
}

/** The claim's lease ran out (or nearly) before the effect was sent (e.g. the process was paused). */
export class LeaseLapsed extends Error {}

/**
 * Throws `LeaseLapsed` when `row`'s claim has lapsed at `now` (or lapses within the margin, a
 * quarter of the lease, at most 1 s): once the lease ran out another engine may have claimed
 * the row and sent it, so a paused or slow engine must not send it again (it would be a second
 * dispatch of the same step run).
 */
export function assertLeaseHeld(row: OutboxRow, leaseMs: number, now: number): void {
  if (row.claimed_until === null) return;
  const margin = Math.min(1_000, leaseMs / 4);
  if (now > row.claimed_until - margin) {
    throw new LeaseLapsed(
      `[engine] outbox row ${row.id} (${row.effect.type} of ${row.release_id}): the claim's lease ended at ${row.claimed_until} and it is ${now}; not performing it, another engine may hold it now`,
    );
  }
}
