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
 * conflicts and the outcome is dropped: the row's new holder decides.
 */
import { BatonError } from "../domain/errors.ts";
import type {
  ControlPlaneEffect,
  ControlPlaneOp,
  DeadlineEffect,
  DeploymentEffect,
  DispatchEffect,
  GateEffect,
  Json,
  NotifyEffect,
  Release,
  ReleaseEvent,
} from "../domain/types.ts";
import { FaultCrash, faultPoint } from "../faults.ts";
import type { Clock } from "../ports/clock.ts";
import type { ControlPlane, WriteContext } from "../ports/control-plane.ts";
import type { DeploymentTracker } from "../ports/deployments.ts";
import type { Dispatcher } from "../ports/dispatcher.ts";
import type { MetricsSource } from "../ports/metrics-source.ts";
import type { Notifier } from "../ports/notifier.ts";
import type { OutboxRow, Store } from "../ports/store.ts";
import { DEFAULT_MODEL } from "../protocol/control-plane.ts";
import { notifyBackoffMs, reconcilerBackoffMs } from "./backoff.ts";
import { evaluateGate } from "./gate-evaluator.ts";
import type { ApplyExtras } from "./kernel.ts";
import type { Logger } from "./logger.ts";
import { buildDispatchPayload } from "./payload.ts";

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

function randomOwner(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(4)), (x) => x.toString(16)).join("");
}

export class Reconciler {
  private readonly opts: ReconcilerOptions;
  /** Counters for diagnostics and benchmarks: passes run, rows claimed, ms spent claiming. */
  readonly stats = { passes: 0, rows: 0, claim_ms: 0, perform_ms: 0 };
  private running: Promise<{ performed: number; failed: number }> | null = null;

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
      const complete = { id: row.id, claim_token: token };
      const e = row.effect;
      switch (e.type) {
        case "deadline":
          await this.deps.releases.apply(row.release_id, deadlineEvent(e), {
            complete_outbox: complete,
          });
          return true;
        case "dispatch":
          await this.deps.releases.apply(row.release_id, await this.dispatch(row, e), {
            complete_outbox: complete,
          });
          return true;
        case "control_plane":
          await this.deps.releases.apply(row.release_id, await this.controlPlane(row, e), {
            complete_outbox: complete,
          });
          return true;
        case "gate":
          await this.deps.releases.apply(row.release_id, await this.gate(row, e), {
            complete_outbox: complete,
          });
          return true;
        case "notify":
          return await this.notify(row, e, token);
        case "deployment":
          return await this.deployment(row, e, token);
      }
      return false;
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

  /**
   * Refuses to perform an effect whose claim lapsed (or lapses within the margin) before it is
   * sent: once the lease ran out another engine may have claimed the row and sent it, so a
   * paused or slow engine must not send it again (it would be a second dispatch of the same step
   * run). @throws LeaseLapsed
   */
  private assertLeaseHeld(row: OutboxRow): void {
    if (row.claimed_until === null) return;
    const margin = Math.min(1_000, this.opts.leaseMs / 4);
    const now = this.deps.clock.now();
    if (now > row.claimed_until - margin) {
      throw new LeaseLapsed(
        `[engine] outbox row ${row.id} (${row.effect.type} of ${row.release_id}): the claim's lease ended at ${row.claimed_until} and it is ${now}; not performing it, another engine may hold it now`,
      );
    }
  }

  private async dispatch(row: OutboxRow, e: DispatchEffect): Promise<ReleaseEvent> {
    const base = { step_run_id: e.step_run_id, dispatch: e.dispatch };
    const release = await this.deps.releases.recentRelease(row.release_id);
    if (!release)
      throw new Error(`[engine] release ${row.release_id} of outbox row ${row.id} is gone`);
    let payload: ReturnType<typeof buildDispatchPayload>;
    try {
      payload = buildDispatchPayload(e, release, this.deps.publicUrl);
    } catch (err) {
      // F01: never send what GitHub would refuse; a definitive failure, like GitHub's 422.
      if (err instanceof BatonError) {
        return { type: "dispatch_failed", ...base, retryable: false, message: err.message };
      }
      throw err;
    }
    this.assertLeaseHeld(row);
    faultPoint("after_commit_before_effect", { step_run_id: e.step_run_id, effect: "dispatch" });
    let event: ReleaseEvent;
    try {
      const r = await this.deps.dispatcher.dispatch(payload);
      event = r.ok
        ? { type: "dispatch_accepted", ...base }
        : {
            type: "dispatch_failed",
            ...base,
            retryable: r.retryable,
            message: r.status ? `HTTP ${r.status}: ${r.message}` : r.message,
            ...(r.retry_at !== undefined ? { throttled_until: r.retry_at } : {}),
          };
    } catch (err) {
      // The port promises not to throw; if it does, GitHub may or may not have it: retryable.
      event = {
        type: "dispatch_failed",
        ...base,
        retryable: true,
        message: `[engine] dispatcher threw: ${(err as Error).message}`,
      };
    }
    faultPoint("after_effect_before_outcome", { step_run_id: e.step_run_id, effect: "dispatch" });
    return event;
  }

  private async controlPlane(row: OutboxRow, e: ControlPlaneEffect): Promise<ReleaseEvent> {
    const release = await this.deps.releases.recentRelease(row.release_id);
    const uid = release?.uid;
    // Every write names its model: traffic is per model and the op carries none.
    const ctx: WriteContext = {
      operation_key: e.operation_key,
      release_id: row.release_id,
      generation: e.generation,
      model: release?.manifest.model ?? DEFAULT_MODEL,
      ...(uid ? { release_uid: uid } : {}),
    };
    this.assertLeaseHeld(row);
    faultPoint("after_commit_before_effect", {
      step_run_id: e.step_run_id,
      effect: "control_plane",
    });
    let event: ReleaseEvent;
    if (e.mode === "apply") {
      let r: Awaited<ReturnType<ControlPlane["apply"]>>;
      try {
        r = await this.deps.controlPlane.apply(e.request, ctx);
      } catch (err) {
        r = {
          outcome: "unknown",
          message: `[engine] control plane threw: ${(err as Error).message}`,
        };
      }
      event = {
        type: "applied",
        step_run_id: e.step_run_id,
        outcome: r.outcome,
        message:
          r.outcome === "ok"
            ? r.replayed
              ? "[engine] control plane replayed the keyed write"
              : "[engine] control plane applied the write"
            : r.outcome === "failed"
              ? `HTTP ${r.status}: ${r.message}`
              : r.message,
      };
      // A 2xx is not the state: read back what the write changed (assert_traffic is a read).
      if (r.outcome === "ok" && e.request.op !== "assert_traffic") {
        event.read_back = await this.readBack(e.request, ctx);
      }
    } else {
      let r: Awaited<ReturnType<ControlPlane["observe"]>>;
      try {
        r = await this.deps.controlPlane.observe(e.request, ctx);
      } catch (err) {
        r = { ok: false, message: `[engine] control plane threw: ${(err as Error).message}` };
      }
      event = {
        type: "observed",
        step_run_id: e.step_run_id,
        matches: r.ok ? r.matches : null,
        message: r.ok
          ? `[engine] control plane shows ${describeObserved(e.request, r.observed)}${r.matches ? "" : `, expected ${describeExpected(e.request)}`}`
          : r.message,
      };
    }
    faultPoint("after_effect_before_outcome", {
      step_run_id: e.step_run_id,
      effect: "control_plane",
    });
    return event;
  }

  /** The read-back after a 2xx write: what the control plane shows now vs the write's target. */
  private async readBack(
    op: ControlPlaneOp,
    ctx: WriteContext,
  ): Promise<{ matches: boolean | null; message: string }> {
    let r: Awaited<ReturnType<ControlPlane["observe"]>>;
    try {
      r = await this.deps.controlPlane.observe(op, ctx);
    } catch (err) {
      r = { ok: false, message: `[engine] control plane threw: ${(err as Error).message}` };
    }
    if (!r.ok) return { matches: null, message: r.message };
    const seen = describeObserved(op, r.observed);
    return r.matches
      ? { matches: true, message: seen }
      : { matches: false, message: `${seen}, expected ${describeExpected(op)}` };
  }

  /**
   * Evaluates a gate once (docs/gate.md): reads the metrics source, decides (pure domain),
   * stores the evidence, and returns it as the `gate` event. Idempotent per evaluation: if
   * this evaluation was stored already (a crash after storing, a lease taken over), the stored
   * record is the one fed back, so the release reads exactly what the store keeps.
   */
  private async gate(row: OutboxRow, e: GateEffect): Promise<ReleaseEvent> {
    const release = await this.deps.releases.recentRelease(row.release_id);
    if (!release) {
      throw new Error(`[engine] release ${row.release_id} of outbox row ${row.id} is gone`);
    }
    const binding = {
      release_id: release.id,
      generation: e.generation,
      manifest_digest: release.manifest_digest,
      wave: e.wave,
    };
    const evidence = await evaluateGate(this.deps.metrics ?? NO_METRICS, {
      manifest: release.manifest,
      binding,
      seq: e.seq,
      waveStartedAt: e.since,
      now: this.deps.clock.now(),
      // The control arm is the baseline observed at start, not an assumed image.
      controlLanes: (release.baseline?.lanes ?? [])
        .filter((l) => l.weight > 0 && !l.excluded)
        .map((l) => l.id),
    });
    if (!evidence) {
      throw new Error(`[engine] release ${release.id} wave ${e.wave} has no gate to evaluate`);
    }
    if (!(await this.deps.store.appendEvidence(evidence))) {
      const kept = (await this.deps.store.listEvidence(release.id)).find(
        (x) =>
          x.generation === e.generation &&
          x.wave === e.wave &&
          x.seq === e.seq &&
          x.manifest_digest === release.manifest_digest,
      );
      if (kept) return { type: "gate", evidence: kept };
    }
    return { type: "gate", evidence };
  }

  /**
   * Sends one notice. Its outcome feeds no transition: delivered or given up, the row is
   * completed on its own and one history line says so; a retryable failure gives the claim
   * back with backoff until `maxTries` claims were spent.
   */
  private async notify(row: OutboxRow, e: NotifyEffect, token: string): Promise<boolean> {
    const { store, clock, log } = this.deps;
    const retry = this.deps.notifyRetry ?? { baseMs: 5_000, maxTries: 8 };
    const notifier = this.deps.notifiers?.get(e.channel);
    const note = async (outcome: "accepted" | "refused", message: string, data: Json) => {
      await store
        .appendHistory([
          {
            release_id: row.release_id,
            at: clock.now(),
            kind: "notice",
            step_run_id: null,
            outcome,
            message,
            data: {
              channel: e.channel,
              delivery: e.delivery,
              notice: e.notice.kind,
              ...(data as object),
            },
          },
        ])
        .catch((err) => log.error(`[notifier] could not record delivery ${e.delivery}`, err));
    };
    if (!notifier) {
      log.warn(
        `[notifier] no ${e.channel} channel is configured now; notice ${e.delivery} dropped`,
      );
      await store.completeOutbox(row.id, token);
      await note(
        "refused",
        `[notifier] ${e.notice.kind} notice not sent: no ${e.channel} channel is configured`,
        {},
      );
      return true;
    }
    this.assertLeaseHeld(row);
    faultPoint("after_commit_before_effect", { release_id: row.release_id, effect: "notify" });
    let r: Awaited<ReturnType<Notifier["send"]>>;
    try {
      r = await notifier.send(e.notice, e.delivery);
    } catch (err) {
      r = {
        ok: false,
        retryable: true,
        status: null,
        message: `notifier threw: ${(err as Error).message}`,
      };
    }
    faultPoint("after_effect_before_outcome", { release_id: row.release_id, effect: "notify" });
    const tries = row.claims;
    if (r.ok) {
      if (await store.completeOutbox(row.id, token)) {
        await note(
          "accepted",
          `[notifier] ${e.notice.kind} notice sent to ${e.channel}${r.status ? ` (HTTP ${r.status})` : ""}${tries > 1 ? ` on try ${tries}` : ""}`,
          { tries, status: r.status },
        );
      }
      return true;
    }
    if (r.retryable && tries < retry.maxTries) {
      const delay = notifyBackoffMs(tries, retry.baseMs);
      log.warn(
        `[notifier] ${e.channel} ${e.delivery} try ${tries} of ${retry.maxTries} failed (${r.message}); next try in ${delay} ms`,
      );
      await store.releaseClaim(row.id, token, clock.now() + delay);
      return false;
    }
    log.error(`[notifier] ${e.channel} ${e.delivery} given up after ${tries} tries: ${r.message}`);
    if (await store.completeOutbox(row.id, token)) {
      await note(
        "refused",
        `[notifier] ${e.notice.kind} notice to ${e.channel} given up after ${tries} ${tries === 1 ? "try" : "tries"}: ${r.message}`,
        { tries, status: r.status },
      );
    }
    return true;
  }

  /**
   * Posts one GitHub deployment status. Like a notice, its outcome feeds no transition: done or
   * given up, the row is completed on its own and one history line (`deployment`) says so; a
   * retryable failure gives the claim back with backoff until `maxTries` claims were spent.
   */
  private async deployment(row: OutboxRow, e: DeploymentEffect, token: string): Promise<boolean> {
    const deps = this.deps;
    const { store, clock, log } = deps;
    const retry = deps.deploymentsRetry ?? { baseMs: 5_000, maxTries: 8 };
    const what = `${e.report.state} deployment status of ${e.report.release_id} (environment ${e.report.environment})`;
    const note = async (outcome: "accepted" | "refused", message: string, data: object) => {
      await store
        .appendHistory([
          {
            release_id: row.release_id,
            at: clock.now(),
            kind: "deployment",
            step_run_id: null,
            outcome,
            message,
            data: {
              delivery: e.delivery,
              state: e.report.state,
              environment: e.report.environment,
              ...data,
            } as Json,
          },
        ])
        .catch((err) =>
          log.error(`[github] could not record deployment status ${e.delivery}`, err),
        );
    };
    const tracker = deps.deployments;
    if (!tracker) {
      log.warn(`[github] deployments are not configured now; ${what} dropped`);
      await store.completeOutbox(row.id, token);
      await note("refused", `[github] ${what} not sent: GitHub deployments are not configured`, {});
      return true;
    }
    this.assertLeaseHeld(row);
    faultPoint("after_commit_before_effect", { release_id: row.release_id, effect: "deployment" });
    let r: Awaited<ReturnType<DeploymentTracker["report"]>>;
    try {
      r = await tracker.report(e.report);
    } catch (err) {
      r = {
        ok: false,
        retryable: true,
        status: null,
        message: `deployments threw: ${(err as Error).message}`,
      };
    }
    faultPoint("after_effect_before_outcome", { release_id: row.release_id, effect: "deployment" });
    const tries = row.claims;
    if (r.ok) {
      if (await store.completeOutbox(row.id, token)) {
        await note(
          "accepted",
          `[github] ${what} posted${r.status ? ` (HTTP ${r.status})` : " (already shown)"}${tries > 1 ? ` on try ${tries}` : ""}`,
          { tries, status: r.status },
        );
      }
      return true;
    }
    if (r.retryable && tries < retry.maxTries) {
      const delay = notifyBackoffMs(tries, retry.baseMs);
      log.warn(
        `[github] ${what}: try ${tries} of ${retry.maxTries} failed (${r.message}); next try in ${delay} ms`,
      );
      await store.releaseClaim(row.id, token, clock.now() + delay);
      return false;
    }
    log.error(`[github] ${what} given up after ${tries} tries: ${r.message}`);
    if (await store.completeOutbox(row.id, token)) {
      await note(
        "refused",
        `[github] ${what} given up after ${tries} ${tries === 1 ? "try" : "tries"}: ${r.message}`,
        { tries, status: r.status },
      );
    }
    return true;
  }
}

/** What a read shows, limited to the fields the op concerns (lane id first). */
function describeObserved(op: ControlPlaneOp, observed: unknown): string {
  if (op.op === "set_traffic" || op.op === "assert_traffic") {
    return `traffic ${observed === null ? "(no lane serves the model)" : JSON.stringify(observed)}`;
  }
  const lane = observed as { excluded?: unknown; capabilities?: unknown; advertised?: unknown };
  if (!lane) return `no lane ${op.lane}`;
  return op.op === "set_marker"
    ? `lane ${op.lane} excluded=${String(lane.excluded)}`
    : `lane ${op.lane} capabilities=${JSON.stringify(lane.capabilities)} advertised=${String(lane.advertised)}`;
}

/** The state an op asks for, in the words of `describeObserved`. */
function describeExpected(op: ControlPlaneOp): string {
  switch (op.op) {
    case "set_traffic":
    case "assert_traffic":
      return `traffic ${JSON.stringify(op.weights)}`;
    case "set_marker":
      return `excluded=${op.present}`;
    case "set_capabilities":
      return `capabilities=${JSON.stringify([...new Set(op.capabilities)].sort())} advertised=${op.advertised}`;
  }
}
/** No metrics source configured: every read is missing evidence, which never passes. */
const NO_METRICS: MetricsSource = {
  async observe(q) {
    const why = "no metrics source is configured (set BATON_PROMETHEUS_URL; docs/gate.md)";
    return {
      assignments: { missing: why },
      metrics: Object.fromEntries(q.analysis.metrics.map((m) => [m.name, { missing: why }])),
    };
  },
};

/** The claim's lease ran out (or nearly) before the effect was sent (e.g. the process was paused). */
class LeaseLapsed extends Error {}

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
