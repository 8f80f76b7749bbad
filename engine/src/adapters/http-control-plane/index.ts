/**
 * HTTP client adapter of the `ControlPlane` port for the contract in
 * docs/control-plane.openapi.yaml (the reference server, or a user's own service).
 * It imports only the wire contract (`protocol/control-plane.ts`), never the reference server.
 * Every write names its model in the context (`WriteContext.model`), so one adapter serves
 * releases of every model.
 *
 * Classification of a write (docs/state-machine.md rule 5: a timeout is `unknown` until observed):
 * - 2xx -> `ok`, `replayed` from the server's answer;
 * - 4xx -> `failed` with the server's message (stale generation 409, reused key 422, bad input 400);
 * - 5xx, timeout, network error -> `unknown` (resolve with `observe`, or re-send the same key).
 * The adapter does not retry: the engine re-sends the identical keyed request when it decides to.
 */
import type { ControlPlaneOp } from "../../domain/types.ts";
import type {
  ApplyResult,
  ControlPlane,
  LanesRead,
  ObserveResult,
} from "../../ports/control-plane.ts";
import {
  actionOf,
  type LaneState,
  laneMatches,
  WRITE_HEADERS,
  type WriteContext,
  weightsMatch,
} from "../../protocol/control-plane.ts";

export interface HttpControlPlaneOptions {
  /** Base URL of the control plane, e.g. `http://127.0.0.1:8788` (BATON_CONTROL_PLANE_URL). */
  baseUrl: string;
  /** Per-request timeout, ms, covering the answer's body too. Default 5000. */
  timeoutMs?: number;
  /**
   * Bearer token sent as `Authorization: Bearer <token>` on every request
   * (BATON_CONTROL_PLANE_TOKEN; the reference control plane refuses writes without it).
   */
  token?: string;
  /** Extra headers on every request (they win over `token`'s `Authorization`). */
  headers?: Record<string, string>;
  /** fetch implementation (tests). Default the global `fetch`. */
  fetch?: typeof fetch;
}

type Reply =
  | { kind: "answer"; status: number; body: unknown }
  | { kind: "unknown"; message: string };

/** The HTTP control plane. `apply` and `observe` never throw. */
export class HttpControlPlane implements ControlPlane {
  private readonly base: string;
  private readonly timeoutMs: number;

  constructor(private readonly options: HttpControlPlaneOptions) {
    this.base = options.baseUrl.replace(/\/+$/, "");
    this.timeoutMs = options.timeoutMs ?? 5000;
  }

  async apply(op: ControlPlaneOp, ctx: WriteContext): Promise<ApplyResult> {
    const action = actionOf(op, ctx.model);
    if (action === null)
      return this.assertTraffic(op as Extract<ControlPlaneOp, { op: "assert_traffic" }>, ctx);
    const lane = "lane" in action ? `/v1/lanes/${encodeURIComponent(action.lane)}` : "";
    const [path, body] =
      action.kind === "set_traffic"
        ? [trafficPath(ctx.model), { weights: action.weights }]
        : action.kind === "set_marker"
          ? [`${lane}/markers/${action.marker}`, { present: action.present }]
          : action.kind === "set_capabilities"
            ? [
                `${lane}/capabilities`,
                { capabilities: action.capabilities, advertised: action.advertised },
              ]
            : action.kind === "set_weight"
              ? [`${lane}/weight`, { weight: action.weight }]
              : [lane, { model: action.model }];
    const reply = await this.send("PUT", path, body, {
      [WRITE_HEADERS.operation_key]: ctx.operation_key,
      [WRITE_HEADERS.release_id]: ctx.release_id,
      [WRITE_HEADERS.generation]: String(ctx.generation),
      ...(ctx.release_uid ? { [WRITE_HEADERS.release_uid]: ctx.release_uid } : {}),
    });
    if (reply.kind === "unknown") return { outcome: "unknown", message: reply.message };
    if (reply.status >= 200 && reply.status < 300) {
      return { outcome: "ok", replayed: (reply.body as { replayed?: unknown })?.replayed === true };
    }
    if (reply.status >= 400 && reply.status < 500) {
      return { outcome: "failed", status: reply.status, message: messageOf(reply, `PUT ${path}`) };
    }
    return { outcome: "unknown", message: messageOf(reply, `PUT ${path}`) };
  }

  async observe(op: ControlPlaneOp, ctx: WriteContext): Promise<ObserveResult> {
    if (op.op === "set_traffic" || op.op === "assert_traffic") {
      const reply = await this.send("GET", trafficPath(ctx.model));
      if (reply.kind === "unknown") return { ok: false, message: reply.message };
      if (reply.status === 404) return { ok: true, matches: false, observed: null };
      if (reply.status !== 200)
        return { ok: false, message: messageOf(reply, `GET ${trafficPath(ctx.model)}`) };
      const weights = (reply.body as { weights?: Record<string, number> }).weights ?? {};
      return { ok: true, matches: weightsMatch(weights, op.weights), observed: weights };
    }
    const path = `/v1/lanes/${encodeURIComponent(op.lane)}`;
    const reply = await this.send("GET", path);
    if (reply.kind === "unknown") return { ok: false, message: reply.message };
    if (reply.status === 404) return { ok: true, matches: false, observed: null };
    if (reply.status !== 200) return { ok: false, message: messageOf(reply, `GET ${path}`) };
    const lane = reply.body as LaneState;
    return { ok: true, matches: laneMatches(op, lane), observed: lane };
  }

  /**
   * `GET /v1/lanes[?model=]`: the lanes as the control plane holds them now. `signal` aborts
   * the request (its connection closes) before the adapter's own timeout.
   */
  async lanes(model?: string, signal?: AbortSignal): Promise<LanesRead> {
    const path = `/v1/lanes${model === undefined ? "" : `?model=${encodeURIComponent(model)}`}`;
    const reply = await this.send("GET", path, undefined, {}, signal);
    if (reply.kind === "unknown") return { ok: false, message: reply.message };
    const lanes = (reply.body as { lanes?: unknown } | null)?.lanes;
    if (reply.status !== 200 || !Array.isArray(lanes))
      return { ok: false, message: messageOf(reply, `GET ${path}`) };
    return { ok: true, lanes: lanes as LaneState[] };
  }

  private async assertTraffic(
    op: Extract<ControlPlaneOp, { op: "assert_traffic" }>,
    ctx: WriteContext,
  ): Promise<ApplyResult> {
    const seen = await this.observe(op, ctx);
    if (!seen.ok) return { outcome: "unknown", message: seen.message };
    if (seen.matches) return { outcome: "ok", replayed: false };
    return {
      outcome: "failed",
      status: 409,
      message: `[control-plane] traffic of model ${ctx.model} is ${JSON.stringify(seen.observed)}, expected ${JSON.stringify(op.weights)}`,
    };
  }

  private async send(
    method: "GET" | "PUT",
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
    signal?: AbortSignal,
  ): Promise<Reply> {
    const doFetch = this.options.fetch ?? fetch;
    try {
      const res = await doFetch(`${this.base}${path}`, {
        method,
        headers: {
          ...(this.options.token && !hasAuthorization(this.options.headers)
            ? { authorization: `Bearer ${this.options.token}` }
            : {}),
          ...this.options.headers,
          ...headers,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        // A redirect is not followed: the write would go where the answer says (another
        // origin, a metadata service), with the token.
        redirect: "manual",
        signal: signal
          ? AbortSignal.any([AbortSignal.timeout(this.timeoutMs), signal])
          : AbortSignal.timeout(this.timeoutMs),
      });
      if (res.status >= 300 && res.status < 400) {
        await res.body?.cancel();
        return {
          kind: "answer",
          status: res.status,
          body: `[control-plane] ${method} ${path} answered a redirect (${res.status} to ${res.headers.get("location") ?? "?"}), which is not followed; set BATON_CONTROL_PLANE_URL to the address the control plane answers at`,
        };
      }
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text === "" ? null : JSON.parse(text);
      } catch {
        // Not JSON (e.g. a proxy's HTML error page): keep the text for the message.
      }
      return { kind: "answer", status: res.status, body: parsed };
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; message?: string } };
      if (signal?.aborted) {
        return {
          kind: "unknown",
          message: `[control-plane] ${method} ${path} was given up by the caller`,
        };
      }
      if (e.name === "TimeoutError" || e.name === "AbortError") {
        return {
          kind: "unknown",
          message: `[control-plane] ${method} ${path} timed out after ${this.timeoutMs} ms; the outcome is unknown until observed`,
        };
      }
      const cause = e.cause?.code ?? e.cause?.message ?? e.message;
      return {
        kind: "unknown",
        message: `[control-plane] ${method} ${path} failed on the network (${cause}); the outcome is unknown until observed`,
      };
    }
  }
}

function trafficPath(model: string): string {
  return `/v1/models/${encodeURIComponent(model)}/traffic`;
}

function messageOf(reply: Extract<Reply, { kind: "answer" }>, what: string): string {
  const body = reply.body as { error?: { message?: unknown } } | string | null;
  const detail =
    typeof body === "object" && body && typeof body.error?.message === "string"
      ? body.error.message
      : typeof body === "string"
        ? body.slice(0, 500)
        : "";
  return `[control-plane] ${what} answered HTTP ${reply.status}${detail ? `: ${detail}` : ""}`;
}

function hasAuthorization(headers: Record<string, string> | undefined): boolean {
  return Object.keys(headers ?? {}).some((k) => k.toLowerCase() === "authorization");
}

/** Builds the adapter (see `HttpControlPlaneOptions`). */
export function createHttpControlPlane(options: HttpControlPlaneOptions): HttpControlPlane {
  return new HttpControlPlane(options);
}
