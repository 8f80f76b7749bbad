/**
 * The engine as its own process for the chaos harness, dispatching through GitHub's REST API
 * (the GitHub stand-in, whose accepted dispatches the harness hands to a local runner that
 * lives OUTSIDE this process, as GitHub's runners do) and writing to the control plane at
 * BATON_CONTROL_PLANE_URL through the engine's own wiring (HTTP adapter per release model).
 * A SIGKILL of this process therefore loses nothing a real crash would not: runs already
 * dispatched keep running and post their callbacks to whichever engine answers next.
 *
 * Environment: the engine's own (docs/engine.md: `DATABASE_URL` or `BATON_DATA_DIR`, `PORT`,
 * `BATON_PUBLIC_URL`, `BATON_CALLBACK_SECRETS`, `BATON_OPERATOR_TOKEN`,
 * `BATON_CONTROL_PLANE_URL`, `GITHUB_REPOSITORY`, `GITHUB_TOKEN`, `BATON_TICK_MS`,
 * `BATON_FAULT`) plus
 *   CHAOS_GITHUB_API_URL   REST API root of the stand-in (required)
 *   CHAOS_LEASE_MS         outbox claim lease, ms (default 1500)
 *   CHAOS_OWNER            claim owner name (diagnostics)
 *
 * `GET /chaos/stats` answers what this process saw refused: store commits that lost the
 * conditional update (`resource_version`) or their outbox claim.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { GitHubDispatcher } from "../../engine/src/adapters/github/index.ts";
import { openStore } from "../../engine/src/adapters/store-factory.ts";
import { loadConfig } from "../../engine/src/config.ts";
import { startNodeServer } from "../../engine/src/main-node.ts";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`[chaos] ${name} is not set; the chaos engine process needs it`);
  return v;
}

function positive(name: string, fallback: number): number {
  const n = Number(process.env[name]);
  return Number.isFinite(n) && n > 0 ? n : fallback;
}

/** Starts the engine; resolves once it listens. @throws Error naming a missing variable. */
export async function startChaosEngine(): Promise<void> {
  const dispatcher = new GitHubDispatcher({
    repository: need("GITHUB_REPOSITORY"),
    auth: { kind: "token", token: need("GITHUB_TOKEN") },
    baseUrl: need("CHAOS_GITHUB_API_URL"),
    timeoutMs: 3_000,
    ...(loadConfig().githubPacing ? { pacing: loadConfig().githubPacing } : {}),
  });
  const stats = { resource_version: 0, outbox_claim: 0 };
  const config = loadConfig();
  const store = await openStore(
    config.databaseUrl
      ? { databaseUrl: config.databaseUrl, dataDir: config.dataDir }
      : { dataDir: config.dataDir },
  );
  const commit = store.commit.bind(store);
  store.commit = async (input) => {
    const r = await commit(input);
    if (!r.ok) stats[r.conflict] += 1;
    return r;
  };
  await startNodeServer(
    {
      store,
      dispatcher,
      extendApp: (app) => {
        app.get("/chaos/stats", (c) => c.json(stats));
      },
      reconciler: {
        leaseMs: positive("CHAOS_LEASE_MS", 1_500),
        ...(process.env.CHAOS_OWNER ? { owner: process.env.CHAOS_OWNER } : {}),
      },
      log: {
        info: () => {},
        warn: (m) => console.warn(m),
        error: (m, e) => console.error(m, e instanceof Error ? e.message : (e ?? "")),
      },
    },
    "127.0.0.1",
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  startChaosEngine().catch((e: Error) => {
    console.error(e.message);
    process.exit(1);
  });
}
