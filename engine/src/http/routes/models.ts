/**
 * Model routes: a model's source mark (docs/lifecycle.md "Merge order is release order"), which
 * the recipe workflow reads before it decides (viewer or operator) and moves when it finds a
 * true repeat of what stands (operator); and its kill switches (docs/recovery-actions.md):
 * `POST …/kill-switch` withdraws a capability from every lane, `POST …/kill-switch/restore`
 * gives it back, `GET …/kill-switch` lists them; its credential revocations: `POST
 * …/credentials/revoke` runs the revoke tool its recipe names for a reference, `GET
 * …/credentials/revocations` lists them (operator to change, viewer or operator to read); and
 * its drill records (`POST …/drills` records one, `GET …/drills` lists them, newest first, with
 * the lanes marked for drills in the model's last known good release; `POST …/drills/rehearse`
 * rehearses an evacuation of those lanes and records it as a drill).
 */
import { type Context, Hono } from "hono";
import * as z from "zod";
import { RevokeBody } from "../../domain/credential-revocation.ts";
import { RehearseBody } from "../../domain/drill-rehearsal.ts";
import { DrillBody, noDrillLanesFix } from "../../domain/drills.ts";
import { type KillSwitch, KillSwitchBody } from "../../domain/kill-switch.ts";
import type { SourceMark } from "../../domain/source-order.ts";
import { ActorField } from "../../domain/verbs.ts";
import { CONTROL_PLANE_NAME_FIX, CONTROL_PLANE_NAME_PATTERN } from "../../protocol/fields.ts";
import { RELEASE_ID_PATTERN } from "../../protocol/ids.ts";
import { lazySchema } from "../../protocol/lazy-schema.ts";
import type { ReleaseApi } from "../../service/api.ts";
import { type NamedToken, personOf, requireBearer } from "../auth.ts";
import { badRequest } from "../errors.ts";
import { knownQueryParams } from "../query-params.ts";
import { actorFor, actorOf, jsonBody } from "./operator-body.ts";
import { SourceClaimBody } from "./source-claim.ts";

export interface ModelRouteOptions {
  api: ReleaseApi;
  operatorTokens: readonly string[];
  /** Named operators' tokens: such a token names who acts. */
  operators?: readonly NamedToken[];
  /** Operator and viewer tokens. */
  readTokens: readonly string[];
}

/** `{commit, committed_at, after, release, actor?}` of `POST …/source-mark`. */
const AcknowledgeBody = lazySchema(() =>
  SourceClaimBody.extend({
    release: z
      .string({ error: "must be the id of the release that stands, e.g. r17" })
      .regex(RELEASE_ID_PATTERN, "must be a release id such as r17"),
    actor: ActorField,
  }).strict(),
);

function modelParam(c: Context): string {
  const model = c.req.param("model") ?? "";
  if (!CONTROL_PLANE_NAME_PATTERN.test(model)) {
    throw badRequest("model", [
      {
        path: "model",
        message: `${JSON.stringify(model.slice(0, 64))} is not a model name`,
        fix: CONTROL_PLANE_NAME_FIX,
      },
    ]);
  }
  return model;
}

/** A mark as the API answers it (times in epoch ms). */
function markJson(mark: SourceMark | null): Record<string, unknown> | null {
  return mark
    ? {
        commit: mark.commit,
        committed_at: mark.committed_at,
        release: mark.release_id,
        at: mark.at,
      }
    : null;
}

/** A kill switch as the API answers it (times in epoch ms). */
export function killSwitchJson(ks: KillSwitch): Record<string, unknown> {
  const last = ks.actions[ks.actions.length - 1];
  return { ...ks, verified: last?.verified ?? false };
}

export function modelRoutes(o: ModelRouteOptions): Hono {
  const app = new Hono();
  const operator = requireBearer(o.operatorTokens, "operator", o.readTokens);
  const reader = requireBearer(o.readTokens, "viewer or operator");
  const person = (c: Context) => personOf(c.req.header("authorization"), o.operators ?? []);

  app.get(
    "/:model/kill-switch",
    reader,
    knownQueryParams("GET /v1/models/:model/kill-switch"),
    async (c) => {
      const model = modelParam(c);
      const list = await o.api.killSwitches.list(model);
      return c.json({ model, kill_switches: list.map(killSwitchJson) });
    },
  );

  for (const kind of ["withdraw", "restore"] as const) {
    const route = kind === "withdraw" ? "/:model/kill-switch" : "/:model/kill-switch/restore";
    app.post(route, operator, knownQueryParams(`POST /v1/models${route}`), async (c) => {
      const model = modelParam(c);
      const b = await jsonBody(c, "kill switch", KillSwitchBody, {
        example: `{"capability": "chat", "reason": "chat answers leak PII", "actor": "maria"}`,
      });
      const actor = actorFor(person(c), b.actor);
      if (actor === actorOf(undefined))
        throw badRequest("kill switch", [
          {
            path: "body.actor",
            message: "is required: a kill switch records who acted",
            fix: 'send "actor": "<your name>" (the CLI sends --actor, else $USER), or use your own operator token',
          },
        ]);
      const ks =
        kind === "withdraw"
          ? await o.api.killSwitches.withdraw(model, b.capability, b.reason, actor)
          : await o.api.killSwitches.restore(model, b.capability, b.reason, actor);
      return c.json({ kill_switch: killSwitchJson(ks) });
    });
  }

  app.get("/:model/drills", reader, knownQueryParams("GET /v1/models/:model/drills"), async (c) => {
    const model = modelParam(c);
    const lanes = await o.api.drills.lanes(model);
    const fix = noDrillLanesFix(model, lanes);
    return c.json({
      model,
      drills: await o.api.drills.list(model),
      drill_lanes: lanes,
      ...(fix ? { drill_lanes_fix: fix } : {}),
    });
  });

  app.post(
    "/:model/drills",
    operator,
    knownQueryParams("POST /v1/models/:model/drills"),
    async (c) => {
      const model = modelParam(c);
      const b = await jsonBody(c, "drill", DrillBody, {
        example: `{"drill": "d1", "passed": true, "rto_ms": 1830, "rpo_ms": 3156, "rows_lost": 151, "restored": true, "verified": true}`,
      });
      const r = await o.api.drills.record(model, b, actorFor(person(c), b.actor));
      // The same drill sent again: the stored record, said to be recorded already.
      return c.json({ drill: r.drill, ...(r.fresh ? {} : { already_recorded: true }) }, 201);
    },
  );

  app.post(
    "/:model/drills/rehearse",
    operator,
    knownQueryParams("POST /v1/models/:model/drills/rehearse"),
    async (c) => {
      const model = modelParam(c);
      const b = await jsonBody(c, "rehearsal", RehearseBody, {
        example: `{"reason": "quarterly rehearsal", "actor": "maria"}`,
      });
      const actor = actorFor(person(c), b.actor);
      if (actor === actorOf(undefined))
        throw badRequest("rehearsal", [
          {
            path: "body.actor",
            message: "is required: a rehearsal records who ran it",
            fix: 'send "actor": "<your name>" (the CLI sends --actor, else $USER), or use your own operator token',
          },
        ]);
      return c.json(await o.api.drills.rehearse(model, b.reason, actor), 201);
    },
  );

  app.get(
    "/:model/credentials/revocations",
    reader,
    knownQueryParams("GET /v1/models/:model/credentials/revocations"),
    async (c) => {
      const model = modelParam(c);
      return c.json({ model, revocations: await o.api.credentials.list(model) });
    },
  );

  app.post(
    "/:model/credentials/revoke",
    operator,
    knownQueryParams("POST /v1/models/:model/credentials/revoke"),
    async (c) => {
      const model = modelParam(c);
      const b = await jsonBody(c, "credential revocation", RevokeBody, {
        example: `{"ref": "vault://kv/ranker/api-key", "mode": "revoke", "reason": "key leaked in a log", "actor": "maria"}`,
      });
      const actor = actorFor(person(c), b.actor);
      if (actor === actorOf(undefined))
        throw badRequest("credential revocation", [
          {
            path: "body.actor",
            message: "is required: a revocation records who acted",
            fix: 'send "actor": "<your name>" (the CLI sends --actor, else $USER), or use your own operator token',
          },
        ]);
      const r = await o.api.credentials.revoke(model, b.ref, b.mode, b.reason, actor);
      return c.json({ revocation: r });
    },
  );

  app.get(
    "/:model/source-mark",
    reader,
    knownQueryParams("GET /v1/models/:model/source-mark"),
    async (c) => {
      const model = modelParam(c);
      return c.json({ model, mark: markJson(await o.api.sourceMark(model)) });
    },
  );

  app.post(
    "/:model/source-mark",
    operator,
    knownQueryParams("POST /v1/models/:model/source-mark"),
    async (c) => {
      const model = modelParam(c);
      const b = await jsonBody(c, "source mark body", AcknowledgeBody, {
        example: `{"commit": "<40 hex>", "committed_at": 1764662400000, "after": "<40 hex> or null", "release": "r17"}`,
      });
      const mark = await o.api.acknowledgeSource(
        model,
        { commit: b.commit, committed_at: b.committed_at, after: b.after },
        b.release,
        actorOf(b.actor),
      );
      return c.json({ model, mark: markJson(mark) });
    },
  );

  return app;
}
