/**
 * Housekeeping run after each reconciler pass (the core's `tick`), and the store's health
 * check. Built by the core from the ports: retention of finished releases (retention.ts) and,
 * when on, drift observation (drift.ts), the mutable dependencies' probes (dependency-probes.ts)
 * and the drill schedule (drill-schedule.ts).
 */
import type { Store } from "../ports/store.ts";
import type { DependencyProbes } from "./dependency-probes.ts";
import type { DriftObserver, DriftStats } from "./drift.ts";
import type { DrillSchedule } from "./drill-schedule.ts";
import type { Retention } from "./retention.ts";

export class Maintenance {
  constructor(
    private readonly retention: Retention,
    /** Null when drift detection is off. */
    readonly drift: DriftObserver | null,
    /** Null when drift detection is off or no dependency probe is wired. */
    readonly dependencies: DependencyProbes | null = null,
    /** Null when drift detection is off (the drill schedule keeps the drift interval). */
    readonly drills: DrillSchedule | null = null,
  ) {}

  /**
   * One round: retention when due, then a drift observation, the dependencies' probes and the
   * drill schedule's judgement when due.
   */
  async run(): Promise<void> {
    await this.retention.maybeRun();
    await this.drift?.maybeRun();
    await this.dependencies?.maybeRun();
    await this.drills?.maybeRun();
  }

  /** Gives back what this engine holds for others to take over (the drift leases): a clean stop. */
  async stop(): Promise<void> {
    await this.drift?.stop();
    await this.dependencies?.stop();
    await this.drills?.stop();
  }

  /**
   * The drift stats `GET /metrics` exports: this process's, or, for an engine that lives for
   * one event (drift mode `event`), those kept in the store; null when drift is off.
   */
  async driftMetrics(): Promise<DriftStats | null> {
    return (await this.drift?.currentStats()) ?? null;
  }
}

/**
 * Whether the store answers and takes a write (`Store.ping({ write: true })`). One probe at a
 * time, and a successful one is reused for a second, so a flood of `/healthz` costs at most one
 * tiny write a second.
 */
export class StoreHealth {
  private probe: { at: number; done: Promise<void> } | null = null;

  constructor(private readonly store: Store) {}

  /** Resolves when the store took the write; rejects with the store's error. */
  check(): Promise<void> {
    const now = Date.now();
    const last = this.probe;
    if (last && now - last.at < 1000) return last.done;
    const done = this.store.ping({ write: true });
    this.probe = { at: now, done };
    done.catch(() => {
      if (this.probe?.done === done) this.probe = null;
    });
    return done;
  }
}
