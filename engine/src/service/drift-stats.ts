/**
 * What the drift observer has done, as `GET /metrics` exports it: observations, failures by
 * reason, the last successful observation and the models it judged. A long-lived engine keeps
 * them in memory; an engine that lives for one event (`event` mode) adds each observation's
 * outcome to what the store keeps (`Store.putState`, name `drift`) and reads them there.
 */
import type { ObservedModel } from "../domain/drift.ts";
import type { Json } from "../domain/types.ts";
import type { Store } from "../ports/store.ts";

export type { ObservedModel } from "../domain/drift.ts";

/** Why an observation failed (the `reason` label of `baton_drift_observation_failures_total`). */
export type DriftFailure = "timeout" | "control_plane" | "store";

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

/** Name of the engine state (`Store.putState`) an `event`-mode observer keeps its stats in. */
export const DRIFT_STATE = "drift";

/** What an `event`-mode observer keeps in the store between events. */
interface StoredDrift {
  observations: number;
  failures: Record<DriftFailure, number>;
  lastObservedAt: number | null;
  models: ObservedModel[];
  /** The last failed observation: when (epoch ms), why, and the read's message. */
  lastFailure: { at: number; reason: DriftFailure; message: string } | null;
}

/** One observation's outcome, as `event` mode keeps it. */
export type DriftOutcome =
  | { ok: true; at: number; models: ObservedModel[] }
  | { ok: false; at: number; reason: DriftFailure; message: string };

/** The observer's counters: in memory, and in `event` mode also in the store. */
export class DriftTally {
  private readonly counts = {
    observations: 0,
    failures: { timeout: 0, control_plane: 0, store: 0 } as Record<DriftFailure, number>,
    lastObservedAt: null as number | null,
    models: [] as ObservedModel[],
  };

  constructor(
    private readonly store: Store,
    private readonly o: {
      mode: "process" | "event";
      intervalMs: number;
      timeoutMs: number;
      log: { warn(msg: string): void };
    },
  ) {}

  /** Counts a failed observation (or lease take) in memory. */
  failed(reason: DriftFailure): void {
    this.counts.failures[reason]++;
  }

  /** Counts a successful observation ended at `at` that judged `models`. */
  observed(at: number, models: ObservedModel[]): void {
    this.counts.observations++;
    this.counts.lastObservedAt = at;
    this.counts.models = models;
  }

  /** A copy of this process's counters and last successful observation. */
  stats(): DriftStats {
    return {
      intervalMs: this.o.intervalMs,
      timeoutMs: this.o.timeoutMs,
      observations: this.counts.observations,
      failures: { ...this.counts.failures },
      lastObservedAt: this.counts.lastObservedAt,
      models: [...this.counts.models],
    };
  }

  /**
   * The counters `GET /metrics` exports: this process's (`process` mode), or those kept in the
   * store by the events that observed (`event` mode; a store that cannot be read throws).
   */
  async current(): Promise<DriftStats> {
    if (this.o.mode !== "event") return this.stats();
    const kept = await this.kept();
    return {
      intervalMs: this.o.intervalMs,
      timeoutMs: this.o.timeoutMs,
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
   * of the observation are written already. Nothing in `process` mode.
   */
  async keep(outcome: DriftOutcome): Promise<void> {
    if (this.o.mode !== "event") return;
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
      this.o.log.warn(`[drift] could not keep the observation's stats: ${(err as Error).message}`);
    }
  }
}
