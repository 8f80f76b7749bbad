/**
 * The engine as its own process with the local runner as its dispatcher and the HTTP adapter
 * to a control plane running elsewhere: what the crash test SIGKILLs and restarts on the same
 * store. Configuration is the engine's environment (docs/engine.md; `DATABASE_URL` or
 * `BATON_DATA_DIR`, `PORT`, `BATON_CALLBACK_SECRETS`, `BATON_OPERATOR_TOKEN`,
 * `BATON_CONTROL_PLANE_URL` and `BATON_CONTROL_PLANE_TOKEN` required here, `BATON_TICK_MS`, `BATON_FAULT`) plus the local runner's:
 *
 *   BATON_LOCAL_SSH_KEY_FILE   private key the runner's action uses (input `ssh-key`)
 *   BATON_LOCAL_WORK_DIR       per-attempt folders of the local runner
 *   BATON_LOCAL_RUNNER_ENV     JSON object of extra environment for the action and tools
 *   BATON_LEASE_MS             outbox claim lease (ms, default 60000): how long a crashed
 *                              process's claimed effect waits before a restart takes it over
 *
 * Prints `[engine] listening …` once it serves. SIGTERM stops it cleanly.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { HttpControlPlane } from "../adapters/http-control-plane/index.ts";
import { LocalRunner } from "../adapters/local-runner/index.ts";
import { startNodeServer } from "../main-node.ts";
import { REPO_ROOT } from "./fleet.ts";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`[engine] ${name} is not set; the separate-process engine needs it`);
  return v;
}

/** Starts the engine process. @throws Error naming a missing or bad variable. */
export async function startEngineProcess(): Promise<void> {
  const port = need("PORT");
  const engineUrl = process.env.BATON_PUBLIC_URL ?? `http://127.0.0.1:${port}`;
  const secret = need("BATON_CALLBACK_SECRETS").split(",")[0]!.trim();
  let extraEnv: Record<string, string> = {};
  if (process.env.BATON_LOCAL_RUNNER_ENV) {
    try {
      extraEnv = JSON.parse(process.env.BATON_LOCAL_RUNNER_ENV) as Record<string, string>;
    } catch {
      throw new Error("[engine] BATON_LOCAL_RUNNER_ENV must be a JSON object of strings");
    }
  }
  const runner = new LocalRunner({
    repoRoot: REPO_ROOT,
    workDir: need("BATON_LOCAL_WORK_DIR"),
    inputs: {
      "engine-url": engineUrl,
      "callback-secret": secret,
      "ssh-key": readFileSync(need("BATON_LOCAL_SSH_KEY_FILE"), "utf8"),
    },
    env: extraEnv,
    runTimeoutMs: 120_000,
  });
  const controlPlane = new HttpControlPlane({
    baseUrl: need("BATON_CONTROL_PLANE_URL"),
    token: need("BATON_CONTROL_PLANE_TOKEN"),
    timeoutMs: 5_000,
  });
  const leaseMs = Number(process.env.BATON_LEASE_MS ?? 60_000);
  await startNodeServer(
    {
      dispatcher: runner,
      controlPlane,
      reconciler: { leaseMs: Number.isFinite(leaseMs) && leaseMs > 0 ? leaseMs : 60_000 },
    },
    "127.0.0.1",
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  startEngineProcess().catch((e: Error) => {
    console.error(e.message);
    process.exit(1);
  });
}
