/**
 * The reference control plane's HTTP contract (docs/control-plane.openapi.yaml) as a Hono app.
 * Writes are PUTs of absolute state, identified by the headers `Idempotency-Key` (the operation
 * key), `Baton-Release-Id`, `Baton-Generation` and optional `Baton-Release-Uid`; the body is the desired state only, so the
 * ledger compares bodies by meaning. Errors: `{"error": {"code", "message", "problems"?}}`.
 */

import type { Context } from "hono";
import { Hono } from "hono";
import { bearerAuth } from "hono/bearer-auth";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import * as z from "zod";
import { queryNumber } from "../protocol/query-number.ts";
import type { ControlPlaneCore } from "./core.ts";
import { DEFAULT_MODEL } from "./core.ts";
import { CpError } from "./errors.ts";
import { type FaultPlan, FaultRule } from "./faults.ts";
import type { Hangs } from "./hangs.ts";
import type { CpAction, WriteIdentity } from "./model.ts";
import {
  DeclareLaneBody,
  Identity,
  LaneId,
  LaneImageBody,
  Marker,
  ModelName,
  parseOrThrow,
  RouteBody,
  SetCapabilitiesBody,
  SetMarkerBody,
  SetTrafficBody,
  SetWeightBody,
} from "./schemas.ts";
import type { TrafficGenerator } from "./traffic.ts";

/** Header names of the write identity (see the OpenAPI file). */
export const HEADERS = {
  operationKey: "Idempotency-Key",
  releaseId: "Baton-Release-Id",
  generation: "Baton-Generation",
  releaseUid: "Baton-Release-Uid",
} as const;

export interface AppDeps {
  core: ControlPlaneCore;
  /** null: fault injection disabled (the admin routes answer 404). */
  faults: FaultPlan | null;
  hangs: Hangs;
  /** The traffic generator whose counters `GET /metrics` exposes; absent: 404. */
  traffic?: TrafficGenerator | null;
  /**
   * The bearer token every write needs (`Authorization: Bearer <token>`): the `PUT`s, and the
   * fault admin routes. Reads and `POST /v1/route` (a routing decision, no state) stay open.
   */
  writeToken: string;
}

/** Methods that change state and so need the write token. */
const WRITE_METHODS = new Set(["PUT", "POST", "DELETE", "PATCH"]);

const Paging = z.object({
  operation_key: z.string().min(1).optional(),
  release_id: z.string().min(1).optional(),
  lane: z.string().min(1).optional(),
  after: queryNumber({ min: 0 }).optional(),
  limit: queryNumber({ min: 1, max: 10_000 }).optional(),
});

async function jsonBody(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === "") {
    throw new CpError("bad_request", "[control-plane] request body is empty; send a JSON object", [
      {
        path: "body",
        message: "empty",
        fix: "send a JSON object (see docs/control-plane.openapi.yaml)",
      },
    ]);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CpError(
      "bad_request",
      `[control-plane] request body is not valid JSON: ${(err as Error).message}`,
      [{ path: "body", message: "not valid JSON", fix: "send a JSON object" }],
    );
  }
}

function identityOf(c: Context): WriteIdentity {
  return parseOrThrow(
    Identity,
    {
      operation_key: c.req.header(HEADERS.operationKey),
      release_id: c.req.header(HEADERS.releaseId),
      generation: c.req.header(HEADERS.generation),
      release_uid: c.req.header(HEADERS.releaseUid),
    },
    "header",
  );
}

const laneParam = (c: Context) => parseOrThrow(LaneId, c.req.param("lane"), "path.lane");
const modelParam = (c: Context) => parseOrThrow(ModelName, c.req.param("model"), "path.model");

/** Builds the app. Every write goes through `keyedWrite` (identity, faults, core). */
export function createControlPlaneApp({ core, faults, hangs, traffic, writeToken }: AppDeps): Hono {
  if (writeToken.length < 16) {
    throw new Error("[control-plane] the write token must be at least 16 characters");
  }
  const app = new Hono();
  const refusal = (code: string, message: string) => ({ error: { code, message } });
  const needToken = bearerAuth({
    token: writeToken,
    noAuthenticationHeader: {
      message: refusal(
        "unauthorized",
        "[control-plane] writes need Authorization: Bearer <token>; set BATON_CONTROL_PLANE_TOKEN on the engine to this control plane's token (BATON_CP_TOKEN)",
      ),
    },
    invalidAuthenticationHeader: {
      message: refusal(
        "unauthorized",
        "[control-plane] the Authorization header is not `Bearer <token>`; send Authorization: Bearer <BATON_CONTROL_PLANE_TOKEN>",
      ),
    },
    invalidToken: {
      message: refusal(
        "unauthorized",
        "[control-plane] the bearer token is not this control plane's write token; set BATON_CONTROL_PLANE_TOKEN on the engine to the value of BATON_CP_TOKEN",
      ),
    },
  });
  app.use("*", async (c, next) => {
    if (!WRITE_METHODS.has(c.req.method) || c.req.path === "/v1/route") return next();
    return needToken(c, next);
  });
  app.use(
    "*",
    bodyLimit({
      maxSize: 256 * 1024,
      onError: (c) =>
        c.json(
          {
            error: {
              code: "payload_too_large",
              message: "[control-plane] request body is larger than 256 KiB",
            },
          },
          413,
        ),
    }),
  );

  async function keyedWrite(c: Context, build: (body: unknown) => CpAction) {
    const identity = identityOf(c);
    const action = build(await jsonBody(c));
    const fault = faults?.take("write", identity.operation_key);
    if (fault?.mode === "error") {
      return c.json(
        {
          error: {
            code: "injected_fault",
            message: "[control-plane] injected fault: 500, nothing applied",
          },
        },
        500,
      );
    }
    if (fault?.mode === "hang") {
      await hangs.wait(fault.hang_ms);
      return c.json(
        {
          error: {
            code: "injected_fault",
            message: "[control-plane] injected hang, nothing applied",
          },
        },
        503,
      );
    }
    if (fault?.mode === "lie") {
      // Acknowledged, dropped: no state change, no history, no ledger row.
      return c.json(
        {
          applied: true,
          replayed: false,
          operation_key: identity.operation_key,
          release_id: identity.release_id,
          generation: identity.generation,
          kind: action.kind,
        },
        200,
      );
    }
    const result = core.write(identity, action);
    if (fault?.mode === "apply_then_hang") await hangs.wait(fault.hang_ms);
    c.header("Idempotent-Replayed", String(result.replayed));
    return c.json(result.response, 200);
  }

  // Reads may be faulted too (`on: "read"`), matched by path.
  app.use("/v1/lanes/*", readFault);
  app.use("/v1/models/*", readFault);
  async function readFault(c: Context, next: () => Promise<void>) {
    if (c.req.method === "GET") {
      const fault = faults?.take("read", c.req.path);
      if (fault?.mode === "error") {
        return c.json(
          {
            error: { code: "injected_fault", message: "[control-plane] injected read fault: 500" },
          },
          500,
        );
      }
      if (fault) {
        await hangs.wait(fault.hang_ms);
        return c.json(
          { error: { code: "injected_fault", message: "[control-plane] injected read hang" } },
          503,
        );
      }
    }
    return next();
  }

  app.get("/healthz", (c) => c.json({ ok: true }));
  if (traffic) {
    app.get("/metrics", (c) =>
      c.body(traffic.metricsText(), 200, { "content-type": "text/plain; version=0.0.4" }),
    );
  }

  app.get("/v1/lanes", (c) => {
    const model = c.req.query("model");
    if (model !== undefined) parseOrThrow(ModelName, model, "query.model");
    return c.json({ lanes: core.lanes(model) });
  });
  app.get("/v1/lanes/:lane", (c) => c.json(core.lane(laneParam(c))));
  app.put("/v1/lanes/:lane", (c) => {
    const lane = laneParam(c);
    return keyedWrite(c, (b) => ({
      kind: "declare_lane",
      lane,
      ...parseOrThrow(DeclareLaneBody, b, "body"),
    }));
  });
  // The lane's own report of the image it runs (after a deploy or a restore): not a keyed
  // Baton write, so no identity headers, no ledger row and no history entry.
  app.put("/v1/lanes/:lane/image", async (c) => {
    const lane = laneParam(c);
    const { image } = parseOrThrow(LaneImageBody, await jsonBody(c), "body");
    return c.json(core.reportImage(lane, image));
  });
  app.put("/v1/lanes/:lane/weight", (c) => {
    const lane = laneParam(c);
    return keyedWrite(c, (b) => ({
      kind: "set_weight",
      lane,
      ...parseOrThrow(SetWeightBody, b, "body"),
    }));
  });
  app.put("/v1/lanes/:lane/markers/:marker", (c) => {
    const lane = laneParam(c);
    const marker = parseOrThrow(Marker, c.req.param("marker"), "path.marker");
    return keyedWrite(c, (b) => ({
      kind: "set_marker",
      lane,
      marker,
      ...parseOrThrow(SetMarkerBody, b, "body"),
    }));
  });
  app.put("/v1/lanes/:lane/capabilities", (c) => {
    const lane = laneParam(c);
    return keyedWrite(c, (b) => ({
      kind: "set_capabilities",
      lane,
      ...parseOrThrow(SetCapabilitiesBody, b, "body"),
    }));
  });

  app.get("/v1/models/:model/traffic", (c) => {
    const { model, weights, lanes } = core.traffic(modelParam(c));
    return c.json({ model, weights, excluded: lanes.filter((l) => l.excluded).map((l) => l.id) });
  });
  app.put("/v1/models/:model/traffic", (c) => {
    const model = modelParam(c);
    return keyedWrite(c, (b) => ({
      kind: "set_traffic",
      model,
      ...parseOrThrow(SetTrafficBody, b, "body"),
    }));
  });

  app.post("/v1/route", async (c) => {
    const body = parseOrThrow(RouteBody, await jsonBody(c), "body");
    return c.json(core.route(body.model ?? DEFAULT_MODEL, body.requests));
  });

  app.get("/v1/history", (c) =>
    c.json({ history: core.history(parseOrThrow(Paging, c.req.query(), "query")) }),
  );
  app.get("/v1/ledger", (c) => {
    const q = parseOrThrow(Paging, c.req.query(), "query");
    return c.json({ ledger: core.ledger({ release_id: q.release_id, limit: q.limit }) });
  });

  // Fault injection: present only when enabled.
  const disabled = () => {
    throw new CpError(
      "faults_disabled",
      "[control-plane] fault injection is disabled; start the server with faults enabled (BATON_CP_FAULTS=1) to use /v1/admin/faults",
    );
  };
  app.get("/v1/admin/faults", (c) => (faults ? c.json({ armed: faults.armed() }) : disabled()));
  app.post("/v1/admin/faults", async (c) => {
    if (!faults) return disabled();
    const rule = faults.arm(parseOrThrow(FaultRule, await jsonBody(c), "body"));
    return c.json({ armed: rule }, 201);
  });
  app.delete("/v1/admin/faults", (c) => {
    if (!faults) return disabled();
    faults.clear();
    return c.body(null, 204);
  });

  app.notFound((c) =>
    c.json(
      {
        error: {
          code: "not_found",
          message: `[control-plane] no route ${c.req.method} ${c.req.path}; see docs/control-plane.openapi.yaml`,
        },
      },
      404,
    ),
  );
  app.onError((err, c) => {
    // The bearer-token check answers through HTTPException with its own response.
    if (err instanceof HTTPException) return err.getResponse();
    if (err instanceof CpError) {
      const problems = err.problems.length > 0 ? { problems: err.problems } : {};
      return c.json({ error: { code: err.code, message: err.message, ...problems } }, err.status);
    }
    console.error("[control-plane] internal error", err);
    return c.json(
      {
        error: { code: "internal", message: "[control-plane] internal error; see the server log" },
      },
      500,
    );
  });
  return app;
}
