/**
 * A small stand-in for the engine's runner-facing routes (docs/runner.md), for action tests and
 * the action benchmark until they run against the real engine: preflight binds, numbers and
 * fences attempts; callback is idempotent per attempt and refuses older attempts (409). Both
 * verify the real HMAC credential over the raw body before parsing it.
 */
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import {
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  verifyBody,
} from "../../engine/src/protocol/credential.ts";
import { CallbackBody, PreflightRequest } from "../../engine/src/protocol/messages.ts";

/** A step run the stand-in knows (what a dispatch would have created). */
export interface StepRunSeed {
  id: string;
  release_id: string;
  generation: number;
  manifest_digest: string;
  dispatch: number;
  /**
   * The digest of the dispatched work (`payloadDigestOf(payload)`), as the engine computes it
   * from its record; a preflight whose `payload_digest` differs answers 409 payload_mismatch.
   * Omitted (bench/action.bench.ts seeds): the field's format is still checked, not its value.
   */
  payload_digest?: string;
  /** `awaiting` (default) accepts a preflight; anything else answers 409 with this as the reason. */
  state?: string;
}

/** One request as received (after the credential check). */
export interface Received {
  route: "preflight" | "callback";
  stepRunId: string;
  status: number;
  body: string;
  at: number;
}

interface StepRunState extends StepRunSeed {
  boundRunId: string | null;
  attempts: Map<number, number>; // run_attempt -> attempt
  current: number;
  results: Map<number, CallbackBody>;
  advice?: string;
}

export interface EngineStandin {
  url: string;
  secret: string;
  addStepRun(seed: StepRunSeed): void;
  /**
   * The engine dispatched other work for step run `id` (a test that edits a payload before
   * running it): preflights must now carry `digest` (`payloadDigestOf` of the edited payload).
   */
  setPayloadDigest(id: string, digest: string): void;
  /**
   * The engine's `advice` for a failed result of step run `id` (what comes next, e.g. "re-run
   * this job before 15:32 UTC, or release r5 compensates"), sent in the callback answer.
   */
  setAdvice(id: string, advice: string): void;
  /** Requests that passed the credential check, in order (also the refused ones). */
  received: Received[];
  /** Accepted callback bodies per step run, keyed by attempt. */
  results(id: string): Map<number, CallbackBody>;
  /** The next `times` requests to `route` answer `status` (e.g. 503) before any other check. */
  failNext(route: "preflight" | "callback", status: number, times: number): void;
  close(): Promise<void>;
}

const err = (code: string, message: string) => ({ error: { code, message } });

/** Starts the stand-in on 127.0.0.1 (ephemeral port). */
export async function startEngineStandin(
  secret = "test-callback-secret-0123456789",
): Promise<EngineStandin> {
  const runs = new Map<string, StepRunState>();
  const received: Received[] = [];
  const failures: Record<string, { status: number; times: number }> = {};
  const app = new Hono();

  const handle = (route: "preflight" | "callback") =>
    app.post(`/v1/releases/step-runs/:id/${route}`, async (c) => {
      const raw = new Uint8Array(await c.req.arrayBuffer());
      const text = new TextDecoder().decode(raw);
      const id = c.req.param("id");
      const record = (status: number) =>
        received.push({ route, stepRunId: id, status, body: text, at: Date.now() });
      const injected = failures[route];
      if (injected && injected.times > 0) {
        injected.times--;
        record(injected.status);
        return c.json(err("injected", "stand-in failure"), injected.status as 503);
      }
      const v = verifyBody(
        [secret],
        raw,
        c.req.header(SIGNATURE_HEADER),
        c.req.header(TIMESTAMP_HEADER),
      );
      if (!v.ok) return c.json(err("unauthenticated", "[engine] bad or missing credential"), 401);
      const run = runs.get(id);
      if (!run) {
        record(404);
        return c.json(err("not_found", `[engine] no step run ${id}`), 404);
      }
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        record(400);
        return c.json(err("bad_request", "[engine] body is not JSON"), 400);
      }
      if (route === "preflight") {
        const p = PreflightRequest.safeParse(json);
        if (!p.success || p.data.step_run_id !== id) {
          record(400);
          return c.json(err("bad_request", "[engine] preflight body invalid"), 400);
        }
        const q = p.data;
        if (
          q.release_id !== run.release_id ||
          q.generation !== run.generation ||
          q.manifest_digest !== run.manifest_digest
        ) {
          record(409);
          return c.json(
            err("stale", `[engine] step run ${id} belongs to another release generation`),
            409,
          );
        }
        if (run.payload_digest !== undefined && q.payload_digest !== run.payload_digest) {
          record(409);
          return c.json(
            err(
              "payload_mismatch",
              `[engine] preflight for ${id}: the payload's tool/args/operation key differ from what the engine dispatched (digest ${q.payload_digest.slice(0, 12)}… ≠ ${run.payload_digest.slice(0, 12)}…); run only payloads the engine dispatched — copy it from the step-run page`,
            ),
            409,
          );
        }
        if (run.boundRunId === null) {
          if (run.state !== "awaiting") {
            record(409);
            return c.json(err("stale", `[engine] step run ${id} is ${run.state}`), 409);
          }
          run.boundRunId = q.run_id;
        } else if (run.boundRunId !== q.run_id) {
          record(409);
          return c.json(
            err(
              "duplicate",
              `[engine] step run ${id} is bound to run ${run.boundRunId}; run ${q.run_id} is a duplicate delivery`,
            ),
            409,
          );
        }
        let attempt = run.attempts.get(q.run_attempt);
        if (attempt === undefined) {
          const newest = Math.max(0, ...run.attempts.keys());
          if (q.run_attempt < newest || run.state === "succeeded") {
            record(409);
            return c.json(
              err("fenced", `[engine] step run ${id} has a newer attempt or already succeeded`),
              409,
            );
          }
          attempt = run.current + 1;
          run.current = attempt;
          run.attempts.set(q.run_attempt, attempt);
        } else if (attempt < run.current) {
          record(409);
          return c.json(
            err(
              "fenced",
              `[engine] step run ${id} is fenced: attempt ${attempt} < current attempt ${run.current}`,
            ),
            409,
          );
        }
        record(200);
        return c.json({
          proceed: true,
          step_run_id: id,
          attempt,
          release_id: run.release_id,
          generation: run.generation,
        });
      }
      const b = CallbackBody.safeParse(json);
      if (!b.success || b.data.step_run_id !== id || b.data.run_id !== run.boundRunId) {
        record(400);
        return c.json(
          err("bad_request", "[engine] callback body invalid or from an unbound run"),
          400,
        );
      }
      const attempt = run.attempts.get(b.data.run_attempt);
      if (attempt === undefined) {
        record(409);
        return c.json(
          err("fenced", `[engine] run attempt ${b.data.run_attempt} never preflighted`),
          409,
        );
      }
      if (attempt < run.current) {
        record(409);
        return c.json(
          err(
            "fenced",
            `[engine] step run ${id} is fenced: attempt ${attempt} < current attempt ${run.current}; the newer attempt's result stands`,
          ),
          409,
        );
      }
      if (!run.results.has(attempt)) {
        run.results.set(attempt, b.data);
        run.state = b.data.overall === "pass" ? "succeeded" : "failed";
      }
      record(200);
      const advice = b.data.overall !== "pass" && run.advice ? { advice: run.advice } : {};
      return c.json({
        accepted: true,
        attempt,
        replay: run.results.get(attempt) !== b.data,
        ...advice,
      });
    });
  handle("preflight");
  handle("callback");

  const { server, port } = await new Promise<{ server: ReturnType<typeof serve>; port: number }>(
    (resolve) => {
      const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info) =>
        resolve({ server: s, port: info.port }),
      );
    },
  );
  return {
    url: `http://127.0.0.1:${port}`,
    secret,
    received,
    setPayloadDigest: (id, digest) => {
      const run = runs.get(id);
      if (!run) throw new Error(`[test] the stand-in has no step run ${id}`);
      run.payload_digest = digest;
    },
    setAdvice: (id, advice) => {
      const run = runs.get(id);
      if (!run) throw new Error(`[test] the stand-in has no step run ${id}`);
      run.advice = advice;
    },
    addStepRun: (seed) =>
      runs.set(seed.id, {
        state: "awaiting",
        ...seed,
        boundRunId: null,
        attempts: new Map(),
        current: 0,
        results: new Map(),
      }),
    results: (id) => runs.get(id)?.results ?? new Map(),
    failNext: (route, status, times) => {
      failures[route] = { status, times };
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
