/**
 * Probing mutable dependencies (docs/drift.md "Mutable dependencies"), on the drift schedule:
 * every drift interval, from the engine's tick, one engine (the holder of the store lease
 * `dependency-probes`) asks each dependency's probe — as the newest release of its model
 * declares it — which revision the provider serves now, and keeps the answers in the engine
 * state `dependencies`. Each model's dependencies are then judged against its newest succeeded
 * release (domain/dependency-drift.ts): a revision other than the one it declares, or a contract
 * past its last day, is drift, written once to that release's history with its notices; once a
 * newer release that declares what the probes observe has succeeded, a
 * `dependency_drift_cleared` entry says the model was requalified. Starts read the same state
 * (use-cases/start.ts).
 *
 * Bounded: one observation per interval (engine clock), the newest `RELEASES` releases, at most
 * `MAX_PROBES` probes, each within the probe adapter's timeout; a probe that fails keeps the
 * last revision it answered and records the failure.
 */
import { driftNotices, type EffectsPolicy, NO_EFFECTS_POLICY } from "../domain/change-effects.ts";
import {
  type DependencyBook,
  type DependencyObservation,
  dependencyBookOf,
  dependencyClearedEntry,
  dependencyDriftEntry,
  dependencyDriftMessage,
  dependencyDriftPrint,
  modelDependencyDrift,
} from "../domain/dependency-drift.ts";
import type { DependencyProbeSpec } from "../domain/mutable-dependencies.ts";
import type { Json, Release } from "../domain/types.ts";
import type { Clock } from "../ports/clock.ts";
import type { DependencyProbe } from "../ports/dependency-probe.ts";
import type { Store } from "../ports/store.ts";
import type { DriftPolicy } from "./drift.ts";
import { LeasedSchedule } from "./leased-schedule.ts";

/** Name of the store lease the probing engine holds. */
export const DEPENDENCY_LEASE = "dependency-probes";
/** Name of the engine state that keeps the probes' answers (`Store.putState`). */
export const DEPENDENCY_STATE = "dependencies";
/** Releases looked through per observation (newest first). */
const RELEASES = 100;
/** Probes asked per observation at most; the rest wait for a later one. */
const MAX_PROBES = 64;

export interface DependencyProbesDeps {
  store: Store;
  probe: DependencyProbe;
  clock: Clock;
  /** The drift policy: its interval and mode are this schedule's too. */
  policy: DriftPolicy;
  log: { warn(msg: string): void };
  /** Who is told of a dependency drift; none when absent. */
  effects?: EffectsPolicy;
}

/** The engine state `dependencies` as stored (the empty book when never written). */
export async function readDependencyBook(store: Store): Promise<DependencyBook> {
  return dependencyBookOf((await store.getState(DEPENDENCY_STATE))?.value);
}

/** One probe to ask: whose, and what the newest release of the model declares. */
interface Asked {
  model: string;
  name: string;
  release: string;
  spec: DependencyProbeSpec;
}

/** The periodic prober; `maybeRun` is called from every engine tick (service/maintenance.ts). */
export class DependencyProbes {
  private readonly schedule: LeasedSchedule;
  private readonly effects: EffectsPolicy;

  constructor(private readonly deps: DependencyProbesDeps) {
    this.effects = deps.effects ?? NO_EFFECTS_POLICY;
    this.schedule = new LeasedSchedule({
      ...deps,
      lease: DEPENDENCY_LEASE,
      run: () => this.observe(),
      failed: (m) =>
        `[drift] mutable dependencies not observed: ${m}; next observation in ${deps.policy.intervalMs} ms`,
    });
  }

  /** Probes once when the interval has passed and this engine holds (or takes) the lease. */
  maybeRun(): Promise<void> {
    return this.schedule.maybeRun();
  }

  /** No observation starts after this; a held lease is given back (not in `event` mode). */
  stop(): Promise<void> {
    return this.schedule.stop();
  }

  private async observe(): Promise<void> {
    const { store } = this.deps;
    const summaries = await store.listReleases({ limit: RELEASES });
    // Per model: the newest release (whose probes are asked) and the newest succeeded one
    // (what the model's dependencies were last qualified as).
    const newest = new Map<string, string>();
    const succeeded = new Map<string, string>();
    for (const s of summaries) {
      if (!newest.has(s.model)) newest.set(s.model, s.id);
      if (s.state === "succeeded" && !succeeded.has(s.model)) succeeded.set(s.model, s.id);
    }
    const releases = new Map<string, Release>();
    for (const id of new Set([...newest.values(), ...succeeded.values()])) {
      const r = await store.getRelease(id);
      if (r) releases.set(id, r);
    }
    const asked: Asked[] = [];
    for (const [model, id] of newest) {
      for (const d of releases.get(id)?.manifest.mutable_dependencies ?? [])
        asked.push({ model, name: d.name, release: id, spec: d.probe });
    }
    if (asked.length > MAX_PROBES)
      this.deps.log.warn(
        `[drift] ${asked.length} mutable dependencies to probe; ${MAX_PROBES} are asked per observation`,
      );
    const book = await readDependencyBook(store);
    const observations = await Promise.all(
      asked.slice(0, MAX_PROBES).map((a) => this.ask(a, book)),
    );
    const kept = book.observations.filter(
      (o) => !observations.some((n) => n.model === o.model && n.name === o.name),
    );
    const next: DependencyBook = {
      observations: [...kept, ...observations],
      recorded: [...book.recorded],
    };
    const at = this.deps.clock.now();
    for (const id of succeeded.values()) {
      const release = releases.get(id);
      if (!release) continue;
      await this.record(next, release, at);
    }
    await store.putState({ name: DEPENDENCY_STATE, value: next as unknown as Json, now: at });
  }

  /** One probe's answer as an observation (a failure keeps the last revision answered). */
  private async ask(a: Asked, book: DependencyBook): Promise<DependencyObservation> {
    const before = book.observations.find((o) => o.model === a.model && o.name === a.name);
    const answer = await this.deps.probe.revision(a.spec);
    const at = this.deps.clock.now();
    if (answer.ok)
      return {
        model: a.model,
        name: a.name,
        release: a.release,
        revision: answer.revision,
        observed_at: at,
        error: null,
        error_at: null,
      };
    this.deps.log.warn(
      `[drift] the probe of mutable dependency ${a.name} of model ${a.model} gave no revision: ${answer.message}`,
    );
    return {
      model: a.model,
      name: a.name,
      release: a.release,
      revision: before?.revision ?? null,
      observed_at: before?.observed_at ?? null,
      error: answer.message,
      error_at: at,
    };
  }

  /**
   * Writes what changed of the model's dependency drift since the last record (kept in `book`):
   * a `dependency_drift` entry with its notices, in one commit, or a `dependency_drift_cleared`
   * entry once the newest succeeded release declares what the probes observe.
   */
  private async record(book: DependencyBook, release: Release, now: number): Promise<void> {
    const model = release.manifest.model;
    const d = modelDependencyDrift(release.manifest, release.id, book, now);
    const print = dependencyDriftPrint(d);
    const i = book.recorded.findIndex((r) => r.model === model);
    const before = i >= 0 ? book.recorded[i] : undefined;
    if ((before?.print ?? "") === print) return;
    const entry = { model, print, release: release.id };
    if (i >= 0) book.recorded[i] = entry;
    else book.recorded.push(entry);
    if (d && before?.print && before.release !== release.id) {
      // A newer succeeded release holds the drift now: the older one's banner ends.
      await this.deps.store.appendHistory([
        dependencyClearedEntry(before.release, model, release.id, now, "moved"),
      ]);
    }
    if (!d) {
      if (before)
        await this.deps.store.appendHistory([
          dependencyClearedEntry(before.release, model, release.id, now),
        ]);
      return;
    }
    const message = dependencyDriftMessage(d);
    this.deps.log.warn(message);
    const effects = this.effects.notify
      ? driftNotices(release, message, now, this.effects, "dependency-drift")
      : [];
    await this.deps.store.appendHistoryWithEffects(
      release.id,
      [dependencyDriftEntry(d, now)],
      effects,
      now,
    );
  }
}
