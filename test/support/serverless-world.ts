/**
 * The world a serverless engine runs against in tests and the benchmark, all real and on
 * 127.0.0.1: a fresh Postgres database, the GitHub stand-in (records each dispatch), the
 * reference control plane over HTTP with the recipe's lanes seeded. `driveRelease` plays the
 * runners through the engine's own HTTP API (signed preflight and callback for each dispatch)
 * and lets the platform's schedule (`tick`) do the rest: no long-lived engine process.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { startControlPlane } from "../../engine/src/control-plane/server.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { ManifestStep } from "../../engine/src/domain/types.ts";
import { signBody } from "../../engine/src/protocol/credential.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { freshDatabase } from "./e2e-harness.ts";
import { startGitHubStandin } from "./github-standin.ts";
import { preflightRequestFor } from "./preflight-request.ts";

export const MODEL = "summarizer-v7";
const SHA = "34f9bae4c170320dced1664d4321610c952e4b04";

/** A two-lane, two-wave recipe (traffic 25 % then 100 %). */
export function serverlessRecipe(): RecipeInput {
  const lane = (i: number) => ({
    id: `sl-${i}`,
    host: "127.0.0.1",
    user: "deploy",
    host_key: "SHA256:q4YbKWRnplKrKDOS5J7OTZmJqlBWdVB4z5qRddVIgJ4",
    queue: `q${i}`,
    capabilities: ["summarize"],
    health_url: "http://127.0.0.1:9/healthz",
  });
  return {
    name: "serverless",
    model: MODEL,
    image: `registry.example/acme/model@sha256:${"1".repeat(64)}`,
    previous_image: `registry.example/acme/model@sha256:${"0".repeat(64)}`,
    tool_revision: SHA,
    lanes: [lane(0), lane(1)],
    rollout: {
      waves: [
        { lanes: ["sl-0"], traffic: 25 },
        { lanes: ["sl-1"], traffic: 100 },
      ],
    },
    // A failed step compensates at once (no wait for a re-run from the Actions UI).
    policy: { rerun_window_minutes: 0 },
  } as unknown as RecipeInput;
}

/** Baseline weights seeded into the control plane (lane id → %). */
export const BASELINE = { "sl-0": 50, "sl-1": 50 };

export interface ServerlessWorld {
  /** Variables the serverless entry reads (Workers bindings / Lambda environment). */
  env: Record<string, string>;
  operatorToken: string;
  secret: string;
  cp: Awaited<ReturnType<typeof startControlPlane>>;
  github: Awaited<ReturnType<typeof startGitHubStandin>>;
  close(): Promise<void>;
}

/** Starts the world. Needs BATON_TEST_DATABASE_URL (scripts/test.sh starts Postgres). */
export async function startServerlessWorld(publicUrl: string): Promise<ServerlessWorld> {
  const db = await freshDatabase();
  const token = `ghp_${randomBytes(12).toString("hex")}`;
  const github = await startGitHubStandin({ repository: "acme/models", tokens: [token] });
  const cp = await startControlPlane({ port: 0 });
  cp.core.seed(
    Object.entries(BASELINE).map(([id, weight]) => ({
      id,
      model: MODEL,
      weight,
      capabilities: ["summarize"],
      advertised: true,
    })),
  );
  const secret = randomBytes(16).toString("hex");
  const operatorToken = randomBytes(16).toString("hex");
  return {
    env: {
      DATABASE_URL: db.url,
      BATON_PUBLIC_URL: publicUrl,
      BATON_CALLBACK_SECRETS: secret,
      BATON_OPERATOR_TOKEN: operatorToken,
      BATON_CONTROL_PLANE_URL: cp.url,
      BATON_CONTROL_PLANE_TOKEN: cp.writeToken,
      GITHUB_REPOSITORY: "acme/models",
      GITHUB_TOKEN: token,
      GITHUB_API_URL: github.baseUrl,
    },
    operatorToken,
    secret,
    cp,
    github,
    async close() {
      await github.close();
      await cp.close();
      await db.drop().catch(() => {});
    },
  };
}

/** One HTTP exchange with the engine under test (through its platform's own invocation). */
export type Send = (
  method: "GET" | "POST",
  path: string,
  body?: string,
  headers?: Record<string, string>,
) => Promise<{ status: number; body: string }>;

export interface DriveOptions {
  /** The first runner step of this wave (0-based) reports `overall: fail` going forward. */
  failWave?: number;
  /** Bound on rounds (each: answer new dispatches, one scheduled tick, one read). */
  rounds?: number;
}

export interface Driven {
  id: string;
  state: string;
  /** Step-run ids answered, in order. */
  answered: string[];
  ticks: number;
}

/**
 * Creates a release over HTTP, then, round by round: answers every new dispatch the GitHub
 * stand-in accepted (preflight, then callback: pass, or fail for `failStep`'s forward step
 * run), runs one scheduled tick, reads the release; until it is terminal or `rounds` pass.
 */
export async function driveRelease(
  w: ServerlessWorld,
  send: Send,
  tick: () => Promise<void>,
  o: DriveOptions = {},
): Promise<Driven> {
  const auth = { authorization: `Bearer ${w.operatorToken}`, "content-type": "application/json" };
  const created = await send("POST", "/v1/releases", JSON.stringify(serverlessRecipe()), auth);
  if (created.status !== 201) throw new Error(`create: ${created.status} ${created.body}`);
  const id = (JSON.parse(created.body) as { id: string }).id;
  const first = await send("GET", `/v1/releases/${id}`, undefined, auth);
  const steps = (JSON.parse(first.body) as { manifest: { steps: ManifestStep[] } }).manifest.steps;
  const failIndex =
    o.failWave === undefined
      ? -1
      : (steps.find((s) => s.wave === o.failWave && s.kind === "runner")?.index ?? -1);
  const answered: string[] = [];
  const done = new Set<string>();
  let state = "";
  let ticks = 0;
  const terminal = new Set(["succeeded", "rolled_back", "aborted", "abandoned", "needs_operator"]);
  for (let round = 0; round < (o.rounds ?? 120) && !terminal.has(state); round++) {
    for (const d of w.github.accepted) {
      const p = d.client_payload as unknown as DispatchPayload;
      if (p.release.id !== id || done.has(p.step_run_id)) continue;
      done.add(p.step_run_id);
      const run = { run_id: String(90_000 + done.size), run_attempt: 1 };
      const pre = JSON.stringify(preflightRequestFor(p, run, SHA));
      const pr = await send("POST", `/v1/releases/step-runs/${p.step_run_id}/preflight`, pre, {
        "content-type": "application/json",
        ...signBody(w.secret, pre),
      });
      if (pr.status !== 200) throw new Error(`preflight ${p.step_run_id}: ${pr.status} ${pr.body}`);
      const [, , stepIndex, dir] = p.step_run_id.split("_");
      const fail = dir === "f" && Number(stepIndex) === failIndex;
      const cb = JSON.stringify({
        step_run_id: p.step_run_id,
        ...run,
        status: fail ? "failed" : "succeeded",
        overall: fail ? "fail" : "pass",
        checks: [{ name: "health", status: fail ? "failed" : "passed", exit_code: fail ? 1 : 0 }],
        log: `ran ${p.step_run_id}\n`,
        log_truncated: false,
        timings: {},
      });
      const cr = await send("POST", `/v1/releases/step-runs/${p.step_run_id}/callback`, cb, {
        "content-type": "application/json",
        ...signBody(w.secret, cb),
      });
      if (cr.status !== 200) throw new Error(`callback ${p.step_run_id}: ${cr.status} ${cr.body}`);
      answered.push(p.step_run_id);
    }
    await tick();
    ticks++;
    const rec = await send("GET", `/v1/releases/${id}`, undefined, auth);
    state = (JSON.parse(rec.body) as { state: string }).state;
  }
  return { id, state, answered, ticks };
}

/**
 * Builds a Workers bundle (scripts/build-worker.mjs: the engine Worker, or with `dashboard` the
 * dashboard Worker) into `dir`/`which`.mjs; returns its text.
 * @throws Error with the build's stderr when it fails.
 */
export function buildWorkerBundle(dir: string, which: "engine" | "dashboard" = "engine"): string {
  const out = join(dir, `${which}.mjs`);
  const flags = which === "dashboard" ? ["--dashboard"] : [];
  const built = spawnSync(process.execPath, ["scripts/build-worker.mjs", out, ...flags], {
    encoding: "utf8",
  });
  if (built.status !== 0) {
    throw new Error(`[workerd] scripts/build-worker.mjs exited ${built.status}: ${built.stderr}`);
  }
  return readFileSync(out, "utf8");
}

/** A workerd runtime (miniflare 3) of the bundle's text with `bindings`, as the tests run it. */
export function workerdRuntime(bundle: string, bindings: Record<string, string>): Miniflare {
  return new Miniflare({
    modules: [{ type: "ESModule", path: "worker.mjs", contents: bundle }],
    compatibilityDate: "2024-09-23",
    compatibilityFlags: ["nodejs_compat"],
    bindings,
  });
}

/**
 * `mf`'s worker (fetched once) as a function that sends it one Cron Trigger event (`scheduled`)
 * and resolves with the event's outcome.
 */
export async function cronTrigger(mf: Miniflare): Promise<() => Promise<{ outcome: string }>> {
  // miniflare's Fetcher types omit `scheduled`; it is there at run time (a Cron Trigger event).
  const worker = (await mf.getWorker()) as unknown as {
    scheduled(o: { cron: string; scheduledTime: Date }): Promise<{ outcome: string }>;
  };
  return () => worker.scheduled({ cron: "* * * * *", scheduledTime: new Date() });
}

/** The Workers bundle running in workerd (miniflare 3), with `send` and a Cron Trigger `tick`. */
export interface Workerd {
  send: Send;
  tick(): Promise<void>;
  /** ms from creating the runtime (workerd process start) to the first 200 on `/healthz`. */
  coldStartMs: number;
  dispose(): Promise<void>;
}

/** Starts workerd with the bundle's text and the given bindings; waits for `/healthz` 200. */
export async function startWorkerd(
  bundle: string,
  env: Record<string, string>,
  publicUrl: string,
): Promise<Workerd> {
  const t0 = performance.now();
  const mf = workerdRuntime(bundle, env);
  const health = await mf.dispatchFetch(`${publicUrl}/healthz`);
  const coldStartMs = performance.now() - t0;
  if (health.status !== 200) {
    const text = await health.text();
    await mf.dispose();
    throw new Error(`[workerd] /healthz answered ${health.status}: ${text}`);
  }
  await health.text();
  const scheduled = await cronTrigger(mf);
  return {
    coldStartMs,
    send: async (method, path, body, headers) => {
      const once = async () => {
        const res = await mf.dispatchFetch(`${publicUrl}${path}`, {
          method,
          ...(body === undefined ? {} : { body }),
          headers: headers ?? {},
        });
        return { status: res.status, body: await res.text() };
      };
      try {
        return await once();
      } catch (err) {
        // miniflare's client may reuse a keep-alive socket workerd has just closed ("other side
        // closed"): the request never reached the worker. Sent again only where a repeat is
        // harmless: reads, and the runner's preflight/callback (idempotent per run and attempt).
        const code = (err as { cause?: { code?: string } }).cause?.code;
        // EPIPE: workerd had closed that socket before the request was written whole, so the
        // worker never got it: sent again whatever the method.
        if (code === "EPIPE") return once();
        const socket = code === "UND_ERR_SOCKET";
        if (!socket || (method !== "GET" && !path.includes("/step-runs/"))) throw err;
        return once();
      }
    },
    tick: async () => {
      const r = await scheduled();
      if (r.outcome !== "ok") throw new Error(`[workerd] scheduled event ended ${r.outcome}`);
    },
    dispose: () => mf.dispose(),
  };
}
