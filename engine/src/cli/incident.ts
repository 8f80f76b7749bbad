/**
 * `baton incident …` (docs/incidents.md): declare, list, show (with the timeline), note, allow
 * and resolve, each one request to the engine's `/v1/incidents` routes.
 */

import type { Incident } from "../domain/incidents.ts";
import { ROLES, SEVERITIES } from "../domain/incidents.ts";
import type { TimelineEntry } from "../service/use-cases/incidents.ts";
import { type Connection, EngineClient } from "./client.ts";
import { actorName, envOf, type Io } from "./commands.ts";
import { EXIT, type ExitCode, usage } from "./errors.ts";

const INCIDENT_ID = /^inc[1-9][0-9]{0,8}$/;

function incidentId(id: string): string {
  if (!INCIDENT_ID.test(id))
    throw usage(
      `[cli] ${JSON.stringify(id)} is not an incident id; ids look like inc3 (see baton incident list)`,
    );
  return id;
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

/** One line per incident: id, state, severity, summary, models, commander. */
export function incidentLine(i: Incident): string {
  const state = i.resolved_at === null ? "OPEN" : "resolved";
  return `${i.id}  ${state}  ${i.severity.toUpperCase()}  ${i.summary}  (affects ${i.models.join(", ")}; commander ${i.roles.commander}; declared ${iso(i.opened_at)})`;
}

/** An incident's screen: what, who, what is frozen, and its timeline. */
export function incidentScreen(i: Incident, timeline: TimelineEntry[]): string[] {
  const lines = [incidentLine(i)];
  lines.push(
    `roles: ${ROLES.filter((r) => i.roles[r])
      .map((r) => `${r.replace("_", " ")} ${i.roles[r]}`)
      .join(", ")}`,
  );
  if (i.resolved_at === null) {
    lines.push(
      `frozen: starts, first exposures and promotes of every model but ${[...i.models, ...i.allowed].join(", ")}${i.allowed.length ? ` (allowed by the commander: ${i.allowed.join(", ")})` : ""}`,
    );
  } else {
    lines.push(`resolved ${iso(i.resolved_at)}: ${i.resolution ?? ""}`);
  }
  lines.push("timeline:");
  for (const t of timeline) {
    lines.push(
      `  ${iso(t.at)}  ${t.source === "incident" ? "incident" : t.source}  ${t.actor ? `${t.actor}: ` : ""}${t.text}`,
    );
  }
  return lines;
}

const print = (io: Io, lines: string[]) => io.out.write(`${lines.join("\n")}\n`);
const printJson = (io: Io, v: unknown) => io.out.write(`${JSON.stringify(v, null, 2)}\n`);

/** Refuses an empty or blank `--<flag>` before anything is sent (exit 2), with an example. */
function filled(flag: string, value: string, example: string): void {
  if (value.trim() === "")
    throw usage(`[cli] --${flag} must not be empty; e.g. --${flag} ${example}`);
}

/** The options of `baton incident declare`. */
export interface DeclareOptions {
  severity: string;
  summary: string;
  model: string[];
  commander: string;
  operations?: string;
  communications?: string;
  releaseOwner?: string;
  recorder?: string;
  actor?: string;
  json: boolean;
}

/** `incident declare`. */
export async function declareIncident(
  conn: Connection,
  o: DeclareOptions,
  io: Io,
): Promise<ExitCode> {
  if (!(SEVERITIES as readonly string[]).includes(o.severity))
    throw usage(
      `[cli] --severity must be one of ${SEVERITIES.join(", ")}; got ${JSON.stringify(o.severity)}`,
    );
  filled("summary", o.summary, '"ranker answers 5xx on lane-b"');
  filled("commander", o.commander, "maria");
  for (const m of o.model) filled("model", m, "ranker");
  const actor = actorName(o.actor, envOf(io));
  const body = {
    severity: o.severity,
    summary: o.summary,
    models: o.model,
    commander: o.commander,
    ...(o.operations ? { operations: o.operations } : {}),
    ...(o.communications ? { communications: o.communications } : {}),
    ...(o.releaseOwner ? { release_owner: o.releaseOwner } : {}),
    ...(o.recorder ? { recorder: o.recorder } : {}),
    ...(actor ? { actor } : {}),
  };
  const r = await new EngineClient(conn).call<{ incident: Incident }>(
    "POST",
    "/v1/incidents",
    JSON.stringify(body),
  );
  if (o.json) printJson(io, r);
  else
    print(io, [
      `declared ${incidentLine(r.incident)}`,
      `releases of other models are frozen until its commander resolves it: baton incident resolve ${r.incident.id} --summary "<what was found and done>" --actor ${r.incident.roles.commander}`,
    ]);
  return EXIT.ok;
}

/** `incident list`. */
export async function listIncidents(
  conn: Connection,
  o: { json: boolean },
  io: Io,
): Promise<ExitCode> {
  const r = await new EngineClient(conn).call<{ incidents: Incident[] }>("GET", "/v1/incidents");
  if (o.json) printJson(io, r);
  else print(io, r.incidents.length ? r.incidents.map(incidentLine) : ["no incidents"]);
  return EXIT.ok;
}

/** `incident show <id>`. */
export async function showIncident(
  conn: Connection,
  id: string,
  o: { json: boolean },
  io: Io,
): Promise<ExitCode> {
  const r = await new EngineClient(conn).call<{ incident: Incident; timeline: TimelineEntry[] }>(
    "GET",
    `/v1/incidents/${incidentId(id)}`,
  );
  if (o.json) printJson(io, r);
  else print(io, incidentScreen(r.incident, r.timeline));
  return EXIT.ok;
}

/** `incident note|allow|resolve <id>`: one POST with `body`, then the incident's line. */
export async function changeIncident(
  conn: Connection,
  id: string,
  change: "note" | "allow" | "resolve",
  body: Record<string, string>,
  o: { json: boolean; actor?: string },
  io: Io,
): Promise<ExitCode> {
  const required = { note: "text", allow: "model", resolve: "summary" }[change];
  filled(required, body[required] ?? "", '"what was seen, found or done"');
  const actor = actorName(o.actor, envOf(io));
  const r = await new EngineClient(conn).call<{ incident: Incident }>(
    "POST",
    `/v1/incidents/${incidentId(id)}/${change}`,
    JSON.stringify({ ...body, ...(actor ? { actor } : {}) }),
  );
  if (o.json) printJson(io, r);
  else print(io, [incidentLine(r.incident)]);
  return EXIT.ok;
}
