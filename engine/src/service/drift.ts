/**
 * Drift detection (docs/drift.md): once a model has no release in flight, the engine keeps
 * observing its lanes — the control plane's weight, `excluded` marker and capabilities, and the
 * image the control plane or the target last reported — and compares them with what the
 * model's last ended releases left them at (the fleet view's desired state, domain/fleet.ts). A difference is
 * drift: written once to the history of the release that decided the lane (desired vs observed
 * per field), again only when it changes, and a `drift_cleared` entry when it is gone. Lanes of
 * one model serving different images outside a release are flagged as mixed versions. What
 * counts as drift, its entries and its notices are pure (domain/drift.ts,
 * domain/change-effects.ts); this observer reads, leases and stores.
 *
 * Bounded: at most one observation per `intervalMs` (engine clock), one control-plane read
 * per observation with a `timeoutMs` limit, the newest `FLEET_RELEASES` releases; a control
 * plane that cannot be read is logged once per interval and never retried sooner (no storm
 * when it is down). Drift entries are not decisions: a closed release's record digest does not
 * move.
 */
import { driftNotices, type EffectsPolicy, NO_EFFECTS_POLICY } from "../domain/change-effects.ts";
import {
  type DriftFacts,
  driftClearedEntry,
  driftEntry,
  drifted,
  driftMessage,
  driftPrint,
  driftRelease,
  modelDrift,
  type ObservedModel,
  observedModel,
  recordedPrint,
} from "../domain/drift.ts";
import type { HistoryEntry } from "../domain/types.ts";
import type { Clock } from "../ports/clock.ts";
import type { ControlPlane } from "../ports/control-plane.ts";
import type { Store } from "../ports/store.ts";
import { type DriftStats, DriftTally } from "./drift-stats.ts";

// The pure drift judgement lives in the domain; these names are kept here for the readers
// that know them from the service (the CLI, the release page, `GET /metrics`).
export {
  currentDrift,
  DRIFT_CLEARED_KIND,
  DRIFT_KIND,
  type DriftedLane,
  driftMessage,
  driftPrint,
  type ModelDrift,
  modelDrift,
  settling,
} from "../domain/drift.ts";
export {
  DRIFT_STATE,
  type DriftFailure,
  type DriftStats,
  type ObservedModel,
} from "./drift-stats.ts";

import { randomHex } from "../protocol/ids.ts";

/** Drift settings: observation interval and control-plane read timeout, ms. */
export interface DriftPolicy {
  intervalMs: number;
  timeoutMs?: number;
  /**
   * `process` (default): the engine is a long-lived process; its holder renews the `drift`
   * lease for two intervals, gives it back on a clean stop, and its counters and last
   * observation live in memory (they start at 0 with the process).
   *
   * `event`: the engine lives for one event (the serverless entries: a Cron Trigger or an
   * EventBridge schedule, every minute or so). The interval is kept by the lease alone: an
   * observing event takes it until one interval (less a little slack for the schedule's
   * jitter) from its start and never gives it back, so however often events come, one
   * observes per interval. Counters and the last successful observation are kept in the store
   * (`Store.putState`, name `drift`) and `stats` reads them there.
   */
  mode?: "process" | "event";
  /**
   * Settle time, ms (default: `intervalMs`; `event` mode: 0, see docs/drift.md): a model with a lane whose deciding release ended
   * less than this ago is not judged (no drift, no `drift_cleared`), like one with a release in
   * flight: the lanes report what the release's last steps left (a restored image, a weight)
   * asynchronously, and the control plane may show the old value for a moment. A difference
   * still there once the settle time has passed is drift at the next observation.
   */
  settleMs?: number;
  /**
   * Epoch ms (engine clock) by which an observation must have ended: the event's time budget.
   * The control-plane read gets at most what is left (and at most `timeoutMs`); with less
   * than one second left the observation is not started (the lease is not taken, so the next
   * event observes). Absent: `timeoutMs` alone bounds it.
   */
  deadline?: number;
}

/** Below this much time left of the event's budget (ms), an observation is not started. */
const MIN_BUDGET_MS = 1000;

/** Name of the store lease (`Store.takeLease`) the observing engine holds. */
export const DRIFT_LEASE = "drift";

/** What the observer is built from (the core wires it from the ports and the fleet view). */
export interface DriftDeps {
  store: Store;
  controlPlane: ControlPlane;
  clock: Clock;
  policy: DriftPolicy;
  log: { warn(msg: string): void };
  /**
   * Reads the fleet's facts of every model through `cp` (the core: the fleet view over the
   * service's reads). Throws what the store throws; a control plane that cannot be read is
   * reported per model (`readError`).
   */
  readFleet(cp: Pick<ControlPlane, "lanes">): Promise<DriftFacts[]>;
  /** Who is told of a drift (its notices); none when absent. */
  effects?: EffectsPolicy;
}

/**
 * This process's name as a lease owner, `engine-<12 hex>`: random, so that two engines never
 * share one.
 */
export function leaseOwner(): string {
  return `engine-${randomHex(6)}`;
}

/**
 * The periodic observer; `maybeRun` is called from every engine tick. Of several engines on
 * one database one observes: before each observation an engine takes or renews the store
 * lease `drift` for two intervals (`Store.takeLease`); the others skip theirs, so the control
 * plane's lanes and the release records are read once per interval, not once per engine. A
 * holder that stops (or crashes) is replaced within two intervals; one that stops cleanly
 * gives the lease back (`stop`).
 */
export class DriftObserver {
  private next = 0;
  private readonly owner = leaseOwner();
  /** Whether this engine held the lease at its last look (false before the first). */
  private holding = false;
  /** Per model: the fingerprint last recorded and on which release ("" = no drift). */
  private readonly last = new Map<string, { print: string; release: string }>();
  private running: Promise<void> | null = null;
  /** Set by `stop()`: no observation starts after it, and a failure during shutdown is quiet. */
  private stopped = false;
  private readonly store: Store;
  private readonly cp: ControlPlane;
  private readonly clock: Clock;
  private readonly policy: DriftPolicy;
  private readonly log: { warn(msg: string): void };
  private readonly effects: EffectsPolicy;
  private readonly tally: DriftTally;

  constructor(private readonly deps: DriftDeps) {
    this.store = deps.store;
    this.cp = deps.controlPlane;
    this.clock = deps.clock;
    this.policy = deps.policy;
    this.log = deps.log;
    this.effects = deps.effects ?? NO_EFFECTS_POLICY;
    this.tally = new DriftTally(deps.store, {
      mode: deps.policy.mode ?? "process",
      intervalMs: deps.policy.intervalMs,
      timeoutMs: deps.policy.timeoutMs ?? 5000,
      log: deps.log,
    });
  }

  /** The settle time in force (ms): the policy's, else one interval (`event` mode: 0). */
  private get settleMs(): number {
    return this.policy.settleMs ?? (this.policy.mode === "event" ? 0 : this.policy.intervalMs);
  }

  /** A copy of the observer's counters and last successful observation (`GET /metrics`). */
  stats(): DriftStats {
    return this.tally.stats();
  }

  /**
   * The counters and last successful observation `GET /metrics` exports: this process's
   * (`process` mode), or those kept in the store by the events that observed (`event` mode;
   * a store that cannot be read throws).
   */
  currentStats(): Promise<DriftStats> {
    return this.tally.current();
  }

  /**
   * Observes once when the interval has passed and this engine holds (or takes) the lease
   * (shared by concurrent callers). A store that cannot be asked counts as a store failure.
   */
  maybeRun(): Promise<void> {
    if (!this.cp.lanes || this.stopped) return Promise.resolve();
    if (this.running) return this.running;
    const now = this.clock.now();
    if (now < this.next) return Promise.resolve();
    const deadline = this.policy.deadline;
    if (deadline !== undefined && deadline - now < MIN_BUDGET_MS) {
      this.log.warn(
        `[drift] ${Math.max(0, deadline - now)} ms left of this event's time budget: observation left to the next event`,
      );
      return Promise.resolve();
    }
    this.next = now + this.policy.intervalMs;
    this.running = this.leased(now)
      .then((mine) => (mine ? this.observe(now) : undefined))
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  /**
   * Takes or renews the lease until two intervals from `now` (`event` mode: one interval less
   * the slack, see `eventLeaseMs`); false when another holds it.
   */
  private async leased(now: number): Promise<boolean> {
    const ms =
      this.policy.mode === "event"
        ? eventLeaseMs(this.policy.intervalMs)
        : 2 * this.policy.intervalMs;
    try {
      this.holding = await this.store.takeLease({
        name: DRIFT_LEASE,
        owner: this.owner,
        until: now + ms,
        now,
      });
    } catch (err) {
      if (this.stopped) return false;
      this.tally.failed("store");
      this.log.warn(`[drift] could not take the observation lease: ${(err as Error).message}`);
      this.holding = false;
    }
    return this.holding;
  }

  /** Gives the lease back when this engine holds it (a clean stop), so another takes over now. */
  async stop(): Promise<void> {
    // No observation starts from now on, and the one in flight ends before the store closes.
    this.stopped = true;
    await this.running?.catch(() => {});
    // An event's lease marks when the next observation is due: it is not given back.
    if (!this.holding || this.policy.mode === "event") return;
    this.holding = false;
    // Renewing it until the epoch's start releases it: it has expired for everyone else.
    await this.store
      .takeLease({ name: DRIFT_LEASE, owner: this.owner, until: 0, now: this.clock.now() })
      .catch(() => false);
  }

  /**
   * The control plane's `lanes` bounded by `timeoutMs`: given up at the timeout (the race
   * answers, and the read itself is aborted: an HTTP control plane's connection closes; no
   * read outlives its observation). `outcome` says how the last read ended.
   */
  private boundedLanes(timeoutMs: number): {
    cp: Pick<ControlPlane, "lanes">;
    outcome: { timedOut: boolean; failed: string | null };
  } {
    const cp = this.cp;
    const lanes = cp.lanes?.bind(cp);
    /** `failed`: the read's error message (a throw, a refusal or the timeout); null when it answered. */
    const outcome = { timedOut: false, failed: null as string | null };
    let timer: ReturnType<typeof setTimeout> | undefined;
    const abort = new AbortController();
    const bounded: Pick<ControlPlane, "lanes"> = {
      lanes: (model?: string) =>
        Promise.race([
          lanes
            ? lanes(model, abort.signal).catch((err: unknown) => ({
                ok: false as const,
                message: (err as Error)?.message ?? String(err),
              }))
            : Promise.resolve({ ok: false as const, message: "no lanes" }),
          new Promise<{ ok: false; message: string }>((resolve) => {
            timer = setTimeout(() => {
              outcome.timedOut = true;
              abort.abort();
              resolve({ ok: false, message: `no answer within ${timeoutMs} ms` });
            }, timeoutMs);
            (timer as { unref?: () => void }).unref?.();
          }),
        ])
          .then((r) => {
            outcome.failed = r.ok ? null : r.message;
            return r;
          })
          .finally(() => clearTimeout(timer)),
    };
    return { cp: bounded, outcome };
  }

  private async observe(now: number): Promise<void> {
    const limit = this.policy.timeoutMs ?? 5000;
    const deadline = this.policy.deadline;
    // The read gets what is left of the event's budget, less a little for the history writes.
    const timeoutMs =
      deadline === undefined
        ? limit
        : Math.max(MIN_BUDGET_MS / 2, Math.min(limit, deadline - this.clock.now() - 500));
    const read = this.boundedLanes(timeoutMs);
    let models: DriftFacts[];
    try {
      models = await this.deps.readFleet(read.cp);
    } catch (err) {
      // Shutting down: a store closed under the observation is the end, not a failure.
      if (this.stopped) return;
      this.tally.failed("store");
      this.log.warn(`[drift] could not observe the fleet: ${(err as Error).message}`);
      await this.tally.keep({
        ok: false,
        at: this.clock.now(),
        reason: "store",
        message: (err as Error).message,
      });
      return;
    }
    const failed =
      read.outcome.failed ?? models.find((m) => m.readError !== null)?.readError ?? null;
    if (failed !== null) {
      // The observer's own limit, or the HTTP adapter's (its message says "timed out").
      const reason =
        read.outcome.timedOut || /timed out/.test(failed) ? "timeout" : "control_plane";
      this.tally.failed(reason);
      this.log.warn(
        `[drift] the control plane could not be read (${failed}); next observation in ${this.policy.intervalMs} ms`,
      );
      await this.tally.keep({ ok: false, at: this.clock.now(), reason, message: failed });
    } else {
      const at = this.clock.now();
      const judged: ObservedModel[] = [];
      for (const m of models) {
        const d = modelDrift(m, now, this.settleMs);
        if (d) judged.push(observedModel(m, d));
      }
      this.tally.observed(at, judged);
      await this.tally.keep({ ok: true, at, models: judged });
    }
    await this.record(models, now);
  }

  /**
   * Writes what changed since the last record per model: a `drift` entry (with its notices,
   * in one commit) on the release that decided the drifted lanes, or a `drift_cleared` entry
   * once its lanes are as that release left them again.
   */
  private async record(models: DriftFacts[], now: number): Promise<void> {
    const cleared: HistoryEntry[] = [];
    for (const m of models) {
      const d = modelDrift(m, now, this.settleMs);
      if (!d) continue;
      const release = driftRelease(m, d);
      if (!release) continue;
      const print = drifted(d) ? driftPrint(d) : "";
      let seen = this.last.get(m.model);
      if (!seen) {
        // Read from its history, so a restarted engine does not record (or tell) it again.
        seen = { print: recordedPrint(await this.store.getHistory(release)), release };
        this.last.set(m.model, seen);
      }
      if (seen.print === print) continue;
      this.last.set(m.model, { print, release });
      if (!drifted(d)) {
        cleared.push(driftClearedEntry(seen.release, m.model, now));
        continue;
      }
      const message = driftMessage(d);
      this.log.warn(message);
      // The entry and its notices commit together: a drift is told once, with its record.
      const effects = await this.notices(release, message, now);
      await this.store.appendHistoryWithEffects(
        release,
        [driftEntry(release, d, now)],
        effects,
        now,
      );
    }
    if (cleared.length > 0) await this.store.appendHistory(cleared);
  }

  /** The notices of a drift recorded on release `id`; none when notices are off. */
  private async notices(id: string, message: string, now: number) {
    if (!this.effects.notify) return [];
    const release = await this.store.getRelease(id);
    return release ? driftNotices(release, message, now, this.effects) : [];
  }
}

/**
 * How long an `event`-mode observation holds the lease (ms): one interval less a slack of a
 * tenth of it, at most 10 s, so a schedule whose next event comes a little early (jitter,
 * or the previous event started late) still observes: a cron every minute with a 5-minute
 * interval observes every 5th event, not every 6th.
 */
export function eventLeaseMs(intervalMs: number): number {
  return intervalMs - Math.min(Math.floor(intervalMs / 10), 10_000);
}
