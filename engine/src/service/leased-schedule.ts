/**
 * A job on the drift schedule that one engine at a time runs (the mutable-dependency probes, the
 * drill schedule): `maybeRun` is called from every engine tick and runs the job once the
 * interval (engine clock) has passed and this engine holds, or takes, the job's store lease
 * (two intervals; in `event` mode `eventLeaseMs`). One run at a time; a run that throws is one
 * `warn` line and the next interval tries again. `stop` lets a run end, then gives the lease back
 * (kept in `event` mode, where each invocation is a new engine).
 */
import type { Clock } from "../ports/clock.ts";
import type { Store } from "../ports/store.ts";
import { type DriftPolicy, eventLeaseMs, leaseOwner } from "./drift.ts";

export interface LeasedScheduleOptions {
  store: Store;
  clock: Clock;
  /** The drift policy: its interval and mode are the job's. */
  policy: DriftPolicy;
  log: { warn(msg: string): void };
  /** The store lease's name. */
  lease: string;
  /** One run of the job. */
  run: () => Promise<void>;
  /** The warn line for a run that threw `message` (the next one is in `policy.intervalMs`). */
  failed: (message: string) => string;
}

export class LeasedSchedule {
  private next = 0;
  private readonly owner = leaseOwner();
  private holding = false;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly o: LeasedScheduleOptions) {}

  /** Runs the job once when the interval has passed and this engine holds (or takes) the lease. */
  maybeRun(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running) return this.running;
    const now = this.o.clock.now();
    if (now < this.next) return Promise.resolve();
    this.next = now + this.o.policy.intervalMs;
    this.running = this.leased(now)
      .then((mine) => (mine ? this.o.run() : undefined))
      .catch((err: unknown) => {
        if (!this.stopped) this.o.log.warn(this.o.failed((err as Error).message));
      })
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  private async leased(now: number): Promise<boolean> {
    const { policy, store } = this.o;
    const ms = policy.mode === "event" ? eventLeaseMs(policy.intervalMs) : 2 * policy.intervalMs;
    this.holding = await store.takeLease({
      name: this.o.lease,
      owner: this.owner,
      until: now + ms,
      now,
    });
    return this.holding;
  }

  /** No run starts after this; a held lease is given back (not in `event` mode). */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running?.catch(() => {});
    if (!this.holding || this.o.policy.mode === "event") return;
    this.holding = false;
    await this.o.store
      .takeLease({ name: this.o.lease, owner: this.owner, until: 0, now: this.o.clock.now() })
      .catch(() => false);
  }
}
