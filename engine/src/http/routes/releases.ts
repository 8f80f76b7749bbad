/**
 * Release routes: create (operator; recipe as JSON or YAML), list and read (viewer or
 * operator), and the operator verbs on a release (routes/verbs.ts).
 */

import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import * as z from "zod";
import { currentDependencyDrift } from "../../domain/dependency-drift.ts";
import { currentDrillDue } from "../../domain/drills.ts";
import { BatonError } from "../../domain/errors.ts";
import { gateSummaries } from "../../domain/gate/summary.ts";
import { type LifecycleLookups, lifecycleActions, lifecycleNote } from "../../domain/lifecycle.ts";
import { rollbackWindowClosesAt, succeededAt } from "../../domain/rollback-window.ts";
import type { SourceClaim } from "../../domain/source-order.ts";
import { RELEASE_STATES } from "../../domain/states.ts";
import { availableActions } from "../../domain/transition/exits.ts";
import type { LanesRead } from "../../protocol/control-plane.ts";
import { lazySchema } from "../../protocol/lazy-schema.ts";
import { RECIPE_LIMITS } from "../../protocol/limits.ts";
import { queryNumber } from "../../protocol/query-number.ts";
import { readBoundedYaml } from "../../recipes/parse.ts";
import type { ReleaseApi, ReleaseRecord } from "../../service/api.ts";
import { currentDrift } from "../../service/drift.ts";
import { lanesView } from "../../views/lanes.ts";
import { type NamedToken, personOf, requireBearer } from "../auth.ts";
import { assertJsonBounds } from "../bounded-json.ts";
import { badRequest, zodProblems } from "../errors.ts";
import { knownQueryParams } from "../query-params.ts";
import { actorFor, schemaFields } from "./operator-body.ts";
import { SourceClaimBody } from "./source-claim.ts";
import { releaseParam, verbRoutes } from "./verbs.ts";

export interface ReleaseRouteOptions {
  /** owner/name for run links in the release record. */
  repository?: string;
  api: ReleaseApi;
  operatorTokens: readonly string[];
  /** People's own operator tokens: a release started with one is recorded as theirs. */
  operators?: readonly NamedToken[];
  /** Operator and viewer tokens. */
  readTokens: readonly string[];
  /** One read of a model's lanes at the control plane (`GET /v1/releases/:id/lanes`). */
  lanes?: (model: string) => Promise<LanesRead>;
}

const ListQuery = lazySchema(() =>
  z
    .object({
      state: z
        .enum(RELEASE_STATES, { error: `must be one of ${RELEASE_STATES.join(", ")}` })
        .optional(),
      limit: queryNumber({ min: 1, max: 200 }).default(50),
      before: queryNumber({ min: 0 }, "a time in epoch milliseconds").optional(),
    })
    .strict(),
);

/** What to do about each bad field of `GET /v1/releases` (docs/engine.md). */
const LIST_FIXES: Readonly<Record<string, string>> = {
  limit:
    "ask for 1 to 200 releases a page (default 50); for more, fetch the next page with before=<created_at of the last release on this page>",
  before:
    "give the created_at (epoch milliseconds, e.g. 1764662400000) of the last release of the previous page, or leave before out for the newest releases",
  state: "give one of the states listed, or leave state out for releases in every state",
};

const CreateQuery = lazySchema(() =>
  z
    .object({
      start: z.enum(["true", "false"], { error: "must be true or false" }).optional(),
      exposure: z
        .enum(["dark"], {
          error:
            "must be dark (deploy: wait at 0% exposure until POST …/release), or leave it out to expose as the waves say",
        })
        .optional(),
    })
    .strict(),
);

/**
 * A start with more than the recipe: a signed start (docs/trust.md "Sending the bundle"), the
 * recipe (an object, or YAML/JSON text) with the manifest's Sigstore bundle and the image
 * attestations, and the recipe workflow's commit (`source`, docs/lifecycle.md "Merge order is
 * release order"). A plain recipe body has no `recipe` key (the recipe schema is strict), so
 * the two cannot be confused.
 */
const SignedStart = lazySchema(() =>
  z
    .object({
      recipe: z.union([z.string().min(1), z.record(z.string(), z.unknown())], {
        error: "must be the recipe object or its YAML text",
      }),
      bundle: z
        .record(z.string(), z.unknown(), { error: "must be a Sigstore bundle object" })
        .optional(),
      attestations: z
        .array(z.record(z.string(), z.unknown()), { error: "must be an array of Sigstore bundles" })
        .max(16, "at most 16 attestations")
        .default([]),
      rollback: z.boolean({ error: "must be true or false" }).default(false),
      source: SourceClaimBody.optional(),
    })
    .strict(),
);

/**
 * The refusal of `rollback: true` in a start or roll-forward body. An older signed manifest
 * runs again only through the rollback verb (operator, reason, history), which re-admits the
 * model's previous admitted manifest; a body cannot name one to replay.
 */
const NOT_A_ROLLBACK = {
  path: "body.rollback",
  message:
    "a start is never a rollback: an older signed manifest runs again only through the rollback verb",
  fix: "drop `rollback`; roll back the release that replaced it with POST /v1/releases/<id>/rollback and a reason (baton rollback <id> --reason …), or sign the older recipe again (a newer issued_at) and start it",
};

/**
 * The start request: a plain recipe, or a start with more than the recipe
 * (`{recipe, bundle, attestations, source}`).
 * @throws BatonError `bad_request` (400) naming the field: a signed start of a bad shape, or
 *   `rollback: true` (`body.rollback`; the rollback verb is the only way to admit an older
 *   manifest).
 */
export function parseStartBody(
  text: string,
  contentType: string | undefined,
): {
  recipe: unknown;
  bundle?: unknown;
  attestations: unknown[];
  source?: SourceClaim;
} {
  const value = parseRecipeBody(text, contentType);
  if (value === null || typeof value !== "object" || Array.isArray(value) || !("recipe" in value)) {
    return { recipe: value, attestations: [] };
  }
  const b = SignedStart.safeParse(value);
  if (!b.success)
    throw badRequest("signed start", zodProblems(b.error, "body", {}, schemaFields(SignedStart)));
  if (b.data.rollback) throw badRequest("start body", [NOT_A_ROLLBACK]);
  const recipe =
    typeof b.data.recipe === "string"
      ? parseRecipeBody(b.data.recipe, "application/yaml", "body.recipe")
      : b.data.recipe;
  return {
    recipe,
    ...(b.data.bundle ? { bundle: b.data.bundle } : {}),
    attestations: b.data.attestations,
    ...(b.data.source ? { source: b.data.source } : {}),
  };
}

/** `GET /v1/releases/:id/history?cursor=<n>&limit=<n>`: a page of the history, oldest first. */
const HistoryQuery = lazySchema(() =>
  z
    .object({
      cursor: queryNumber(
        { min: 0 },
        "a whole number (the next_cursor of the previous page)",
      ).default(0),
      limit: queryNumber({ min: 1, max: 1000 }).default(200),
    })
    .strict(),
);

/** What to do about each bad field of `GET /v1/releases/:id/history`. */
const HISTORY_FIXES: Readonly<Record<string, string>> = {
  cursor:
    "leave cursor out for the first page, then pass the next_cursor the previous page answered",
  limit: "ask for 1 to 1000 entries a page (default 200)",
};

/** The JSON of `GET /v1/releases/:id`: the release's fields, history and attempt results. */
export function recordJson(r: ReleaseRecord, o: LifecycleLookups = {}): Record<string, unknown> {
  const { release } = r;
  return {
    id: release.id,
    state: release.state,
    generation: release.generation,
    resource_version: release.resource_version,
    manifest_digest: release.manifest_digest,
    high_water_mark: release.high_water_mark,
    cursor: release.cursor,
    reason: release.reason,
    // The gate the release waits on (undefined when none): clients reading this JSON (the CLI's
    // status and watch) derive the same exits as `available_actions`.
    gate: release.gate,
    hold: release.hold ?? null,
    exposure: release.exposure ?? null,
    promoted: release.promoted ?? [],
    restore: release.restore ?? null,
    roll_forward_hold: release.roll_forward_hold ?? null,
    rerun_deadline: release.rerun_deadline ?? null,
    // The stop condition's watch: its latest evaluation (docs/gate.md "The stop condition").
    stop: release.stop ?? null,
    abandoned: release.abandoned ?? null,
    // The latest recovery verification (docs/lifecycle.md "Recovery verification"), or null.
    verification: release.verification ?? null,
    available_actions: availableActions(release),
    lifecycle_actions: lifecycleActions(release, o),
    // Why a verb its state would offer cannot be taken (superseded, no earlier admitted
    // manifest), in the words of the API's refusals; null when none.
    lifecycle_note: lifecycleNote(release, o),
    // A succeeded blue-green release's old environment at the engine's clock: warm until its
    // rollback window closes, then retired (domain/blue-green.ts); null otherwise.
    old_environment: o.oldEnvironment ?? null,
    // The later release that has since set its lanes (its traffic now is that one's); else null.
    superseded_by: o.supersededBy ?? null,
    lineage: release.lineage ?? null,
    // The recipe workflow's commit it was started from (docs/lifecycle.md); null otherwise.
    source: release.source ?? null,
    drift: currentDrift(r.history),
    // The mutable dependencies' drift recorded on it (docs/drift.md); null when none or requalified.
    dependency_drift: currentDependencyDrift(r.history),
    // The recovery drill due on its model (docs/recovery-actions.md); null when none or drilled since.
    drill_due: currentDrillDue(r.history),
    admission: release.admission ?? null,
    prerequisites: release.prerequisites ?? null,
    baseline: release.baseline ?? null,
    created_at: release.created_at,
    updated_at: release.updated_at,
    // When it succeeded and when its rollback window closes (docs/lifecycle.md); else null.
    succeeded_at: succeededAt(release),
    rollback_window_closes_at: rollbackWindowClosesAt(release),
    step_runs: release.step_runs,
    history: r.history,
    attempt_results: r.attempt_results,
    gates: gateSummaries(r.gate_evidence ?? []),
    manifest: release.manifest,
  };
}

/** How a recipe body is read: as YAML or JSON, and whether that was told or guessed. */
interface BodyFormat {
  yaml: boolean;
  /** No content-type was sent: the format was taken from the body's first character. */
  guessed: boolean;
}

const SEND_TYPE =
  "send the header that says what the body is: content-type: application/yaml for a YAML recipe, content-type: application/json for JSON";

/**
 * The format of a recipe body. `application/yaml` (or `text/yaml`, `…+yaml`, `…/yml`) is
 * YAML, `application/json` (or `…+json`) JSON; with no content-type at all the body is JSON
 * when it starts with `{` or `[`, else YAML (a YAML recipe starts with a key, `#` or `---`).
 * @throws BatonError 400 at `content-type` for any other type, naming the header to send.
 */
function bodyFormat(text: string, contentType: string | undefined): BodyFormat {
  const type = (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
  if (type === "") return { yaml: !/^\uFEFF?\s*[[{]/.test(text), guessed: true };
  const yaml = /(^|\/|\+|-)yaml$/.test(type) || type.endsWith("/yml");
  if (!yaml && type !== "application/json" && !type.endsWith("+json")) {
    const curl =
      type === "application/x-www-form-urlencoded"
        ? " (curl -d and --data-binary send this type unless told otherwise: add -H 'content-type: application/yaml' or -H 'content-type: application/json')"
        : "";
    throw badRequest("request", [
      {
        path: "content-type",
        message: `${type} is not a recipe format the engine reads`,
        fix: `${SEND_TYPE}${curl}`,
      },
    ]);
  }
  return { yaml, guessed: false };
}

/**
 * Parses a recipe body by content type: YAML for `application/yaml` (or `text/yaml`), JSON
 * for `application/json`, and with no content-type JSON when the body starts with `{` or `[`,
 * else YAML (docs/engine.md). Read once, within `RECIPE_LIMITS`: a body too complex (nested
 * deeper, or holding more entries, than the limits; an alias bomb) is refused like a syntax
 * error, naming the limit and where it was passed.
 * @param field the path problems name (`body`, or `body.recipe` for a signed start's text).
 * @throws BatonError 400 (`bad_request`) naming `field` (or `content-type`) and the fix.
 */
export function parseRecipeBody(
  text: string,
  contentType: string | undefined,
  field = "body",
): unknown {
  const { yaml: isYaml, guessed } = bodyFormat(text, contentType);
  if (text.trim() === "") {
    throw badRequest("recipe", [{ path: field, message: "is empty", fix: "send the recipe" }]);
  }
  const format = isYaml ? "YAML" : "JSON";
  const how = guessed
    ? ` (no content-type was sent; read as ${format} because the body ${isYaml ? "does not start" : "starts"} with { or [)`
    : "";
  const duplicate = (key: string, pos: { line: number } | null) =>
    badRequest("recipe", [
      {
        path: field,
        message: `duplicate key "${key.slice(0, 80)}"${pos ? ` at line ${pos.line}` : ""}`,
        fix: "give every key once; a parser keeps only one of equal keys, so the meaning is ambiguous",
      },
    ]);
  const syntax = (what: string, pos: { line: number; col: number } | null) => {
    const other = isYaml ? "content-type: application/json" : "content-type: application/yaml";
    const where = pos ? ` at line ${pos.line}, column ${pos.col}` : "";
    return badRequest("recipe", [
      {
        path: field,
        message: `is not valid ${format}${where}: ${what}${how}`,
        fix: guessed
          ? `fix the ${format} syntax, or ${SEND_TYPE}`
          : `fix the ${format} syntax; if the body is not ${format}, send ${other}`,
      },
    ]);
  };
  try {
    if (isYaml) return readBoundedYaml(text, "request body", { syntax, duplicate }).value;
    assertJsonBounds(
      text,
      RECIPE_LIMITS,
      { component: "[recipe]", where: "request body", path: field },
      duplicate,
    );
    return JSON.parse(text);
  } catch (e) {
    if (e instanceof BatonError) {
      // The recipe reader's refusals (too complex, alias bomb, a tag) name no field: name the body.
      throw new BatonError(
        e.code,
        e.message,
        e.problems.map((p) => (p.path === "" ? { ...p, path: field } : p)),
      );
    }
    throw syntax((e as Error).message.split("\n")[0] ?? "", null);
  }
}

/** The hint of a query on `GET /v1/releases/:id`: paging is `…/history`'s. */
const PAGING = "for the history a page at a time use GET /v1/releases/:id/history?cursor=&limit=";

export function releaseRoutes(o: ReleaseRouteOptions): Hono {
  const app = new Hono();
  // Read tokens are passed so the viewer token gets a 403 naming the operator token.
  const operator = requireBearer(o.operatorTokens, "operator", o.readTokens);
  const reader = requireBearer(o.readTokens, "viewer or operator");
  const limit = bodyLimit({
    maxSize: RECIPE_LIMITS.bytes,
    onError: () => {
      throw new BatonError(
        "payload_too_large",
        `[engine] recipe over ${RECIPE_LIMITS.bytes} bytes, the limit of a recipe; nothing was read past it`,
      );
    },
  });

  app.post(
    "/",
    operator,
    knownQueryParams("POST /v1/releases", schemaFields(CreateQuery)),
    limit,
    async (c) => {
      const q = CreateQuery.safeParse(c.req.query());
      if (!q.success) {
        throw badRequest("query", zodProblems(q.error, "query", {}, schemaFields(CreateQuery)));
      }
      const body = parseStartBody(await c.req.text(), c.req.header("content-type"));
      const actor = actorFor(personOf(c.req.header("authorization"), o.operators ?? []), undefined);
      const release = await o.api.start(body.recipe, actor, {
        hold: q.data.start === "false",
        ...(q.data.exposure ? { exposure: q.data.exposure } : {}),
        ...(body.bundle !== undefined ? { bundle: body.bundle } : {}),
        attestations: body.attestations,
        ...(body.source ? { source: body.source } : {}),
      });
      return c.json(
        {
          id: release.id,
          manifest_digest: release.manifest_digest,
          state: release.state,
          step_count: release.manifest.steps.length,
          admission: release.admission ?? null,
        },
        201,
      );
    },
  );

  app.get("/", reader, knownQueryParams("GET /v1/releases", schemaFields(ListQuery)), async (c) => {
    const q = ListQuery.safeParse(c.req.query());
    if (!q.success) {
      throw badRequest(
        "query",
        zodProblems(q.error, "query", LIST_FIXES, ["state", "limit", "before"]),
      );
    }
    const releases = await o.api.list(q.data);
    return c.json({ releases });
  });

  app.get(
    "/:id/history",
    reader,
    knownQueryParams("GET /v1/releases/:id/history", schemaFields(HistoryQuery)),
    async (c) => {
      const id = releaseParam(c);
      const q = HistoryQuery.safeParse(c.req.query());
      if (!q.success) {
        throw badRequest(
          "query",
          zodProblems(q.error, "query", HISTORY_FIXES, ["cursor", "limit"]),
        );
      }
      if (!o.api.historyPage)
        throw new BatonError("not_found", "[engine] history pages are not served here");
      return c.json(await o.api.historyPage(id, q.data));
    },
  );

  app.get("/:id", reader, knownQueryParams("GET /v1/releases/:id", [], PAGING), async (c) => {
    const record = await o.api.get(releaseParam(c));
    // Rollback is offered only when the engine would find a manifest to run again, and
    // neither verb once a later release has replaced this one on the lanes.
    const lookups = o.api.lifecycleLookups
      ? await o.api.lifecycleLookups(record.release)
      : record.release.state === "succeeded" && o.api.previousAdmitted
        ? { rollbackTo: (await o.api.previousAdmitted(record.release))?.prev.id ?? null }
        : {};
    return c.json(recordJson(record, lookups));
  });

  // The release's lanes as it set them beside the control plane's read now (`baton status -w`).
  app.get("/:id/lanes", reader, knownQueryParams("GET /v1/releases/:id/lanes"), async (c) => {
    const id = releaseParam(c);
    const release = o.api.peek ? await o.api.peek(id) : (await o.api.get(id)).release;
    if (!release) throw new BatonError("not_found", `[engine] release ${id} does not exist`);
    let read: LanesRead | null = null;
    if (o.lanes) {
      try {
        read = await o.lanes(release.manifest.model);
      } catch (err) {
        read = { ok: false, message: `[engine] ${(err as Error)?.message ?? String(err)}` };
      }
    }
    return c.json(lanesView(release, read));
  });

  app.get("/:id/record", reader, knownQueryParams("GET /v1/releases/:id/record"), async (c) => {
    return c.json(await o.api.releaseRecord(releaseParam(c), o.repository));
  });

  // The operator verbs on a release (domain/verbs.ts): abort, resume, pause, release, promote,
  // abandon, confirm-restore, rollback, roll-forward, accept.
  app.route(
    "/",
    verbRoutes("release", {
      api: o.api,
      operatorTokens: o.operatorTokens,
      ...(o.operators ? { operators: o.operators } : {}),
      readTokens: o.readTokens,
      recipeBody: {
        limit,
        read: async (c) => {
          const body = parseStartBody(await c.req.text(), c.req.header("content-type"));
          if (body.source) {
            throw badRequest("roll-forward body", [
              {
                path: "source",
                message: "a roll forward is an operator's verb, not a start of the recipe workflow",
                fix: "drop `source`; the recipe workflow starts a release with POST /v1/releases",
              },
            ]);
          }
          return body;
        },
      },
    }),
  );

  return app;
}
