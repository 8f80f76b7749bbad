/**
 * The release the engine benchmarks drive, and the world around it, shared by `bench:engine`
 * and `bench:peer` (both sides of it): one recipe of 4 lanes in 2 waves (26 steps: 18
 * control-plane steps, 8 runner steps), an in-memory control plane per release, the engine
 * configuration, and the simulated runner's signed preflight and callback bodies.
 */

import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import type { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import type { EngineConfig } from "../../engine/src/config.ts";
import type { ControlPlaneOp } from "../../engine/src/domain/types.ts";
import type { ControlPlane, WriteContext } from "../../engine/src/ports/control-plane.ts";
import { signBody } from "../../engine/src/protocol/credential.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { payloadDigestOf } from "../../engine/src/protocol/payload-digest.ts";

export const LANES = 4;
export const SECRET = "bench-callback-secret-0123456789";
export const OPERATOR = "bench-operator-token-0123456789";
export const SHA = "34f9bae4c170320dced1664d4321610c952e4b04";
const HOST_KEY = "SHA256:q4YbKWRnplKrKDOS5J7OTZmJqlBWdVB4z5qRddVIgJ4";
const IMAGE = `ghcr.io/acme/summarizer@sha256:${"6b".repeat(32)}`;
const PREVIOUS = `ghcr.io/acme/summarizer@sha256:${"dd".repeat(32)}`;

/** The benchmark recipe (as a user would POST it): 4 lanes, waves of 2 at 50% and 100%. */
export function benchRecipe() {
  const lanes = Array.from({ length: LANES }, (_, i) => ({
    id: `lane-${i}`,
    host: `gpu-${i}.serving.acme.internal`,
    user: "deploy",
    host_key: HOST_KEY,
    queue: "summarize",
    capabilities: ["summarize"],
    health_url: `http://gpu-${i}.serving.acme.internal:8080/healthz`,
  }));
  return {
    name: "bench",
    model: "summarizer",
    image: IMAGE,
    previous_image: PREVIOUS,
    tool_revision: SHA,
    lanes,
    rollout: {
      waves: [
        { lanes: ["lane-0", "lane-1"], traffic: 50 },
        { lanes: ["lane-2", "lane-3"], traffic: 100 },
      ],
    },
  };
}

/** One in-memory control plane per release (releases in a benchmark share lane names). */
export class PerReleaseControlPlane implements ControlPlane {
  private readonly cps = new Map<string, MemoryControlPlane>();
  private cp(id: string): MemoryControlPlane {
    let cp = this.cps.get(id);
    if (!cp) {
      cp = new MemoryControlPlane({ model: "summarizer" });
      cp.seed(Array.from({ length: LANES }, (_, i) => ({ id: `lane-${i}`, weight: 100 / LANES })));
      this.cps.set(id, cp);
    }
    return cp;
  }
  apply(op: ControlPlaneOp, ctx: WriteContext) {
    return this.cp(ctx.release_id).apply(op, ctx);
  }
  observe(op: ControlPlaneOp, ctx: WriteContext) {
    return this.cp(ctx.release_id).observe(op, ctx);
  }
}

/** The engine's configuration in the benchmarks (local dispatcher; HMAC runner credential). */
export function benchConfig(dataDir: string): EngineConfig {
  return {
    databaseUrl: null,
    dataDir,
    port: 8787,
    publicUrl: "http://127.0.0.1:8787",
    callbackSecrets: [SECRET],
    operatorToken: OPERATOR,
    viewerToken: null,
    controlPlaneUrl: null,
    dispatcher: "local",
    githubRepository: null,
    githubToken: null,
    githubApp: null,
    tickMs: 1000,
    sshKey: null,
  };
}

let runSeq = 1;

/** The runner's preflight request and callback body for one dispatch (JSON text). */
export function runnerBodies(p: DispatchPayload): { preflight: string; callback: string } {
  const run = { run_id: String(runSeq++), run_attempt: 1 };
  const preflight = JSON.stringify({
    step_run_id: p.step_run_id,
    release_id: p.release.id,
    generation: p.release.generation,
    manifest_digest: p.release.manifest_digest,
    dispatch: p.release.dispatch,
    ...run,
    sha: SHA,
    tool: p.tool,
    payload_digest: payloadDigestOf(p),
  });
  const callback = JSON.stringify({
    step_run_id: p.step_run_id,
    ...run,
    status: "succeeded",
    overall: "pass",
    checks: [{ name: "health", status: "passed", exit_code: 0, duration_ms: 12 }],
    log: "pulled\nstarted\nhealthy\nstopped old\n",
    log_truncated: false,
    timings: {},
  });
  return { preflight, callback };
}

/** Something that answers HTTP requests in process (a Hono app's `request`). */
export interface InProcessApp {
  request(path: string, init: RequestInit): Response | Promise<Response>;
}

/**
 * Plays the runners: for each dispatch `dispatcher` accepts, on the next turn of the event
 * loop, a signed preflight to `POST /v1/releases/step-runs/:id/preflight` and, once it is
 * answered 200, the signed callback (`…/callback`, succeeded/pass) — both through `app` in
 * process (no sockets). Anything but a 200 calls `fail` at once with the answer's reason.
 */
export function playRunners(
  dispatcher: MemoryDispatcher,
  app: InProcessApp,
  fail: (err: Error) => void,
): void {
  dispatcher.onAccepted((p) => {
    setImmediate(() => {
      runnerOf(app, p).catch((e: unknown) => fail(e as Error));
    });
  });
}

async function runnerOf(app: InProcessApp, p: DispatchPayload): Promise<void> {
  const { preflight, callback } = runnerBodies(p);
  const url = `/v1/releases/step-runs/${p.step_run_id}`;
  const send = async (what: "preflight" | "callback", body: string) => {
    const res = await app.request(`${url}/${what}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...signBody(SECRET, body) },
      body,
    });
    const text = await res.text();
    if (res.status !== 200) {
      throw new Error(`[bench] ${what} of ${p.step_run_id} answered ${res.status}: ${text}`);
    }
  };
  await send("preflight", preflight);
  await send("callback", callback);
}
