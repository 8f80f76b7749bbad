/**
 * Incidents (docs/incidents.md): declare, note, allow, resolve, and the freeze the service
 * checks before a start, a first exposure or a promote. The incident book is one engine-state
 * document (`incidents`), changed with the store's compare-and-set so that engines sharing a
 * database never lose each other's writes.
 */

import {
  type EffectsPolicy,
  incidentNotices,
  NO_EFFECTS_POLICY,
} from "../../domain/change-effects.ts";
import { BatonError } from "../../domain/errors.ts";
import {
  allow,
  bookOf,
  type DeclareInput,
  declare,
  type FrozenAction,
  frozenBy,
  type Incident,
  type IncidentBook,
  incidentOf,
  note,
  recovery,
  resolve,
} from "../../domain/incidents.ts";
import { TERMINAL_RELEASE_STATES } from "../../domain/states.ts";
import type { HistoryEntry } from "../../domain/types.ts";
import type { Clock } from "../../ports/clock.ts";
import type { Store } from "../../ports/store.ts";
import { StateDocument } from "../state-document.ts";

const STATE = "incidents";
/** The releases a timeline looks through (newest first). */
const TIMELINE_RELEASES = 200;

/** One line of an incident's timeline: its own events and its models' release history. */
export interface TimelineEntry {
  /** Epoch ms. */
  at: number;
  actor: string | null;
  /** `incident` for the incident's own events, else the release id. */
  source: string;
  kind: string;
  text: string;
}

/** Kinds of the history entries an incident writes on its models' releases. */
export const INCIDENT_DECLARED = "incident_declared";
export const INCIDENT_RESOLVED = "incident_resolved";
/** Releases of one model written to at most (the newest and those still in flight). */
const AFFECTED_MAX = 10;

export class Incidents {
  constructor(
    private readonly store: Store,
    readonly clock: Clock,
    /** Who is told when an incident is declared or resolved (none by default). */
    private readonly effects: EffectsPolicy = NO_EFFECTS_POLICY,
  ) {
    this.doc = new StateDocument(store, clock, STATE, bookOf, "incident book");
  }

  private readonly doc: StateDocument<IncidentBook>;

  /** Every incident, newest first. */
  async list(): Promise<Incident[]> {
    return [...(await this.doc.read()).doc.incidents].reverse();
  }

  /** Open incidents, newest first. */
  async open(): Promise<Incident[]> {
    return (await this.list()).filter((i) => i.resolved_at === null);
  }

  async declare(input: DeclareInput, actor: string): Promise<Incident> {
    const inc = await this.doc.change((book, now) => {
      const r = declare(book, input, actor, now);
      return { doc: r.book, out: r.incident };
    });
    await this.toReleases(
      inc,
      INCIDENT_DECLARED,
      `incident ${inc.id} (${inc.severity}) declared by ${actor}: ${inc.summary}; commander ${inc.roles.commander}`,
    );
    return inc;
  }

  /**
   * Writes an incident's declaration or resolution to the history of the releases of its models
   * it affects — each model's newest release and every one still in flight — so each of their
   * records names it, and sends the `incident` notice once per model, on its newest release
   * (through the outbox, in the same transaction as the entry).
   */
  private async toReleases(inc: Incident, kind: string, text: string): Promise<void> {
    const now = this.clock.now();
    const summaries = await this.store.listReleases({ limit: TIMELINE_RELEASES });
    for (const model of inc.models) {
      const mine = summaries.filter((r) => r.model === model);
      const newest = mine[0];
      const ids = new Set(
        [newest, ...mine.filter((r) => !TERMINAL_RELEASE_STATES.has(r.state))]
          .filter((r) => r !== undefined)
          .slice(0, AFFECTED_MAX)
          .map((r) => r.id),
      );
      for (const id of ids) {
        const release = await this.store.getRelease(id);
        if (!release) continue;
        const notices =
          id === newest?.id
            ? incidentNotices(release, text, now, this.effects, `${inc.id}-${kind}`)
            : [];
        await this.store.appendHistoryWithEffects(
          id,
          [incidentEntry(id, now, kind, text, inc)],
          notices,
          now,
        );
      }
    }
  }

  note(id: string, text: string, actor: string): Promise<Incident> {
    return this.doc.change((book, now) => {
      const next = note(book, id, text, actor, now);
      return { doc: next, out: incidentOf(next, id) };
    });
  }

  /** The commander (`person`) allows releases of `model` during the incident. */
  allow(id: string, model: string, person: string, reason: string): Promise<Incident> {
    return this.doc.change((book, now) => {
      const next = allow(book, id, model, person, reason, now);
      return { doc: next, out: incidentOf(next, id) };
    });
  }

  /** The commander (`person`) resolves the incident; every model thaws. */
  /**
   * The history entries of a release of `model` created now: one per open incident naming the
   * model (`incident_declared`, with when it was declared), so the release's record names it.
   */
  async namedAtStart(releaseId: string, model: string, now: number): Promise<HistoryEntry[]> {
    return (await this.open())
      .filter((i) => i.models.includes(model))
      .map((inc) =>
        incidentEntry(
          releaseId,
          now,
          INCIDENT_DECLARED,
          `incident ${inc.id} (${inc.severity}) is open on ${model}: ${inc.summary}; commander ${inc.roles.commander}`,
          inc,
        ),
      );
  }

  async resolve(id: string, resolution: string, person: string): Promise<Incident> {
    const inc = await this.doc.change((book, now) => {
      const next = resolve(book, id, resolution, person, now);
      return { doc: next, out: incidentOf(next, id) };
    });
    await this.toReleases(
      inc,
      INCIDENT_RESOLVED,
      `incident ${inc.id} (${inc.severity}) resolved by operator:${person}: ${resolution}`,
    );
    return inc;
  }

  /**
   * Records a recovery action on `model` in the timeline of every open incident that names it;
   * returns their ids (none: nothing written).
   */
  recordRecovery(model: string, text: string, actor: string): Promise<string[]> {
    return this.doc.change((book, now) => {
      const r = recovery(book, model, text, actor, now);
      return { doc: r.ids.length ? r.book : book, out: r.ids };
    });
  }

  /**
   * @throws BatonError `frozen` (409) naming the incident when an open incident freezes
   *   `action` on a release of `model`.
   */
  async assertNotFrozen(model: string, action: FrozenAction): Promise<void> {
    const s = await this.store.getState(STATE);
    if (!s) return;
    const f = frozenBy(bookOf(s.value), model, action);
    if (f) throw new BatonError("frozen", f.reason);
  }

  /**
   * The incident and its timeline: its own events and the history of its models' releases
   * from its declaration to its resolution (or now), oldest first.
   * @throws BatonError 404.
   */
  async timeline(id: string): Promise<{ incident: Incident; timeline: TimelineEntry[] }> {
    const incident = incidentOf((await this.doc.read()).doc, id);
    const from = incident.opened_at;
    const to = incident.resolved_at ?? Number.POSITIVE_INFINITY;
    const entries: TimelineEntry[] = incident.events.map((e) => ({
      at: e.at,
      actor: e.actor,
      source: "incident",
      kind: e.kind,
      text: e.text,
    }));
    const releases = await this.store.listReleases({ limit: TIMELINE_RELEASES });
    for (const r of releases) {
      if (!incident.models.includes(r.model) || r.updated_at < from) continue;
      for (const h of await this.store.getHistory(r.id)) {
        if (h.at < from || h.at > to || h.outcome !== "accepted") continue;
        // The incident's own declaration and resolution are its events already.
        if (h.kind === INCIDENT_DECLARED || h.kind === INCIDENT_RESOLVED) continue;
        const actor = (h.data as { actor?: unknown } | null)?.actor;
        entries.push({
          at: h.at,
          actor: typeof actor === "string" ? actor : null,
          source: r.id,
          kind: h.kind,
          text: h.message,
        });
      }
    }
    entries.sort((a, b) => a.at - b.at);
    return { incident, timeline: entries };
  }
}

/** One incident history entry on release `releaseId` (its data is what the record reads). */
function incidentEntry(
  releaseId: string,
  at: number,
  kind: string,
  text: string,
  inc: Incident,
): HistoryEntry {
  return {
    release_id: releaseId,
    at,
    kind,
    step_run_id: null,
    outcome: "accepted",
    message: `[engine] ${text}`,
    data: {
      incident: {
        id: inc.id,
        severity: inc.severity,
        summary: inc.summary,
        commander: inc.roles.commander,
        opened_at: inc.opened_at,
        resolved_at: inc.resolved_at,
        resolution: inc.resolution,
      },
    },
  };
}
