/**
 * The engine as its own process for `npm run bench:fuzz` (test/chaos/fuzz-outside.ts): the real
 * Node server (`serveWithLimits`, the shipped connection limits) on 127.0.0.1 port 0, the real
 * store (SQLite in FUZZ_DATA_DIR, or Postgres at FUZZ_DATABASE_URL in schema FUZZ_PG_SCHEMA),
 * the in-memory dispatcher (runner steps wait for the callbacks the fuzzer sends) and an
 * in-memory control plane seeded with the fuzz recipe's lanes. The reconciler ticks every
 * 200 ms. Prints `ROUTES <json>` (every route of the app: method and path) and then
 * `PORT <n>` once listening; exits on SIGTERM.
 */
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import { openStore } from "../../engine/src/adapters/store-factory.ts";
import { createEngine } from "../../engine/src/engine.ts";
import { httpLimitsFromEnv, serveWithLimits } from "../../engine/src/node/http-server.ts";
import type { Store } from "../../engine/src/ports/store.ts";
import { config, recipe, seedControlPlane } from "../integration/service-harness.ts";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`[fuzz] ${name} is not set; the fuzz engine process needs it`);
  return v;
}

const dir = need("FUZZ_DATA_DIR");
let store: Store;
if (process.env.FUZZ_DATABASE_URL) {
  const { openPostgresStore } = await import(
    "../../engine/src/adapters/postgres/postgres-store.ts"
  );
  const s = openPostgresStore({
    connectionString: process.env.FUZZ_DATABASE_URL,
    schema: need("FUZZ_PG_SCHEMA"),
  });
  await s.migrate();
  store = s;
} else {
  store = await openStore({ dataDir: dir });
}
const cp = new MemoryControlPlane({ model: "summarizer-v7" });
seedControlPlane(cp, recipe(2));
// The fuzz cases stack releases of one recipe on the same lanes (lane claims have their own tests).
process.env.BATON_EXCLUSIVE_LANES = "off";
const engine = await createEngine(config(dir, { tickMs: 200 }), {
  store,
  dispatcher: new MemoryDispatcher(),
  controlPlane: cp,
  log: {
    info() {},
    warn() {},
    error: (m, e) => console.error(m, e instanceof Error ? e.message : (e ?? "")),
  },
});
console.log(
  `ROUTES ${JSON.stringify(engine.app.routes.filter((r) => r.method !== "ALL").map((r) => ({ method: r.method, path: r.path })))}`,
);
const server = serveWithLimits(
  { fetch: engine.app.fetch, port: 0, hostname: "127.0.0.1", limits: httpLimitsFromEnv() },
  (info) => console.log(`PORT ${info.port}`),
);
engine.startTicking();
process.once("SIGTERM", () => {
  server.close();
  engine.close().finally(async () => {
    await store.close();
    process.exit(0);
  });
});
