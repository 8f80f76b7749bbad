/**
 * The apply kernel: the one writer of release state (docs/state-machine.md "Persistence").
 * Every event goes through `apply`: load, run the pure `transition`, add what the change
 * deserves (domain/change-effects.ts), and write it all in one `store.commit` guarded by
 * `resource_version`; on a conflict reload and decide again (bounded). Refusals only append
 * history. A release's writes run one at a time in this process (a queue per release), and a
 * bounded cache saves the read before a decision. Effects are performed later by the
 * reconciler, never here: after a commit that wrote effects the kernel only says so
 * (`EffectsDue`).
 */
import { changeEffects, type EffectsPolicy } from "../domain/change-effects.ts";
import { BatonError } from "../domain/errors.ts";
import { withRequests } from "../domain/release-history.ts";
import type { HistoryEntry, Json, OutboxEffect, Release, ReleaseEvent } from "../domain/types.ts";
import type { Clock } from "../ports/clock.ts";
import type { AttemptResult, CreateExtras, Store } from "../ports/store.ts";
import type { Accepted, Refusal } from "./api.ts";
import type { Domain } from "./domain.ts";
import type { EffectsDue } from "./effects-due.ts";
import { KeyedQueue } from "./keyed-queue.ts";
import type { Logger } from "./logger.ts";
import { RefusalLog } from "./refusal-log.ts";

/** What `apply` may do besides the transition, in the same transaction. */
export interface ApplyExtras {
  /** Completes this outbox row in the commit (the event is that row's outcome). */
  complete_outbox?: { id: number; claim_token: string };
  /** Attempt results to store with the commit, built from the new release state. */
  attemptResults?: (next: Release) => AttemptResult[];
  /** Fault point name to pass just before the commit (crash tests). */
  beforeCommit?: () => void;
}

/** A stale outbox claim: another engine process took the row over, its outcome stands. */
export interface StaleClaim {
  ok: false;
  status: 409;
  code: "stale_claim";
  reason: string;
}

/** A decision of `annotate`: history to commit beside the release, decided on `release`. */
export interface Annotation {
  release: Release;
  history: HistoryEntry[];
  reply: Record<string, Json>;
  /** The decision's time (epoch ms), the commit's `now`. */
  now: number;
}

export interface KernelDeps {
  store: Store;
  clock: Clock;
  domain: Domain;
  log: Logger;
  /** What a change deserves besides its transition's effects (notices, deployment statuses). */
  effects: EffectsPolicy;
  /** Told after every commit that wrote effects (the core connects it to the reconciler). */
  effectsDue?: EffectsDue;
  /** Reload-and-retry bound on `resource_version` conflicts. Default 16. */
  maxConflictRetries?: number;
}

/** Releases kept in the read cache (each a few tens of KB: ~25 MB at most). */
const RELEASE_CACHE_MAX = 500;

/**
 * How long (ms) after a commit lost to another engine process cached copies are checked
 * against the stored version before use (`Store.getReleaseIfChanged`).
 */
const SHARED_WRITERS_MS = 10 * 60_000;

/** 404 `not_found` with `reason`. */
export function notFound(reason: string): Refusal {
  return { ok: false, status: 404, code: "not_found", reason };
}

export class ApplyKernel {
  readonly store: Store;
  readonly clock: Clock;
  readonly domain: Domain;
  private readonly log: Logger;
  private readonly policy: EffectsPolicy;
  private readonly effectsDue: EffectsDue | undefined;
  private readonly maxRetries: number;
  /**
   * Writes of one release (`apply`'s events, `annotate`), keyed by release id: run one at a
   * time in this process, so two of them (a dispatch outcome and the preflight it triggered)
   * never race for the same `resource_version` here; only another engine's write can conflict.
   */
  private readonly perRelease = new KeyedQueue();
  /** When a commit last lost to another writer (ms; -∞: never): cached copies are checked then. */
  private othersWroteAt = Number.NEGATIVE_INFINITY;
  /** Bounds the rows refused preflights and callbacks write (refusal-log.ts). */
  readonly refusals = new RefusalLog();
  /** Last known state per release id, oldest first (insertion order). */
  private readonly cache = new Map<string, Release>();

  constructor(deps: KernelDeps) {
    this.store = deps.store;
    this.clock = deps.clock;
    this.domain = deps.domain;
    this.log = deps.log;
    this.policy = deps.effects;
    this.effectsDue = deps.effectsDue;
    this.maxRetries = deps.maxConflictRetries ?? 16;
  }

  /**
   * Applies one event to one release (docs/state-machine.md "Persistence").
   * Returns the transition's answer; a refusal is appended to history. With
   * `extras.complete_outbox`, the row is completed in the same commit, or, when the event
   * changed nothing or was refused, completed on its own; a lost claim yields `StaleClaim`
   * and the outcome is dropped (the row's new holder decides).
   * @throws BatonError `conflict` when `maxConflictRetries` reloads all lost the race.
   */
  apply(
    releaseId: string,
    event: ReleaseEvent,
    extras: ApplyExtras = {},
  ): Promise<Accepted | Refusal | StaleClaim> {
    return this.perRelease.run(releaseId, () => this.applyNow(releaseId, event, extras));
  }

  private async applyNow(
    releaseId: string,
    event: ReleaseEvent,
    extras: ApplyExtras,
  ): Promise<Accepted | Refusal | StaleClaim> {
    // Round 0 may use the cached copy; any doubt (conflict, or an answer other than an
    // accepted change) is settled against a fresh read before it counts.
    let fresh = false;
    for (let round = 0; round <= this.maxRetries; round++) {
      const release = await this.read(releaseId, fresh);
      if (!release) {
        if (extras.complete_outbox) await this.completeAlone(extras.complete_outbox);
        return notFound(`[engine] release ${releaseId} does not exist`);
      }
      const now = this.clock.now();
      const r = this.domain.transition(release, event, now);
      if ((!r.ok || !r.changed) && !fresh && this.cache.get(releaseId) === release) {
        fresh = true;
        round--; // not a conflict: re-decide on the stored state, uncounted
        continue;
      }
      if (!r.ok) {
        await this.appendRefused(event, r.code, r.history, now);
        if (extras.complete_outbox) await this.completeAlone(extras.complete_outbox);
        return {
          ok: false,
          status: r.status,
          code: r.code,
          reason: r.reason,
          ...(r.problems ? { problems: r.problems } : {}),
        };
      }
      if (!r.changed) {
        await this.appendRefused(event, "repeat", r.history, now);
        if (extras.complete_outbox) await this.completeAlone(extras.complete_outbox);
        return { ok: true, changed: false, release: r.release, reply: r.reply };
      }
      extras.beforeCommit?.();
      const effects: OutboxEffect[] = [
        ...r.effects,
        ...changeEffects(release, r.release, event, now, this.policy),
      ];
      const res = await this.store.commit({
        release: r.release,
        expected_version: release.resource_version,
        history: r.history,
        effects,
        now,
        ...(extras.attemptResults ? { attempt_results: extras.attemptResults(r.release) } : {}),
        ...(extras.complete_outbox ? { complete_outbox: extras.complete_outbox } : {}),
      });
      if (res.ok) {
        this.remember(r.release);
        if (effects.length > 0) this.effectsDue?.notify();
        return { ok: true, changed: true, release: r.release, reply: r.reply };
      }
      if (res.conflict === "outbox_claim") {
        this.log.warn(
          `[engine] outcome of outbox row ${extras.complete_outbox?.id} for ${releaseId} dropped: the claim was taken over`,
        );
        return {
          ok: false,
          status: 409,
          code: "stale_claim",
          reason: `[engine] outbox row ${extras.complete_outbox?.id} is no longer held by this claim; its new holder's outcome stands`,
        };
      }
      // resource_version conflict: another writer won (another engine process: this one
      // applies a release's events one at a time); reload and decide again.
      this.lostTo(releaseId);
      fresh = true;
    }
    throw new BatonError(
      "conflict",
      `[engine] release ${releaseId} kept changing under ${this.maxRetries + 1} tries of ${event.type}; retry the request`,
    );
  }

  /**
   * A write that changes nothing of release `id` but raises its `resource_version` by one:
   * history decided by `decide` on its own fresh read (a refusal ends it), committed
   * conditionally, in turn with the release's other writes in this process. Of two engines
   * annotating at once exactly one commit lands; the other's `decide` runs again on what it
   * wrote. `what` names the write in the conflict error.
   * @throws BatonError `conflict` when `maxConflictRetries` reloads all lost the race; what
   *   `decide` throws.
   */
  annotate(
    id: string,
    what: string,
    decide: () => Promise<Annotation | Refusal>,
  ): Promise<Accepted | Refusal> {
    return this.perRelease.run(id, async () => {
      for (let round = 0; round <= this.maxRetries; round++) {
        const d = await decide();
        if ("ok" in d) return d;
        const next: Release = { ...d.release, resource_version: d.release.resource_version + 1 };
        const res = await this.store.commit({
          release: next,
          expected_version: d.release.resource_version,
          history: d.history,
          effects: [],
          now: d.now,
        });
        if (res.ok) {
          this.remember(next);
          return { ok: true, changed: true, release: next, reply: d.reply };
        }
        // Another writer changed the release since the read: read again and decide on it.
        this.lostTo(id);
      }
      throw new BatonError(
        "conflict",
        `[engine] release ${id} kept changing under ${this.maxRetries + 1} tries of ${what}; retry the request`,
      );
    });
  }

  /**
   * Stores a new release with its first history and effects in one write
   * (`Store.createRelease`). A `started` release is cached, and with `wake` the reconciler is
   * told its effects are due. @throws what the store throws (`LanesClaimed`, …).
   */
  async create(
    release: Release,
    history: HistoryEntry[],
    effects: OutboxEffect[],
    now: number,
    extras: CreateExtras,
    o: { started: boolean; wake: boolean },
  ): Promise<void> {
    await this.store.createRelease(release, history, effects, now, extras);
    if (o.started) this.remember(release);
    if (o.wake) this.effectsDue?.notify();
  }

  /**
   * The release, from the cache unless `fresh`. The cache only saves a read: every write is
   * still conditional on `resource_version`, so a stale copy (another engine process wrote)
   * costs one conflict and a reload, never a wrong state.
   */
  async read(id: string, fresh: boolean): Promise<Release | null> {
    if (!fresh) {
      const hit = this.cache.get(id);
      if (hit && this.clock.now() - this.othersWroteAt > SHARED_WRITERS_MS) return hit;
      if (hit) {
        // Another engine process wrote recently: check the copy (a version read) before
        // deciding on it, instead of losing a whole commit to a conflict.
        const r = await this.store.getReleaseIfChanged(id, hit.resource_version);
        if (r === "unchanged") return hit;
        if (r) this.remember(r);
        else this.cache.delete(id);
        return r;
      }
    }
    const r = await this.store.getRelease(id);
    if (r) this.remember(r);
    else this.cache.delete(id);
    return r;
  }

  /** A recent copy of the release (cached), for reads that need only immutable fields. */
  recentRelease(id: string): Promise<Release | null> {
    const hit = this.cache.get(id);
    return hit ? Promise.resolve(hit) : this.read(id, true);
  }

  private remember(r: Release): void {
    const held = this.cache.get(r.id);
    if (held && held.resource_version > r.resource_version) return;
    this.cache.delete(r.id);
    this.cache.set(r.id, r);
    if (this.cache.size > RELEASE_CACHE_MAX) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
  }

  /** A commit on `id` lost to another writer: forget the copy, check copies for a while. */
  private lostTo(id: string): void {
    this.othersWroteAt = this.clock.now();
    this.cache.delete(id);
  }

  /**
   * Appends the history of an event that changed nothing. Preflights and callbacks (which
   * anyone can repeat) go through the refusal log: at most one row per (step run, kind, code)
   * per minute, carrying the count of the requests it stands for (refusal-log.ts).
   */
  private async appendRefused(
    event: ReleaseEvent,
    code: string,
    history: HistoryEntry[],
    now: number,
  ): Promise<void> {
    if (history.length === 0) return;
    if (event.type !== "preflight" && event.type !== "callback") {
      await this.store.appendHistory(history);
      return;
    }
    const requests = this.refusals.admit(`${event.step_run_id}|${event.type}|${code}`, now);
    if (requests === null) return;
    await this.store.appendHistory(history.map((h) => withRequests(h, requests)));
  }

  private async completeAlone(row: { id: number; claim_token: string }): Promise<void> {
    const done = await this.store.completeOutbox(row.id, row.claim_token);
    if (!done) this.log.warn(`[engine] outbox row ${row.id}: claim lost before completion`);
  }
}
