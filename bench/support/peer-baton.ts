/**
 * Baton's side of `bench:peer` (protocol: peer-side.ts). The engine as the Node entry builds
 * it, on Postgres: `createEngine` with its shipped defaults (reconciler batch 64, one pass,
 * run right after commits; the 1 s interval ticker; a `pg` pool of 10), the dashboard
 * mounted, HMAC runner credentials. Only the ports are stand-ins, the same on both sides: an
 * in-memory GitHub (`MemoryDispatcher`) whose dispatches the simulated runners answer, and an
 * in-memory control plane per release. Releases run with the lane-ownership rule off (100
 * releases of one recipe share lane names).
 *
 * A release's end is seen without asking the database (which would add statements): the
 * store is wrapped, and a commit that writes a terminal state reports it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import { openPostgresStore } from "../../engine/src/adapters/postgres/postgres-store.ts";
import { checkAndCompile } from "../../engine/src/domain/compile.ts";
import { TERMINAL_RELEASE_STATES } from "../../engine/src/domain/states.ts";
import { createEngine } from "../../engine/src/engine.ts";
import type { CommitInput, Store } from "../../engine/src/ports/store.ts";
import { serveSide } from "./peer-side.ts";
import { benchConfig, benchRecipe, PerReleaseControlPlane } from "./release-world.ts";

process.env.BATON_EXCLUSIVE_LANES = "off";

await serveSide(async (outcomes) => {
  const url = process.env.PEER_DATABASE_URL;
  if (!url) throw new Error("[bench] PEER_DATABASE_URL is not set");
  const store = openPostgresStore({ connectionString: url });
  await store.migrate();
  const terminal = new Set<string>(TERMINAL_RELEASE_STATES);
  const commit = async (input: CommitInput) => {
    const res = await store.commit(input);
    const r = input.release;
    if (res.ok && terminal.has(r.state)) {
      if (r.state === "succeeded") outcomes.succeeded(r.id);
      else outcomes.failed(new Error(`[bench] release ${r.id} ended ${r.state}: ${r.reason}`));
    }
    return res;
  };
  const watched = new Proxy(store, {
    get(target, p) {
      if (p === "commit") return commit;
      const v = Reflect.get(target, p, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as Store;
  const dir = mkdtempSync(path.join(tmpdir(), "baton-peer-"));
  const dispatcher = new MemoryDispatcher();
  const engine = await createEngine(benchConfig(dir), {
    store: watched,
    dispatcher,
    controlPlane: new PerReleaseControlPlane(),
    log: { info() {}, warn() {}, error: (m, e) => console.error(m, e) },
  });
  engine.startTicking();
  const compiled = checkAndCompile(benchRecipe());
  if (!compiled.ok) throw new Error("[bench] the benchmark recipe fails its contract check");
  return {
    steps: compiled.manifest.steps.length,
    app: engine.app,
    dispatcher,
    async close() {
      await engine.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
