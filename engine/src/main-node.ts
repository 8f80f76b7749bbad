/**
 * Node server entry: configuration → engine (store, ports, app) → HTTP server + reconciler
 * interval. SIGTERM/SIGINT close the server, finish the reconciler pass, close the store.
 */
import { serve } from "@hono/node-server";
import { loadConfig } from "./config.ts";
import { createEngine, type EngineOverrides } from "./engine.ts";

/**
 * Starts the engine on `config.port` and `host` (default BATON_HOST, itself 127.0.0.1 by
 * default). Resolves once listening.
 */
export async function startNodeServer(overrides: EngineOverrides = {}, hostArg?: string) {
  const engine = await createEngine(loadConfig(), overrides);
  const host = hostArg ?? engine.config.host ?? "127.0.0.1";
  // Say "listening" only once the socket is bound: scripts and tests wait for that line.
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: engine.app.fetch, port: engine.config.port, hostname: host }, () =>
      resolve(s),
    );
    s.once("error", reject);
  });
  engine.startTicking();
  console.log(
    `[engine] listening on ${host}:${engine.config.port} (public URL ${engine.config.publicUrl})`,
  );
  const shutdown = (signal: string) => {
    console.log(`[engine] ${signal}: shutting down`);
    server.close(() => {
      engine.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  };
  process.once("SIGTERM", () => shutdown("SIGTERM"));
  process.once("SIGINT", () => shutdown("SIGINT"));
  return { engine, server };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  startNodeServer().catch((e: Error) => {
    console.error(e.message);
    process.exit(1);
  });
}
