/**
 * Incident routes (docs/incidents.md): `POST /v1/incidents` declares one, `GET /v1/incidents`
 * lists them, `GET /v1/incidents/:id` answers one with its timeline, and `POST
 * /v1/incidents/:id/{note,allow,resolve}` change it. Reads take a viewer or operator token;
 * changes the operator token, and a person's own token names who acted.
 */
import { type Context, Hono } from "hono";
import * as z from "zod";
import { DeclareBody, INCIDENT_ID_PATTERN, type Incident } from "../../domain/incidents.ts";
import { ActorField, ReasonField } from "../../domain/verbs.ts";
import { CONTROL_PLANE_NAME_FIX, CONTROL_PLANE_NAME_PATTERN } from "../../protocol/fields.ts";
import { lazySchema } from "../../protocol/lazy-schema.ts";
import type { ReleaseApi } from "../../service/api.ts";
import { type NamedToken, personOf, requireBearer } from "../auth.ts";
import { badRequest } from "../errors.ts";
import { knownQueryParams } from "../query-params.ts";
import { actorFor, jsonBody } from "./operator-body.ts";

export interface IncidentRouteOptions {
  api: ReleaseApi;
  operatorTokens: readonly string[];
  operators?: readonly NamedToken[];
  /** Operator and viewer tokens. */
  readTokens: readonly string[];
}

const Text = lazySchema(() => ReasonField.pipe(z.string().trim().min(1, "must not be empty")));

const NoteBody = lazySchema(() => z.object({ text: Text, actor: ActorField }).strict());
const ResolveBody = lazySchema(() => z.object({ summary: Text, actor: ActorField }).strict());
const AllowBody = lazySchema(() =>
  z
    .object({
      model: z
        .string({ error: "must name the model to allow, e.g. ranker" })
        .regex(CONTROL_PLANE_NAME_PATTERN, `is not a model name; ${CONTROL_PLANE_NAME_FIX}`),
      reason: ReasonField.default(""),
      actor: ActorField,
    })
    .strict(),
);

function incidentParam(c: Context): string {
  const id = c.req.param("id") ?? "";
  if (!INCIDENT_ID_PATTERN.test(id)) {
    throw badRequest("incident id", [
      {
        path: "id",
        message: `${JSON.stringify(id.slice(0, 64))} is not an incident id`,
        fix: "use an id such as inc3 (baton incident list shows them)",
      },
    ]);
  }
  return id;
}

/** An incident as the API answers it (times in epoch ms). */
export function incidentJson(i: Incident): Record<string, unknown> {
  return { ...i, open: i.resolved_at === null };
}

export function incidentRoutes(o: IncidentRouteOptions): Hono {
  const app = new Hono();
  const operator = requireBearer(o.operatorTokens, "operator", o.readTokens);
  const reader = requireBearer(o.readTokens, "viewer or operator");
  const person = (c: Context) => personOf(c.req.header("authorization"), o.operators ?? []);
  // Who claims the commander's role: a named operator token names its person, else the name
  // the caller gives (`actor`).
  const commanderClaim = (c: Context, actor: string | undefined) =>
    person(c) ?? actor?.trim() ?? "";

  app.get("/", reader, knownQueryParams("GET /v1/incidents"), async (c) =>
    c.json({ incidents: (await o.api.incidents.list()).map(incidentJson) }),
  );

  app.post("/", operator, knownQueryParams("POST /v1/incidents"), async (c) => {
    const b = await jsonBody(c, "incident", DeclareBody, {
      example: `{"severity": "sev2", "summary": "ranker answers 5xx", "models": ["ranker"], "commander": "maria"}`,
    });
    const inc = await o.api.incidents.declare(b, actorFor(person(c), b.actor));
    return c.json({ incident: incidentJson(inc) }, 201);
  });

  app.get("/:id", reader, knownQueryParams("GET /v1/incidents/:id"), async (c) => {
    const t = await o.api.incidents.timeline(incidentParam(c));
    return c.json({ incident: incidentJson(t.incident), timeline: t.timeline });
  });

  app.post("/:id/note", operator, knownQueryParams("POST /v1/incidents/:id/note"), async (c) => {
    const id = incidentParam(c);
    const b = await jsonBody(c, "note", NoteBody, { example: `{"text": "p99 back to normal"}` });
    const inc = await o.api.incidents.note(id, b.text, actorFor(person(c), b.actor));
    return c.json({ incident: incidentJson(inc) });
  });

  app.post("/:id/allow", operator, knownQueryParams("POST /v1/incidents/:id/allow"), async (c) => {
    const id = incidentParam(c);
    const b = await jsonBody(c, "allow", AllowBody, {
      example: `{"model": "embedder", "reason": "security fix", "actor": "maria"}`,
    });
    const inc = await o.api.incidents.allow(id, b.model, commanderClaim(c, b.actor), b.reason);
    return c.json({ incident: incidentJson(inc) });
  });

  app.post(
    "/:id/resolve",
    operator,
    knownQueryParams("POST /v1/incidents/:id/resolve"),
    async (c) => {
      const id = incidentParam(c);
      const b = await jsonBody(c, "resolve", ResolveBody, {
        example: `{"summary": "rolled back r17; the new tokenizer broke batching"}`,
      });
      const inc = await o.api.incidents.resolve(id, b.summary, commanderClaim(c, b.actor));
      return c.json({ incident: incidentJson(inc) });
    },
  );

  return app;
}
