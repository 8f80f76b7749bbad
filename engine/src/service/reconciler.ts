/**
 * The reconciler: performs the outbox (docs/state-machine.md "Persistence").
 *
 * One pass claims due rows (`store.claimDue`, Postgres `FOR UPDATE SKIP LOCKED` with a lease),
 * performs each through the Dispatcher or ControlPlane port, and feeds the outcome back as an
 * event whose commit completes the row. A deadline row performs nothing external: its outcome
 * is the `deadline` event itself. Retries of failed calls (bound and backoff) are decided by
 * the transition, which re-emits the same keyed effect with `not_before`; the reconciler only
 * backs off its own failures (store unreachable, a port that threw) by giving the claim back.
 * If the claim was lost meanwhile (lease expired, another engine took the row), the commit
 * conflicts and the outcome is dropped: the row's new holder decides. This file is the claim
 * loop; how each kind of row is performed is in perform/ (dispatch, control plane, gate, the
 * reads of a recovery verification, the deliveries of notices and deployment statuses).
 */
import type { DeadlineEffect, ReleaseEvent } from "../domain/types.ts";
import { FaultCrash } from "../faults.ts";
import type { OutboxRow } from "../ports/store.ts";
import { reconcilerBackoffMs } from "./backoff.ts";
import {
  assertLeaseHeld,
  LeaseLapsed,
  type PerformContext,
  type ReconcilerDeps,
} from "./perform/context.ts";
import { performControlPlane } from "./perform/control-plane.ts";
import { performDeployment, performNotify } from "./perform/deliveries.ts";
import { performDispatch } from "./perform/dispatch.ts";
import { performGate } from "./perform/gate.ts";
import { performStopCheck } from "./perform/stop.ts";
import { performVerify } from "./perform/verify.ts";

export type { ReconcilerDeps, ReleaseCommits } from "./perform/context.ts";

export interface ReconcilerOptions {
  /** Rows claimed per pass. Default 64. */
  batch: number;
  /** Lease of a claim (ms); a crashed holder's rows are claimable again after it. Default 60 s. */
  leaseMs: number;
  /** Claim owner name (diagnostics). */
  owner: string;
  /** Passes per `runOnce` while rows keep coming due now (drains a burst). Default 1. */
  maxPasses: number;
  /** Rows performed at once in `kick` mode. Default 256. */
  maxInFlight: number;
  /**
   * Shortest time (ms) between two claims in `kick` mode, so a burst of commits shares one
   * claim instead of each paying for its own. Default 5.
   */
  kickIntervalMs: number;
}

function randomOwner(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(4)), (x) => x.toString(16)).join("");
}

export class Reconciler {
  private readonly opts: ReconcilerOptions;
  /** Counters for diagnostics and benchmarks: passes run, rows claimed, ms spent claiming. */
  readonly stats = { passes: 0, rows: 0, claim_ms: 0, perform_ms: 0 };
  private running: Promise<{ performed: number; failed: number }> | null = null;
  /** What the performers (perform/) see: the deps and this reconciler's lease check. */
  private readonly perform: PerformContext;

  constructor(
    private readonly deps: ReconcilerDeps,
    opts: Partial<ReconcilerOptions> = {},
  ) {
    this.opts = {
      batch: opts.batch ?? 64,
      leaseMs: opts.leaseMs ?? 60_000,
      owner: opts.owner ?? `engine-${globalThis.process?.pid ?? randomOwner()}`,
      maxPasses: opts.maxPasses ?? 1,
      maxInFlight: opts.maxInFlight ?? 256,
      kickIntervalMs: opts.kickIntervalMs ?? 5,
    };
    this.perform = {
      deps,
      assertLeaseHeld: (row) => assertLeaseHeld(row, this.opts.leaseMs, deps.clock.now()),
    };
  }

  private claiming = false;
  private lastClaim = 0;
  private kickAgain = false;
  private stopped = false;
  private readonly inflight = new Set<Promise<unknown>>();

  /**
   * Claims what is due now and starts performing it, without waiting for rows already in
   * flight (so one slow effect never holds up the others). Calls while a claim runs are
   * coalesced into one more claim after it. Used after commits that wrote effects.
   */
  kick(): void {
    if (this.stopped) return;
    if (this.claiming) {
      this.kickAgain = true;
      return;
    }
    this.claiming = true;
    void this.claimLoop();
  }

  private async claimLoop(): Promise<void> {
    try {
      do {
        this.kickAgain = false;
        const room = this.opts.maxInFlight - this.inflight.size;
        if (room <= 0) {
          await Promise.race(this.inflight);
          this.kickAgain = true;
          continue;
        }
        const limit = Math.min(this.opts.batch, room);
        const wait = this.lastClaim + this.opts.kickIntervalMs - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        this.kickAgain = false; // kicks during the wait are served by this claim
        const t0 = performance.now();
        this.lastClaim = t0;
        const rows = await this.deps.store.claimDue({
          now: this.deps.clock.now(),
          limit,
          leaseMs: this.opts.leaseMs,
          owner: this.opts.owner,
        });
        this.stats.passes++;
        this.stats.rows += rows.length;
        this.stats.claim_ms += performance.now() - t0;
        for (const row of rows) {
          const p: Promise<unknown> = this.performRow(row)
            .catch((e) => this.deps.log.error(`[engine] outbox row ${row.id} failed`, e))
            .finally(() => this.inflight.delete(p));
          this.inflight.add(p);
        }
        if (rows.length === limit) this.kickAgain = true; // more may be due already
      } while (this.kickAgain && !this.stopped);
    } catch (e) {
      this.deps.log.error("[engine] reconciler claim failed", e);
    } finally {
      this.claiming = false;
    }
  }

  /**
   * Resolves when no claim runs and no row is in flight (bounded: at most 1000 waits). A
   * serverless entry hands this to `waitUntil` so effects a request started finish.
   */
  async idle(): Promise<void> {
    for (let i = 0; i < 1000 && (this.claiming || this.inflight.size > 0); i++) {
      if (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
      else await new Promise((r) => setTimeout(r, 1));
    }
  }

  /** Stops `kick` mode and waits (bounded by the rows in flight) for performing rows to end. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (let i = 0; i < 1000 && (this.claiming || this.inflight.size > 0); i++) {
      if (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
      else await new Promise((r) => setTimeout(r, 1));
    }
    await this.running?.catch(() => {});
  }

  /**
   * One reconciler run: up to `maxPasses` passes of claim-and-perform. Concurrent calls share
   * the run in progress. `performed` counts rows whose outcome was fed back, `failed` rows
   * given back for a later try. Rethrows `FaultCrash` (simulated crash).
   */
  runOnce(): Promise<{ performed: number; failed: number }> {
    if (!this.running) {
      this.running = this.passes().finally(() => {
        this.running = null;
      });
    }
    return this.running;
  }

  private async passes(): Promise<{ performed: number; failed: number }> {
    const total = { performed: 0, failed: 0 };
    for (let i = 0; i < this.opts.maxPasses; i++) {
      const t0 = performance.now();
      const rows = await this.deps.store.claimDue({
        now: this.deps.clock.now(),
        limit: this.opts.batch,
        leaseMs: this.opts.leaseMs,
        owner: this.opts.owner,
      });
      const t1 = performance.now();
      this.stats.passes++;
      this.stats.rows += rows.length;
      this.stats.claim_ms += t1 - t0;
      if (rows.length === 0) break;
      const results = await Promise.all(rows.map((row) => this.performRow(row)));
      this.stats.perform_ms += performance.now() - t1;
      for (const ok of results) ok ? total.performed++ : total.failed++;
    }
    return total;
  }

  /**
   * Performs one claimed row; true when its outcome was fed back. While it performs, its
   * claim is renewed every third of the lease, so an effect slower than the lease (a slow
   * control plane, a loaded machine) is not taken over and performed again while this
   * engine is alive; a crashed or paused engine stops renewing and the row is claimable
   * again once its lease ends.
   */
  private async performRow(row: OutboxRow): Promise<boolean> {
    const token = row.claim_token;
    if (!token) return false;
    const renew = setInterval(
      () => {
        const until = this.deps.clock.now() + this.opts.leaseMs;
        void this.deps.store
          .extendClaim(row.id, token, until)
          .then((held) => {
            if (held) row.claimed_until = Math.max(row.claimed_until ?? 0, Math.ceil(until));
          })
          .catch(() => {}); // unreachable store: the lease runs out, the row's next holder decides
      },
      Math.max(1, Math.floor(this.opts.leaseMs / 3)),
    );
    renew.unref?.();
    try {
      return await this.performClaimed(row, token);
    } finally {
      clearInterval(renew);
    }
  }

  private async performClaimed(row: OutboxRow, token: string): Promise<boolean> {
    try {
      const due = dueAt(row);
      if (due > this.deps.clock.now()) {
        // Claimed early (due_at set from an older clock): give it back until it is due.
        await this.deps.store.releaseClaim(row.id, token, due);
        return false;
      }
      const e = row.effect;
      let event: ReleaseEvent;
      switch (e.type) {
        case "notify":
          return await performNotify(this.perform, row, e, token);
        case "deployment":
          return await performDeployment(this.perform, row, e, token);
        case "deadline":
          event = deadlineEvent(e);
          break;
        case "dispatch":
          event = await performDispatch(this.perform, row, e);
          break;
        case "control_plane":
          event = await performControlPlane(this.perform, row, e);
          break;
        case "gate":
          event = await performGate(this.perform, row, e);
          break;
        case "stop_check":
          event = await performStopCheck(this.perform, row, e);
          break;
        case "verify":
          event = await performVerify(this.perform, row, e);
          break;
        default:
          return false;
      }
      // The outcome's commit completes the row (a lost claim drops it: the new holder decides).
      await this.deps.releases.apply(row.release_id, event, {
        complete_outbox: { id: row.id, claim_token: token },
      });
      return true;
    } catch (err) {
      if (err instanceof FaultCrash) throw err;
      if (err instanceof LeaseLapsed) {
        // Another engine may hold the row by now: do not perform; give it back if still ours.
        this.deps.log.warn(err.message);
        await this.deps.store.releaseClaim(row.id, token, this.deps.clock.now()).catch(() => {});
        return false;
      }
      const delay = reconcilerBackoffMs(row.claims);
      this.deps.log.error(
        `[engine] outbox row ${row.id} (${row.effect.type} of ${row.release_id}) failed on claim ${row.claims}; retrying in ${delay} ms`,
        err,
      );
      await this.deps.store
        .releaseClaim(row.id, token, this.deps.clock.now() + delay)
        .catch((e2) =>
          this.deps.log.error(`[engine] could not give back outbox row ${row.id}`, e2),
        );
      return false;
    }
  }
}

function dueAt(row: OutboxRow): number {
  const e = row.effect;
  if (e.type === "deadline") return Math.max(row.due_at, e.at);
  return Math.max(row.due_at, e.not_before ?? 0);
}

function deadlineEvent(e: DeadlineEffect): ReleaseEvent {
  return {
    type: "deadline",
    step_run_id: e.step_run_id,
    kind: e.kind,
    dispatch: e.dispatch,
    attempt: e.attempt,
  };
}
