/**
 * Runner-facing routes (docs/engine.md): preflight and callback, authenticated by the HMAC
 * credential over the RAW body bytes, which are then decoded and parsed (those same bytes,
 * never a re-serialisation: failure case F12). Plus the operator's retry of a step run.
 */
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import { BatonError } from "../../domain/errors.ts";
import type { Json } from "../../domain/types.ts";
import type { Clock } from "../../ports/clock.ts";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyBody } from "../../protocol/credential.ts";
import { STEP_RUN_ID_PATTERN } from "../../protocol/ids.ts";
import {
  CALLBACK_BODY_MAX_BYTES,
  CallbackBody,
  PreflightRequest,
} from "../../protocol/messages.ts";
import type { Accepted, Refusal, ReleaseApi } from "../../service/api.ts";
import { BAD_CREDENTIAL_MESSAGE, requireBearer } from "../auth.ts";
import { badRequest, errorResponse, zodProblems } from "../errors.ts";
import { ActorField, actorOf, jsonBody } from "./operator-body.ts";

const ResolveBody = z
  .object({
    reason: z.string().max(1000, "must be at most 1000 characters").default(""),
    actor: ActorField,
  })
  .strict();

export interface StepRunRouteOptions {
  api: ReleaseApi;
  clock: Clock;
  callbackSecrets: readonly string[];
  operatorTokens: readonly string[];
  /** Operator and viewer tokens: the viewer token gets 403 naming the operator token. */
  readTokens?: readonly string[];
}

const tooLarge = (): never => {
  throw new BatonError(
    "payload_too_large",
    `[engine] request body over ${CALLBACK_BODY_MAX_BYTES} bytes; cut the log tail to 256 KiB`,
  );
};

/** Validates the `:id` path parameter as a step-run id. @throws BatonError 400. */
export function stepRunParam(c: Context): string {
  const id = c.req.param("id") ?? "";
  if (!STEP_RUN_ID_PATTERN.test(id)) {
    throw badRequest("step run id", [
      {
        path: "id",
        message: `${JSON.stringify(id.slice(0, 64))} is not a step run id`,
        fix: "use an id such as sr_17_6_f (sr_<release>_<step>_<f|b>)",
      },
    ]);
  }
  return id;
}

/** Answers a service result: the refusal's status, or 200 with `ok`'s body. */
export function answer(
  c: Context,
  r: Accepted | Refusal,
  ok: (a: Accepted) => Record<string, unknown>,
): Response {
  if (!r.ok) return errorResponse(c, r.status, r.code, r.reason);
  return c.json(ok(r), 200);
}

/** Deepest nesting of arrays/objects accepted in a preflight or callback body. */
const MAX_BODY_DEPTH = 64;

/** True when `value` nests arrays/objects deeper than `max`; iterative, so it cannot overflow. */
function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  for (let n = 0; stack.length > 0 && n < 1_000_000; n++) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== "object") continue;
    if (depth >= max) return true;
    for (const child of Object.values(v as object)) stack.push([child, depth + 1]);
  }
  return false;
}

export function stepRunRoutes(o: StepRunRouteOptions): Hono {
  const app = new Hono();
  const limit = bodyLimit({ maxSize: CALLBACK_BODY_MAX_BYTES, onError: tooLarge });

  /**
   * Reads the raw bytes, verifies the credential over them, then parses them.
   * A bad credential is recorded as refused on the step run (when it exists) and answered 401.
   */
  async function signed(c: Context, kind: "preflight" | "callback", id: string) {
    const bytes = new Uint8Array(await c.req.arrayBuffer());
    if (bytes.length > CALLBACK_BODY_MAX_BYTES) tooLarge();
    const v = verifyBody(
      o.callbackSecrets,
      bytes,
      c.req.header(SIGNATURE_HEADER),
      c.req.header(TIMESTAMP_HEADER),
      o.clock.now(),
    );
    if (!v.ok) {
      await o.api.recordRefused(
        id,
        kind,
        `[engine] ${kind} for ${id} refused: bad credential (${v.reason})`,
        { reason: v.reason, bytes: bytes.length } satisfies Json,
      );
      return { res: errorResponse(c, 401, "unauthorized", BAD_CREDENTIAL_MESSAGE) };
    }
    let raw: string;
    try {
      raw = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch {
      throw badRequest(`${kind} body`, [
        { path: "body", message: "is not valid UTF-8", fix: "send UTF-8 JSON" },
      ]);
    }
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (e) {
      throw badRequest(`${kind} body`, [
        {
          path: "body",
          message: `is not JSON (${(e as Error).message})`,
          fix: "send a JSON object",
        },
      ]);
    }
    // Hostile nesting (e.g. checks.json of 5,000 nested arrays) overflowed the stack while the
    // store serialised it: a 500. Refuse it here, naming the field.
    if (nestedDeeperThan(value, MAX_BODY_DEPTH)) {
      throw badRequest(`${kind} body`, [
        {
          path: "body",
          message: `nests deeper than ${MAX_BODY_DEPTH} levels`,
          fix: "send checks.json as an array of flat check records",
        },
      ]);
    }
    return { raw, value };
  }

  function sameId(bodyId: string, id: string) {
    if (bodyId !== id) {
      throw badRequest("body", [
        {
          path: "body.step_run_id",
          message: `is ${bodyId} but the URL names ${id}`,
          fix: "post to the URL of the step run the body reports on",
        },
      ]);
    }
  }

  app.post("/:id/preflight", limit, async (c) => {
    const id = stepRunParam(c);
    const s = await signed(c, "preflight", id);
    if ("res" in s) return s.res;
    const p = PreflightRequest.safeParse(s.value);
    if (!p.success) throw badRequest("preflight body", zodProblems(p.error, "body"));
    sameId(p.data.step_run_id, id);
    const r = await o.api.preflight(id, p.data);
    return answer(c, r, (a) => ({
      proceed: true,
      step_run_id: id,
      release_id: a.release.id,
      generation: a.release.generation,
      ...a.reply,
    }));
  });

  app.post("/:id/callback", limit, async (c) => {
    const id = stepRunParam(c);
    const s = await signed(c, "callback", id);
    if ("res" in s) return s.res;
    const p = CallbackBody.safeParse(s.value);
    if (!p.success) throw badRequest("callback body", zodProblems(p.error, "body"));
    sameId(p.data.step_run_id, id);
    const r = await o.api.callback(id, p.data, s.raw);
    return answer(c, r, (a) => ({
      accepted: true,
      replay: !a.changed,
      step_run_id: id,
      release_state: a.release.state,
      ...a.reply,
    }));
  });

  app.post("/:id/retry", requireBearer(o.operatorTokens, "operator", o.readTokens), async (c) => {
    const id = stepRunParam(c);
    const r = await o.api.retry(id, "operator");
    return answer(c, r, (a) => ({ step_run_id: id, release_state: a.release.state }));
  });

  app.post("/:id/resolve", requireBearer(o.operatorTokens, "operator"), async (c) => {
    const id = stepRunParam(c);
    const b = await jsonBody(c, "resolve body", ResolveBody);
    const r = await o.api.resolve(id, actorOf(b.actor), b.reason);
    return answer(c, r, (a) => ({ step_run_id: id, release_state: a.release.state }));
  });

  return app;
}
