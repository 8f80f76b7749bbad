/**
 * Runner-facing routes (docs/engine.md): preflight and callback (of a release's step run, or of
 * a recovery run `rv<N>` such as a credential revocation), authenticated by the HMAC
 * credential over the RAW body bytes, which are then decoded and parsed (those same bytes,
 * never a re-serialisation: failure case F12). Plus the operator verbs on a step run (retry,
 * resolve: routes/verbs.ts).
 */
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { BatonError } from "../../domain/errors.ts";
import type { Json } from "../../domain/types.ts";
import type { Clock } from "../../ports/clock.ts";
import type { Store } from "../../ports/store.ts";
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyBody } from "../../protocol/credential.ts";
import { isRecoveryRunId } from "../../protocol/ids.ts";
import { RUNNER_BODY_LIMITS } from "../../protocol/limits.ts";
import {
  CALLBACK_BODY_MAX_BYTES,
  CallbackBody,
  PreflightRequest,
} from "../../protocol/messages.ts";
import type { ReleaseApi } from "../../service/api.ts";
import { SampledLog } from "../../service/refusal-log.ts";
import { badCredentialMessage, type NamedToken } from "../auth.ts";
import { assertJsonBounds } from "../bounded-json.ts";
import { badRequest, errorResponse, zodProblems } from "../errors.ts";
import type { RunnerClaims, RunnerCredentialMode, RunnerOidcVerifier } from "../runner-oidc.ts";
import { answer, stepRunParam, verbRoutes } from "./verbs.ts";

export interface StepRunRouteOptions {
  api: ReleaseApi;
  clock: Clock;
  callbackSecrets: readonly string[];
  operatorTokens: readonly string[];
  /** People's own operator tokens: a retry or resolve sent with one is recorded as theirs. */
  operators?: readonly NamedToken[];
  /** Operator and viewer tokens: the viewer token gets 403 naming the operator token. */
  readTokens?: readonly string[];
  /**
   * The OIDC runner credential (runner-oidc.ts): with mode `oidc` or `hmac+oidc`, its verifier
   * and the store that spends token ids and binds runs to step runs. Default: HMAC only.
   */
  runnerCredential?: { mode: RunnerCredentialMode; verifier: RunnerOidcVerifier; store: Store };
  /** Where refused OIDC credentials are logged with their precise reason. */
  log?: { error(msg: string, err?: unknown): void; info?(msg: string): void };
}

const tooLarge = (): never => {
  throw new BatonError(
    "payload_too_large",
    `[engine] request body over ${CALLBACK_BODY_MAX_BYTES} bytes; cut the log tail to 256 KiB`,
  );
};

/** The `:id` of a preflight or callback: a step run, or a recovery run (`rv3`). */
function runnerRunParam(c: Context): string {
  const id = c.req.param("id") ?? "";
  return isRecoveryRunId(id) ? id : stepRunParam(c);
}

export function stepRunRoutes(o: StepRunRouteOptions): Hono {
  const app = new Hono();
  const limit = bodyLimit({ maxSize: CALLBACK_BODY_MAX_BYTES, onError: tooLarge });

  /**
   * Reads the raw bytes, verifies the credential over them, then parses them.
   * A bad credential is recorded as refused on the step run (when it exists) and answered 401.
   */
  const mode = o.runnerCredential?.mode ?? "hmac";
  // One line per refused request would let a stranger write the log at will: sampled.
  const refusalLines = new SampledLog();
  const BAD = badCredentialMessage(mode);

  /** Records a refused credential (precise reason) and answers the one identical 401. */
  async function refuse(c: Context, kind: string, id: string, reason: string, bytes: number) {
    const why = reason.slice(0, 300);
    if (mode !== "hmac") {
      const line = `[engine] ${kind} for ${id} refused: ${why}`;
      refusalLines.line((m) => o.log?.info?.(m), line, o.clock.now());
    }
    await o.api.recordRefused(
      id,
      kind,
      `[engine] ${kind} for ${id} refused: bad credential (${why})`,
      {
        reason: why,
        bytes,
      } satisfies Json,
    );
    return errorResponse(c, 401, "unauthorized", BAD);
  }

  async function signed(c: Context, kind: "preflight" | "callback", id: string) {
    const bytes = new Uint8Array(await c.req.arrayBuffer());
    if (bytes.length > CALLBACK_BODY_MAX_BYTES) tooLarge();
    if (mode !== "oidc") {
      const v = verifyBody(
        o.callbackSecrets,
        bytes,
        c.req.header(SIGNATURE_HEADER),
        c.req.header(TIMESTAMP_HEADER),
        o.clock.now(),
      );
      if (!v.ok) return { res: await refuse(c, kind, id, v.reason, bytes.length) };
    }
    let claims: RunnerClaims | null = null;
    if (o.runnerCredential && mode !== "hmac") {
      const token = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header("authorization") ?? "")?.[1] ?? null;
      const v = await o.runnerCredential.verifier.verify(token, o.clock.now());
      if (!v.ok && v.status === 503) {
        // Fail closed: without the issuer's keys nothing is accepted; the runner retries 5xx.
        o.log?.error(`[engine] ${kind} for ${id}: OIDC credential not checked: ${v.reason}`);
        c.header("retry-after", "10");
        return {
          res: errorResponse(
            c,
            503,
            "unavailable",
            "[engine] the runner credential cannot be checked now (the OIDC key set is unreadable); nothing was changed; retry in a few seconds",
          ),
        };
      }
      if (!v.ok) return { res: await refuse(c, kind, id, `oidc: ${v.reason}`, bytes.length) };
      claims = v.claims;
    }
    let raw: string;
    try {
      raw = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch {
      throw badRequest(`${kind} body`, [
        { path: "body", message: "is not valid UTF-8", fix: "send UTF-8 JSON" },
      ]);
    }
    // Within the runner body limits before JSON.parse builds anything: hostile nesting (e.g.
    // checks.json of 5,000 nested arrays) overflowed the stack while the store serialised it.
    assertJsonBounds(raw, RUNNER_BODY_LIMITS, {
      component: "[engine]",
      where: `${kind} body`,
      path: "body",
    });
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
    return { raw, value, claims, bytes: bytes.length };
  }

  /**
   * Binds a verified OIDC token to the step run (null when the mode has none): the token's run
   * must be the run the body names; at preflight the run is bound to this step run (the first
   * binding stands: a run serves one step run), at callback it must be bound to it already;
   * then the token's jti is spent (a replay is refused). Returns a 401 answer or null.
   */
  async function bindToken(
    c: Context,
    kind: "preflight" | "callback",
    id: string,
    s: { claims: RunnerClaims | null; bytes: number },
    body: { run_id: string; run_attempt: number },
  ): Promise<Response | null> {
    const t = s.claims;
    const rc = o.runnerCredential;
    if (!t || !rc) return null;
    if (t.run_id !== body.run_id || t.run_attempt !== body.run_attempt) {
      return refuse(
        c,
        kind,
        id,
        `oidc: the token is of run ${t.run_id} attempt ${t.run_attempt}, the body names run ${body.run_id} attempt ${body.run_attempt}`,
        s.bytes,
      );
    }
    const run = `${t.repository}#${t.run_id}`;
    const now = o.clock.now();
    const bound =
      kind === "preflight"
        ? await rc.store.bindRun({ run, stepRunId: id, now })
        : await rc.store.boundStepRun(run);
    if (bound !== id) {
      const where = bound
        ? `bound to step run ${bound}`
        : "not bound to any step run (no preflight)";
      return refuse(c, kind, id, `oidc: run ${t.run_id} is ${where}`, s.bytes);
    }
    if (!(await rc.store.useTokenId({ jti: t.jti, expiresAt: t.expiresAtMs, now }))) {
      return refuse(c, kind, id, `oidc: token id ${t.jti} was used already (replay)`, s.bytes);
    }
    return null;
  }

  /**
   * A credential is bound to the step run it is for: a body reporting on another step run is
   * refused like any bad credential (401, the same body, nothing changes).
   */
  function otherStepRun(c: Context, kind: string, bodyId: string, id: string, bytes: number) {
    if (bodyId === id) return null;
    return refuse(c, kind, id, `the body reports on step run ${bodyId}, not ${id}`, bytes);
  }

  app.post("/:id/preflight", limit, async (c) => {
    const id = runnerRunParam(c);
    const s = await signed(c, "preflight", id);
    if ("res" in s) return s.res;
    const p = PreflightRequest.safeParse(s.value);
    if (!p.success) throw badRequest("preflight body", zodProblems(p.error, "body"));
    const other = await otherStepRun(c, "preflight", p.data.step_run_id, id, s.bytes);
    if (other) return other;
    const refused = await bindToken(c, "preflight", id, s, p.data);
    if (refused) return refused;
    if (isRecoveryRunId(id)) {
      const rv = await o.api.credentials.preflight(id, p.data);
      if (!rv.ok) return errorResponse(c, rv.status, rv.code, rv.reason);
      return c.json({
        proceed: true,
        step_run_id: id,
        release_id: id,
        generation: 1,
        attempt: rv.revocation.run?.run_attempt ?? 1,
      });
    }
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
    const id = runnerRunParam(c);
    const s = await signed(c, "callback", id);
    if ("res" in s) return s.res;
    const p = CallbackBody.safeParse(s.value);
    if (!p.success) throw badRequest("callback body", zodProblems(p.error, "body"));
    const other = await otherStepRun(c, "callback", p.data.step_run_id, id, s.bytes);
    if (other) return other;
    const refused = await bindToken(c, "callback", id, s, p.data);
    if (refused) return refused;
    if (isRecoveryRunId(id)) {
      const rv = await o.api.credentials.callback(id, p.data);
      if (!rv.ok) return errorResponse(c, rv.status, rv.code, rv.reason);
      return c.json({
        accepted: true,
        replay: !rv.changed,
        step_run_id: id,
        verified: rv.revocation.verified,
      });
    }
    const r = await o.api.callback(id, p.data, s.raw);
    return answer(c, r, (a) => ({
      accepted: true,
      replay: !a.changed,
      step_run_id: id,
      release_state: a.release.state,
      ...a.reply,
    }));
  });

  // The runner's preflight and callback take any query (a callback URL may carry its own);
  // the operator verbs take none.
  // The operator verbs on a step run (domain/verbs.ts): retry, resolve.
  app.route(
    "/",
    verbRoutes("step_run", {
      api: o.api,
      operatorTokens: o.operatorTokens,
      ...(o.operators ? { operators: o.operators } : {}),
      readTokens: o.readTokens ?? o.operatorTokens,
    }),
  );

  return app;
}
