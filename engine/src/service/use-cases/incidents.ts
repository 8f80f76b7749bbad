/**
 * Incidents (docs/incidents.md): declare, note, allow, resolve, and the freeze the service
 * checks before a start, a first exposure or a promote. The incident book is one engine-state
 * document (`incidents`), changed with the store's compare-and-set so that engines sharing a
 * database never lose each other's writes.
 */
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
import type { Json } from "../../domain/types.ts";
import type { Clock } from "../../ports/clock.ts";
import type { Store } from "../../ports/store.ts";

const STATE = "incidents";
/** Attempts of one change against concurrent writers before it gives up (503). */
const MAX_SWAPS = 8;
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

export class Incidents {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  private async read(): Promise<{ book: IncidentBook; at: number | null }> {
    const s = await this.store.getState(STATE);
    return { book: bookOf(s?.value), at: s ? s.at : null };
  }

  /** Applies `change` to the book with compare-and-set, retried while other writers win. */
  private async change<T>(
    change: (book: IncidentBook, now: number) => { book: IncidentBook; out: T },
  ): Promise<T> {
    for (let i = 0; i < MAX_SWAPS; i++) {
      const { book, at } = await this.read();
      const now = this.clock.now();
      const next = change(book, now);
      if (next.book === book) return next.out;
      const wrote = await this.store.swapState({
        name: STATE,
        value: next.book as unknown as Json,
        now,
        expect: at,
      });
      if (wrote !== null) return next.out;
    }
    throw new BatonError(
      "unavailable",
      `[engine] the incident book changed under ${MAX_SWAPS} attempts in a row (other engines writing); try again`,
    );
  }

  /** Every incident, newest first. */
  async list(): Promise<Incident[]> {
    return [...(await this.read()).book.incidents].reverse();
  }

  /** Open incidents, newest first. */
  async open(): Promise<Incident[]> {
    return (await this.list()).filter((i) => i.resolved_at === null);
  }

  declare(input: DeclareInput, actor: string): Promise<Incident> {
    return this.change((book, now) => {
      const r = declare(book, input, actor, now);
      return { book: r.book, out: r.incident };
    });
  }

  note(id: string, text: string, actor: string): Promise<Incident> {
    return this.change((book, now) => {
      const next = note(book, id, text, actor, now);
      return { book: next, out: incidentOf(next, id) };
    });
  }

  /** The commander (`person`) allows releases of `model` during the incident. */
  allow(id: string, model: string, person: string, reason: string): Promise<Incident> {
    return this.change((book, now) => {
      const next = allow(book, id, model, person, reason, now);
      return { book: next, out: incidentOf(next, id) };
    });
  }

  /** The commander (`person`) resolves the incident; every model thaws. */
  resolve(id: string, resolution: string, person: string): Promise<Incident> {
    return this.change((book, now) => {
      const next = resolve(book, id, resolution, person, now);
      return { book: next, out: incidentOf(next, id) };
    });
  }

  /**
   * Records a recovery action on `model` in the timeline of every open incident that names it;
   * returns their ids (none: nothing written).
   */
  recordRecovery(model: string, text: string, actor: string): Promise<string[]> {
    return this.change((book, now) => {
      const r = recovery(book, model, text, actor, now);
      return { book: r.ids.length ? r.book : book, out: r.ids };
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
    const incident = incidentOf((await this.read()).book, id);
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
