/**
 * The drill schedule (docs/recovery-actions.md "The drill schedule"), on the drift schedule:
 * every drift interval, from the engine's tick, one engine (the holder of the store lease
 * `drill-schedule`) judges each model whose newest succeeded release's recipe sets
 * `policy.drill_every_days` against its drill book (domain/drills.ts `drillDue`). A model whose
 * last passed drill is older than that (or that has none) is due a drill: a `drill_due` entry
 * on that release's history with its `drill_due` notices, in one commit, once per due period (a
 * period follows one last passed drill; what was recorded is kept in the engine state
 * `drill_schedule`, so a restarted engine or another one does not tell it again). A passed drill
 * recorded since ends it with a `drill_due_cleared` entry; a newer succeeded release takes it
 * over (the older one's entry is cleared, the period is not told again).
 *
 * Bounded: one judgement per interval (engine clock), the newest `RELEASES` releases, two store
 * reads of engine state; no external call.
 */
import {
  drillDueNotices,
  type EffectsPolicy,
  NO_EFFECTS_POLICY,
} from "../domain/change-effects.ts";
import {
  type DrillBook,
  drillBookOf,
  drillDue,
  drillDueClearedEntry,
  drillDueEntry,
  drillDueMessage,
  drillDuePrint,
  drillsOf,
} from "../domain/drills.ts";
import type { Json, Release } from "../domain/types.ts";
import type { Clock } from "../ports/clock.ts";
import type { Store } from "../ports/store.ts";
import type { DriftPolicy } from "./drift.ts";
import { LeasedSchedule } from "./leased-schedule.ts";
import { DRILL_BOOK_STATE } from "./use-cases/drills.ts";

/** Name of the store lease the judging engine holds. */
export const DRILL_SCHEDULE_LEASE = "drill-schedule";
/** Name of the engine state that keeps, per model, the due period last recorded. */
export const DRILL_SCHEDULE_STATE = "drill_schedule";
/** Releases looked through per judgement (newest first). */
const RELEASES = 100;

/** Per model: the due period last recorded (`drillDuePrint`, "" none) and on which release. */
interface Recorded {
  model: string;
  print: string;
  release: string;
}

function recordedOf(value: unknown): Recorded[] {
  const r = (value as { recorded?: unknown } | null | undefined)?.recorded;
  return Array.isArray(r) ? (r as Recorded[]) : [];
}

export interface DrillScheduleDeps {
  store: Store;
  clock: Clock;
  /** The drift policy: its interval and mode are this schedule's too. */
  policy: DriftPolicy;
  log: { warn(msg: string): void };
  /** Who is told of a due drill; none when absent. */
  effects?: EffectsPolicy;
}

/** The periodic judge; `maybeRun` is called from every engine tick (service/maintenance.ts). */
export class DrillSchedule {
  private readonly schedule: LeasedSchedule;
  private readonly effects: EffectsPolicy;

  constructor(private readonly deps: DrillScheduleDeps) {
    this.effects = deps.effects ?? NO_EFFECTS_POLICY;
    this.schedule = new LeasedSchedule({
      ...deps,
      lease: DRILL_SCHEDULE_LEASE,
      run: () => this.judge(),
      failed: (m) =>
        `[drill] the drill schedule was not judged: ${m}; next in ${deps.policy.intervalMs} ms`,
    });
  }

  /** Judges once when the interval has passed and this engine holds (or takes) the lease. */
  maybeRun(): Promise<void> {
    return this.schedule.maybeRun();
  }

  /** No judgement starts after this; a held lease is given back (not in `event` mode). */
  stop(): Promise<void> {
    return this.schedule.stop();
  }

  private async judge(): Promise<void> {
    const { store } = this.deps;
    const summaries = await store.listReleases({ limit: RELEASES });
    const succeeded = new Map<string, string>();
    for (const s of summaries)
      if (s.state === "succeeded" && !succeeded.has(s.model)) succeeded.set(s.model, s.id);
    const book = drillBookOf((await store.getState(DRILL_BOOK_STATE))?.value);
    const recorded = recordedOf((await store.getState(DRILL_SCHEDULE_STATE))?.value);
    let changed = false;
    for (const id of succeeded.values()) {
      const release = await store.getRelease(id);
      if (!release) continue;
      const i = recorded.findIndex((r) => r.model === release.manifest.model);
      const next = await this.record(release, book, i >= 0 ? recorded[i] : undefined);
      if (!next) continue;
      changed = true;
      if (i >= 0) recorded[i] = next;
      else recorded.push(next);
    }
    if (changed)
      await store.putState({
        name: DRILL_SCHEDULE_STATE,
        value: { recorded } as unknown as Json,
        now: this.deps.clock.now(),
      });
  }

  /**
   * Writes what changed of the model's due drill since `before`: the older release's entry
   * cleared, a `drill_due` entry (with its notices when the period is new). Answers what to
   * keep as recorded, or null when nothing changed.
   */
  private async record(
    release: Release,
    book: DrillBook,
    before: Recorded | undefined,
  ): Promise<Recorded | null> {
    const { store } = this.deps;
    const now = this.deps.clock.now();
    const model = release.manifest.model;
    const d = drillDue(release.manifest, release.id, book, now);
    const print = drillDuePrint(d);
    if ((before?.print ?? "") === print && (!d || before?.release === release.id)) return null;
    // The newest succeeded release sets no schedule; a newer one holds the due drill now; or a
    // passed drill ended the period. A passed drill already older than the interval ends
    // nothing: the new `drill_due` entry (following that drill) replaces the old one, and no
    // "no drill is due" is written beside it.
    const why =
      release.manifest.drill_every_days === undefined
        ? "unscheduled"
        : d && before?.release !== release.id
          ? "moved"
          : "drilled";
    if (before?.print && !(why === "drilled" && d)) {
      const by =
        why === "drilled"
          ? (drillsOf(book, model).find((x) => x.passed)?.drill ?? release.id)
          : release.id;
      await store.appendHistory([drillDueClearedEntry(before.release, model, by, why, now)]);
    }
    if (!d) return { model, print: "", release: release.id };
    const message = drillDueMessage(d);
    // A period already told (the drill moved to a newer release) is not told again.
    const fresh = before?.print !== print;
    if (fresh) this.deps.log.warn(message);
    const effects = fresh ? drillDueNotices(release, message, now, this.effects, print) : [];
    await store.appendHistoryWithEffects(release.id, [drillDueEntry(d, now)], effects, now);
    return { model, print, release: release.id };
  }
}
