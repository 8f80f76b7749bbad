/**
 * Incidents (docs/incidents.md): an incident is declared when impact or uncertainty is
 * material. It names the models it affects and the people in its roles; while it is open,
 * releases of every other model are frozen (a start, a first exposure or a promote is refused
 * naming the incident) unless its commander allows that model. Recovery is never frozen:
 * rollback, abort, pause and the undo of a release go on.
 *
 * Pure: every function takes the incident book as it is stored and returns the next one (or a
 * refusal); the service stores it with a compare-and-set (use-cases/incidents.ts).
 */
import * as z from "zod";
import { CONTROL_PLANE_NAME_FIX, CONTROL_PLANE_NAME_PATTERN } from "../protocol/fields.ts";
import { lazySchema } from "../protocol/lazy-schema.ts";
import { BatonError } from "./errors.ts";
import { ACTOR_PATTERN, ReasonField } from "./verbs.ts";

/** Severity, most severe first (SEV1: customer-facing outage). */
export const SEVERITIES = ["sev1", "sev2", "sev3", "sev4"] as const;
export type Severity = (typeof SEVERITIES)[number];

/** The roles of an incident (each a named person); the commander is required. */
export const ROLES = [
  "commander",
  "operations",
  "communications",
  "release_owner",
  "recorder",
] as const;
export type Role = (typeof ROLES)[number];

/** The actions an open incident freezes for models it does not name. */
export type FrozenAction = "start" | "release" | "promote";

/**
 * One line of an incident's own timeline (declared, a note, a model allowed, a recovery action
 * on one of its models, resolved).
 */
export interface IncidentEvent {
  /** Epoch ms. */
  at: number;
  /** Who, as history names actors (`operator:maria`). */
  actor: string;
  kind: "declared" | "note" | "allowed" | "role" | "recovery" | "resolved";
  text: string;
}

export interface Incident {
  /** `inc1`, `inc2`, … in order of declaration. */
  id: string;
  severity: Severity;
  summary: string;
  /** The models it affects: their releases are not frozen. */
  models: string[];
  /** Role → person (no `operator:` prefix). */
  roles: Partial<Record<Role, string>> & { commander: string };
  /** Models the commander allowed to release although the incident does not name them. */
  allowed: string[];
  /** Epoch ms. */
  opened_at: number;
  /** Epoch ms; null while open. */
  resolved_at: number | null;
  /** What was found and done, given when it is resolved. */
  resolution: string | null;
  events: IncidentEvent[];
}

/** What the engine stores (one engine-state value): every incident and the last number used. */
export interface IncidentBook {
  last: number;
  incidents: Incident[];
}

export const EMPTY_BOOK: IncidentBook = { last: 0, incidents: [] };

/** The id pattern of an incident (`inc17`). */
export const INCIDENT_ID_PATTERN = /^inc[1-9][0-9]{0,8}$/;

const Person = lazySchema(() =>
  z
    .string()
    .trim()
    .regex(
      ACTOR_PATTERN,
      "must be a person's name: 1–64 letters, digits, '.', '_', '@', '-' or spaces",
    ),
);

const Model = lazySchema(() =>
  z.string().regex(CONTROL_PLANE_NAME_PATTERN, `is not a model name; ${CONTROL_PLANE_NAME_FIX}`),
);

/** The body of `POST /v1/incidents`. */
export const DeclareBody = lazySchema(() =>
  z
    .object({
      severity: z.enum(SEVERITIES, { error: `must be one of ${SEVERITIES.join(", ")}` }),
      summary: ReasonField.pipe(z.string().trim().min(1, "must say what is wrong, in a sentence")),
      models: z
        .array(Model, { error: 'must be a list of the affected models, e.g. ["ranker"]' })
        .min(1, "must name at least one affected model")
        .max(50, "must name at most 50 models"),
      commander: Person,
      operations: Person.optional(),
      communications: Person.optional(),
      release_owner: Person.optional(),
      recorder: Person.optional(),
      actor: Person.optional(),
    })
    .strict(),
);
export type DeclareInput = z.infer<typeof DeclareBody>;

function refuse(message: string): BatonError {
  return new BatonError("conflict", message);
}

function find(book: IncidentBook, id: string): Incident {
  const inc = book.incidents.find((i) => i.id === id);
  if (!inc)
    throw new BatonError(
      "not_found",
      `[engine] incident ${id} does not exist; \`baton incident list\` shows the incidents`,
    );
  return inc;
}

function replace(book: IncidentBook, next: Incident): IncidentBook {
  return { ...book, incidents: book.incidents.map((i) => (i.id === next.id ? next : i)) };
}

function openOnly(inc: Incident, verb: string): void {
  if (inc.resolved_at !== null)
    throw refuse(
      `[engine] incident ${inc.id} was resolved; it cannot ${verb} (declare a new incident if the problem is back)`,
    );
}

/** Opens an incident; returns the next book and the new incident. */
export function declare(
  book: IncidentBook,
  input: DeclareInput,
  actor: string,
  now: number,
): { book: IncidentBook; incident: Incident } {
  const roles: Incident["roles"] = { commander: input.commander };
  for (const r of ROLES) {
    const who = input[r];
    if (who) roles[r] = who;
  }
  const n = book.last + 1;
  const incident: Incident = {
    id: `inc${n}`,
    severity: input.severity,
    summary: input.summary,
    models: [...new Set(input.models)].sort(),
    roles,
    allowed: [],
    opened_at: now,
    resolved_at: null,
    resolution: null,
    events: [
      {
        at: now,
        actor,
        kind: "declared",
        text: `declared ${input.severity.toUpperCase()}: ${input.summary} (affects ${[...new Set(input.models)].sort().join(", ")}; commander ${input.commander})`,
      },
    ],
  };
  return { book: { last: n, incidents: [...book.incidents, incident] }, incident };
}

/** Adds a note to an open incident's timeline. */
export function note(
  book: IncidentBook,
  id: string,
  text: string,
  actor: string,
  now: number,
): IncidentBook {
  const inc = find(book, id);
  openOnly(inc, "take a note");
  return replace(book, { ...inc, events: [...inc.events, { at: now, actor, kind: "note", text }] });
}

/**
 * The commander allows releases of `model` while the incident is open. Only the commander:
 * `person` is who the request is from (a named operator token, or the name the caller gives).
 * @throws BatonError 409 when `person` is not the commander or the incident is resolved.
 */
export function allow(
  book: IncidentBook,
  id: string,
  model: string,
  person: string,
  reason: string,
  now: number,
): IncidentBook {
  const inc = find(book, id);
  openOnly(inc, "allow a release");
  commanderOnly(inc, person, "allow releases during it");
  if (inc.allowed.includes(model)) return book;
  return replace(book, {
    ...inc,
    allowed: [...inc.allowed, model].sort(),
    events: [
      ...inc.events,
      {
        at: now,
        actor: `operator:${person}`,
        kind: "allowed",
        text: `allowed releases of ${model}${reason ? `: ${reason}` : ""}`,
      },
    ],
  });
}

/**
 * Refuses `person` unless they are the incident's commander.
 * @throws BatonError 409 naming the commander to ask, and how the commander names themself.
 */
function commanderOnly(inc: Incident, person: string, what: string): void {
  const commander = inc.roles.commander;
  if (person === commander) return;
  throw refuse(
    `[engine] only incident ${inc.id}'s commander (${commander}) may ${what}; ${person === "" ? "nobody was named" : `${person} is not the commander`}: ask ${commander}, or if you are ${commander}, name yourself with --actor ${commander} (body.actor in the API)`,
  );
}

/**
 * Closes an incident with what was found and done; releases of other models thaw. Only the
 * commander: `person` as for `allow`.
 * @throws BatonError 409 when `person` is not the commander or the incident is resolved.
 */
export function resolve(
  book: IncidentBook,
  id: string,
  resolution: string,
  person: string,
  now: number,
): IncidentBook {
  const inc = find(book, id);
  openOnly(inc, "be resolved again");
  commanderOnly(inc, person, "resolve it (resolving thaws every model)");
  return replace(book, {
    ...inc,
    resolved_at: now,
    resolution,
    events: [
      ...inc.events,
      { at: now, actor: `operator:${person}`, kind: "resolved", text: `resolved: ${resolution}` },
    ],
  });
}

/**
 * Adds a recovery action on `model` (a kill switch, with its verdict) to the timeline of every
 * open incident that names the model; returns the next book and those incidents' ids.
 */
export function recovery(
  book: IncidentBook,
  model: string,
  text: string,
  actor: string,
  now: number,
): { book: IncidentBook; ids: string[] } {
  const hit = affecting(book, model);
  let next = book;
  for (const inc of hit)
    next = replace(next, {
      ...inc,
      events: [...inc.events, { at: now, actor, kind: "recovery", text }],
    });
  return { book: next, ids: hit.map((i) => i.id) };
}

/** The incident with id `id`. @throws BatonError 404. */
export function incidentOf(book: IncidentBook, id: string): Incident {
  return find(book, id);
}

/** The open incidents that affect `model` (name it). */
export function affecting(book: IncidentBook, model: string): Incident[] {
  return book.incidents.filter((i) => i.resolved_at === null && i.models.includes(model));
}

/**
 * Why `action` on a release of `model` is frozen now, or null: the first open incident that
 * neither names the model nor allows it. The text names the incident, its commander and the
 * way out.
 */
export function frozenBy(
  book: IncidentBook,
  model: string,
  action: FrozenAction,
): { incident: Incident; reason: string } | null {
  const inc = book.incidents.find(
    (i) => i.resolved_at === null && !i.models.includes(model) && !i.allowed.includes(model),
  );
  if (!inc) return null;
  const verb =
    action === "start" ? "a new release" : action === "release" ? "a first exposure" : "a promote";
  return {
    incident: inc,
    reason: `[engine] releases of ${model} are frozen by incident ${inc.id} (${inc.severity.toUpperCase()}: ${inc.summary}; affects ${inc.models.join(", ")}): ${verb} of ${model} is refused while it is open. Its commander ${inc.roles.commander} may allow it (baton incident allow ${inc.id} --model ${model} --reason "<why>" --actor ${inc.roles.commander}), or end it (baton incident resolve ${inc.id} --summary "<what was found and done>" --actor ${inc.roles.commander})`,
  };
}

/** Parses a stored book; an absent value is the empty book. */
export function bookOf(value: unknown): IncidentBook {
  if (value === null || value === undefined) return EMPTY_BOOK;
  return value as IncidentBook;
}
