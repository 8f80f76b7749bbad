/**
 * Drift detection (docs/drift.md): once a model has no release in flight, the engine keeps
 * observing its lanes — the control plane's weight, `excluded` marker and capabilities, and the
 * image the control plane or the target last reported — and compares them with what the
 * model's last ended releases left them at (the fleet view's desired state,
 * domain/fleet.ts). A difference is drift: written once to the history of the release
 * that decided the lane (desired vs observed per field), again only when it changes, and a
 * `drift_cleared` entry when it is gone. Lanes of one model serving different images outside a
 * release are flagged as mixed versions.
 *
 * Bounded: at most one observation per `intervalMs` (engine clock), one control-plane read
 * per observation with a `timeoutMs` limit, the newest `FLEET_RELEASES` releases; a control
 * plane that cannot be read is logged once per interval and never retried sooner (no storm
 * when it is down). Drift entries are not decisions: a closed release's record digest does not
 * move.
 */
import type { FleetModel } from "../domain/fleet.ts";
import type { HistoryEntry, Json, OutboxEffect } from "../domain/types.ts";
import type { Clock } from "../ports/clock.ts";
import type { ControlPlane } from "../ports/control-plane.ts";
import type { Store } from "../ports/store.ts";
import { canonicalJson } from "../protocol/canonical-json.ts";
import type { ReleaseApi } from "./api.ts";
import { loadFleet } from "./fleet-load.ts";

/** History kinds of drift (on the release that decided the drifted lanes). */
export const DRIFT_KIND = "drift";
export const DRIFT_CLEARED_KIND = "drift_cleared";

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

/** Name of the engine state (`Store.putState`) an `event`-mode observer keeps its stats in. */
export const DRIFT_STATE = "drift";

/** Below this much time left of the event's budget (ms), an observation is not started. */
const MIN_BUDGET_MS = 1000;

/** What an `event`-mode observer keeps in the store between events. */
interface StoredDrift {
  observations: number;
  failures: Record<DriftFailure, number>;
  lastObservedAt: number | null;
  models: ObservedModel[];
  /** The last failed observation: when (epoch ms), why, and the read's message. */
  lastFailure: { at: number; reason: DriftFailure; message: string } | null;
}

/** One drifted lane: the fields that differ with their desired and observed values. */
export interface DriftedLane {
  id: string;
  fields: string[];
  desired: Record<string, Json>;
  observed: Record<string, Json>;
}

/** A model's drift as recorded in history (`data` of a `drift` entry). */
export interface ModelDrift {
  model: string;
  lanes: DriftedLane[];
  /** More than one image serves traffic while no release runs. */
  mixed: boolean;
  images: { ref: string; lanes: string[]; weight: number }[];
  observed_at: number;
}

interface Logger {
  warn(msg: string): void;
}

/** The notices (outbox effects) of a drift recorded on `releaseId`; none when notices are off. */
export type DriftNotices = (
  releaseId: string,
  d: ModelDrift,
  message: string,
  now: number,
) => Promise<OutboxEffect[]>;

/** What identifies one distinct drift (key order does not matter: stores may reorder JSON). */
export function driftPrint(d: Pick<ModelDrift, "lanes" | "mixed" | "images">): string {
  return canonicalJson([d.lanes, d.mixed, d.images]);
}

/**
 * The drift of one model's fleet facts at `now` (epoch ms); null when it has a release in
 * flight, no read, or a lane whose deciding release ended less than `settleMs` ago (settling).
 */
export function modelDrift(m: FleetModel, now: number, settleMs = 0): ModelDrift | null {
  if (m.active !== null || m.readError !== null) return null;
  if (settling(m, now, settleMs)) return null;
  const lanes: DriftedLane[] = [];
  for (const l of m.lanes) {
    if (!l.desired || !l.observed || l.differs.length === 0) continue;
    const d = l.desired;
    const o = l.observed;
    const desired: Record<string, Json> = {};
    const observed: Record<string, Json> = {};
    for (const f of l.differs) {
      if (f === "image") {
        desired.image = d.image;
        observed.image = o.image?.ref ?? null;
      } else if (f === "weight") {
        desired.weight = d.weight;
        observed.weight = o.weight;
      } else if (f === "excluded") {
        desired.excluded = d.excluded;
        observed.excluded = o.excluded;
      } else {
        desired.capabilities = d.capabilities;
        desired.advertised = d.advertised;
        observed.capabilities = o.capabilities;
        observed.advertised = o.advertised;
      }
    }
    lanes.push({ id: l.id, fields: [...l.differs], desired, observed });
  }
  return { model: m.model, lanes, mixed: m.mixed, images: m.images, observed_at: now };
}

/** True when a lane's deciding release ended less than `settleMs` before `now`. */
export function settling(m: FleetModel, now: number, settleMs: number): boolean {
  return m.lanes.some((l) => {
    const ended = l.desired?.release_ended_at ?? null;
    return ended !== null && now - ended < settleMs;
  });
}

/** One line for people: what differs, lane by lane. */
export function driftMessage(d: ModelDrift): string {
  const parts = d.lanes.map(
    (l) =>
      `${l.id} ${l.fields
        .map((f) =>
          f === "capabilities"
            ? `capabilities desired ${JSON.stringify(l.desired.capabilities)} observed ${JSON.stringify(l.observed.capabilities)}`
            : `${f} desired ${JSON.stringify(l.desired[f])} observed ${JSON.stringify(l.observed[f])}`,
        )
        .join(", ")}`,
  );
  if (d.mixed)
    parts.push(
      `mixed versions outside a release: ${d.images.map((i) => `${i.ref} on ${i.lanes.join(",")}`).join("; ")}`,
    );
  return `[drift] model ${d.model}: ${parts.join("; ")}`;
}

/** Why an observation failed (the `reason` label of `baton_drift_observation_failures_total`). */
export type DriftFailure = "timeout" | "control_plane" | "store";

/** One model as the last successful observation judged it (no release of it in flight). */
export interface ObservedModel {
  drift: ModelDrift;
  /** Per wave (1…, 0 = lanes in no wave): distinct images its listed lanes run. */
  waves: { wave: number; images: number }[];
  /** Per lane the control plane listed: desired weight (null: never set) and observed, %. */
  weights: { lane: string; desired: number | null; observed: number }[];
}

/**
 * What the observer has done since the engine started (in memory, per process), read by
 * `GET /metrics`. Times are epoch ms of the engine clock.
 */
export interface DriftStats {
  intervalMs: number;
  timeoutMs: number;
  /** Observations that read the control plane. */
  observations: number;
  /** Observations that could not, by reason. */
  failures: Record<DriftFailure, number>;
  /** End of the last successful observation, null before the first. */
  lastObservedAt: number | null;
  /** Models of the last successful observation with no release in flight, by name. */
  models: ObservedModel[];
  /** The last failed observation (`event` mode only: read from the store), else null. */
  lastFailure?: { at: number; reason: DriftFailure; message: string } | null;
}

/** Distinct images per wave: each listed lane's observed image, else its desired one. */
function waveImages(m: FleetModel): { wave: number; images: number }[] {
  const byWave = new Map<number, Set<string>>();
  for (const l of m.lanes) {
    if (!l.observed) continue;
    const wave = l.desired?.wave ?? 0;
    const ref = l.observed.image?.ref ?? l.desired?.image ?? null;
    const set = byWave.get(wave) ?? new Set<string>();
    if (ref) set.add(ref);
    byWave.set(wave, set);
  }
  return [...byWave]
    .map(([wave, refs]) => ({ wave, images: refs.size }))
    .sort((a, b) => a.wave - b.wave);
}

/** Name of the store lease (`Store.takeLease`) the observing engine holds. */
export const DRIFT_LEASE = "drift";

/** This process's name as a lease owner: random, so that two engines never share one. */
function leaseOwner(): string {
  return `engine-${Array.from(crypto.getRandomValues(new Uint8Array(6)), (x) => x.toString(16).padStart(2, "0")).join("")}`;
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
  private readonly counts = {
    observations: 0,
    failures: { timeout: 0, control_plane: 0, store: 0 } as Record<DriftFailure, number>,
    lastObservedAt: null as number | null,
    models: [] as ObservedModel[],
  };

  constructor(
    private readonly api: ReleaseApi,
    private readonly store: Store,
    private readonly cp: ControlPlane | null,
    private readonly clock: Clock,
    private readonly policy: DriftPolicy,
    private readonly log: Logger,
    private readonly notices: DriftNotices | null = null,
  ) {}

  /** The settle time in force (ms): the policy's, else one interval (`event` mode: 0). */
  private get settleMs(): number {
    return this.policy.settleMs ?? (this.policy.mode === "event" ? 0 : this.policy.intervalMs);
  }

  /**
   * The drift last recorded for a model on `release`, read from its history (so a restarted
   * engine does not record, or notify, an unchanged drift again).
   */
  private async recorded(release: string): Promise<{ print: string; release: string }> {
    const history = await this.store.getHistory(release);
    for (let i = history.length - 1; i >= 0; i--) {
      const h = history[i];
      if (h?.kind === DRIFT_CLEARED_KIND) break;
      if (h?.kind === DRIFT_KIND && h.data) {
        return { print: driftPrint(h.data as unknown as ModelDrift), release };
      }
    }
    return { print: "", release };
  }

  /**
   * The counters and last successful observation `GET /metrics` exports: this process's
   * (`process` mode), or those kept in the store by the events that observed (`event` mode;
   * a store that cannot be read throws).
   */
  async currentStats(): Promise<DriftStats> {
    if (this.policy.mode !== "event") return this.stats();
    const kept = await this.kept();
    return {
      intervalMs: this.policy.intervalMs,
      timeoutMs: this.policy.timeoutMs ?? 5000,
      observations: kept.observations,
      failures: { ...kept.failures },
      lastObservedAt: kept.lastObservedAt,
      models: kept.models,
      lastFailure: kept.lastFailure,
    };
  }

  /** What the store keeps for `event` mode (zeros before the first observation). */
  private async kept(): Promise<StoredDrift> {
    const row = await this.store.getState(DRIFT_STATE);
    const v = (row?.value ?? {}) as Partial<StoredDrift>;
    return {
      observations: typeof v.observations === "number" ? v.observations : 0,
      failures: {
        timeout: v.failures?.timeout ?? 0,
        control_plane: v.failures?.control_plane ?? 0,
        store: v.failures?.store ?? 0,
      },
      lastObservedAt: typeof v.lastObservedAt === "number" ? v.lastObservedAt : null,
      models: Array.isArray(v.models) ? v.models : [],
      lastFailure: v.lastFailure ?? null,
    };
  }

  /**
   * `event` mode: adds this observation's outcome to what the store keeps (only the lease
   * holder writes, once per interval). A store that refuses it is logged; the history entries
   * of the observation are written already.
   */
  private async keep(
    outcome:
      | { ok: true; at: number; models: ObservedModel[] }
      | { ok: false; at: number; reason: DriftFailure; message: string },
  ): Promise<void> {
    if (this.policy.mode !== "event") return;
    try {
      const k = await this.kept();
      if (outcome.ok) {
        k.observations++;
        k.lastObservedAt = outcome.at;
        k.models = outcome.models;
      } else {
        k.failures[outcome.reason]++;
        k.lastFailure = { at: outcome.at, reason: outcome.reason, message: outcome.message };
      }
      await this.store.putState({
        name: DRIFT_STATE,
        value: k as unknown as Json,
        now: outcome.at,
      });
    } catch (err) {
      this.log.warn(`[drift] could not keep the observation's stats: ${(err as Error).message}`);
    }
  }

  /** A copy of the observer's counters and last successful observation (`GET /metrics`). */
  stats(): DriftStats {
    return {
      intervalMs: this.policy.intervalMs,
      timeoutMs: this.policy.timeoutMs ?? 5000,
      observations: this.counts.observations,
      failures: { ...this.counts.failures },
      lastObservedAt: this.counts.lastObservedAt,
      models: [...this.counts.models],
    };
  }

  /**
   * Observes once when the interval has passed and this engine holds (or takes) the lease
   * (shared by concurrent callers). A store that cannot be asked counts as a store failure.
   */
  maybeRun(): Promise<void> {
    if (!this.cp?.lanes || this.stopped) return Promise.resolve();
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
      this.counts.failures.store++;
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

  private async observe(now: number): Promise<void> {
    const limit = this.policy.timeoutMs ?? 5000;
    const deadline = this.policy.deadline;
    // The read gets what is left of the event's budget, less a little for the history writes.
    const timeoutMs =
      deadline === undefined
        ? limit
        : Math.max(MIN_BUDGET_MS / 2, Math.min(limit, deadline - this.clock.now() - 500));
    const cp = this.cp as ControlPlane;
    const lanes = cp.lanes?.bind(cp);
    let timedOut = false;
    /** The read's error message (a throw, a refusal or the timeout); null when it answered. */
    let readFailed: string | null = null;
    let timer: ReturnType<typeof setTimeout> | undefined;
    // Given up at the timeout: the race answers, and the read itself is aborted (an HTTP
    // control plane's connection closes; no read outlives its observation).
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
              timedOut = true;
              abort.abort();
              resolve({ ok: false, message: `no answer within ${timeoutMs} ms` });
            }, timeoutMs);
            (timer as { unref?: () => void }).unref?.();
          }),
        ])
          .then((r) => {
            readFailed = r.ok ? null : r.message;
            return r;
          })
          .finally(() => clearTimeout(timer)),
    };
    let models: FleetModel[];
    try {
      ({ models } = await loadFleet(this.api, bounded, null));
    } catch (err) {
      // Shutting down: a store closed under the observation is the end, not a failure.
      if (this.stopped) return;
      this.counts.failures.store++;
      this.log.warn(`[drift] could not observe the fleet: ${(err as Error).message}`);
      await this.keep({
        ok: false,
        at: this.clock.now(),
        reason: "store",
        message: (err as Error).message,
      });
      return;
    }
    const failed = readFailed ?? models.find((m) => m.readError !== null)?.readError ?? null;
    if (failed !== null) {
      // The observer's own limit, or the HTTP adapter's (its message says "timed out").
      const reason = timedOut || /timed out/.test(failed) ? "timeout" : "control_plane";
      this.counts.failures[reason]++;
      this.log.warn(
        `[drift] the control plane could not be read (${failed}); next observation in ${this.policy.intervalMs} ms`,
      );
      await this.keep({ ok: false, at: this.clock.now(), reason, message: failed });
    } else {
      const at = this.clock.now();
      this.counts.observations++;
      this.counts.lastObservedAt = at;
      const judged: ObservedModel[] = [];
      for (const m of models) {
        const d = modelDrift(m, now, this.settleMs);
        if (!d) continue;
        judged.push({
          drift: d,
          waves: waveImages(m),
          weights: m.lanes.flatMap((l) =>
            l.observed
              ? [{ lane: l.id, desired: l.desired?.weight ?? null, observed: l.observed.weight }]
              : [],
          ),
        });
      }
      this.counts.models = judged;
      await this.keep({ ok: true, at, models: judged });
    }
    const entries: HistoryEntry[] = [];
    for (const m of models) {
      const d = modelDrift(m, now, this.settleMs);
      if (!d) continue;
      const release =
        m.lanes.find((l) => d.lanes.some((x) => x.id === l.id))?.desired?.release_id ??
        m.lanes.find((l) => l.desired)?.desired?.release_id;
      if (!release) continue;
      const drifted = d.lanes.length > 0 || d.mixed;
      const print = drifted ? driftPrint(d) : "";
      let seen = this.last.get(m.model);
      if (!seen) {
        seen = await this.recorded(release);
        this.last.set(m.model, seen);
      }
      if (seen.print === print) continue;
      this.last.set(m.model, { print, release });
      const entry: HistoryEntry = drifted
        ? {
            release_id: release,
            at: now,
            kind: DRIFT_KIND,
            step_run_id: null,
            outcome: "accepted",
            message: driftMessage(d),
            data: d as unknown as Json,
          }
        : {
            release_id: seen.release,
            at: now,
            kind: DRIFT_CLEARED_KIND,
            step_run_id: null,
            outcome: "accepted",
            message: `[drift] model ${m.model}: every lane is again as its last release left it`,
            data: { model: m.model, observed_at: now },
          };
      if (!drifted) {
        entries.push(entry);
        continue;
      }
      this.log.warn(driftMessage(d));
      // The entry and its notices commit together: a drift is told once, with its record.
      const effects = this.notices ? await this.notices(release, d, driftMessage(d), now) : [];
      await this.store.appendHistoryWithEffects(release, [entry], effects, now);
    }
    if (entries.length > 0) await this.store.appendHistory(entries);
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

/** The drift a release's history shows now: its latest drift entry unless cleared since. */
export function currentDrift(history: readonly HistoryEntry[]): ModelDrift | null {
  for (let i = history.length - 1; i >= 0; i--) {
    const h = history[i];
    if (h?.kind === DRIFT_CLEARED_KIND) return null;
    if (h?.kind === DRIFT_KIND) return h.data as unknown as ModelDrift;
  }
  return null;
}
