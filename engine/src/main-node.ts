/**
 * Node server entry: configuration → engine (store, ports, app) → HTTP server + reconciler
 * interval. SIGTERM/SIGINT close the server, finish the reconciler pass, close the store.
 */
import type { Server } from "node:http";
import { loadConfig, publicUrlWarning } from "./config.ts";
import { createEngine, type EngineOverrides } from "./engine.ts";
import { httpLimitsFromEnv, serveWithLimits } from "./node/http-server.ts";

/**
 * Starts the engine on `config.port` and `host` (default BATON_HOST, itself 127.0.0.1 by
 * default). Resolves once listening.
 * @throws Error when the store cannot be opened or migrated (e.g. Postgres unreachable) or the
 * address cannot be bound (`[engine] cannot listen on 127.0.0.1:8787: the address is already in use; …`);
 * what was opened is closed first, so the caller can exit non-zero.
 */
export async function startNodeServer(overrides: EngineOverrides = {}, hostArg?: string) {
  const config = loadConfig();
  // Connection limits (docs/deploying.md "Operator limits"); a bad value stops here, before
  // the store is opened.
  const limits = httpLimitsFromEnv();
  const engine = await createEngine(config, overrides);
  const host = hostArg ?? engine.config.host ?? "127.0.0.1";
  // Say "listening" only once the socket is bound: scripts and tests wait for that line.
  const server = await new Promise<Server>((resolve, reject) => {
    const s = serveWithLimits(
      { fetch: engine.app.fetch, port: engine.config.port, hostname: host, limits },
      () => resolve(s),
    );
    s.once("error", (e: NodeJS.ErrnoException) => {
      const where = `${host}:${engine.config.port}`;
      const why =
        e.code === "EADDRINUSE"
          ? `${where}: the address is already in use; stop the process that holds it (e.g. \`ss -ltnp | grep :${engine.config.port}\`) or set PORT to a free port`
          : e.code === "EACCES"
            ? `${where} needs privileges; use a port above 1023 or a reverse proxy`
            : `${where}: ${e.message}`;
      // Close what the engine opened (store, embedded control plane) so the process can exit.
      engine.close().then(
        () => reject(new Error(`[engine] cannot listen on ${why}`)),
        () => reject(new Error(`[engine] cannot listen on ${why}`)),
      );
    });
  });
  engine.startTicking();
  const fds = limits.openFileLimit === null ? "unknown" : String(limits.openFileLimit);
  console.log(
    `[engine] connection limits: headers within ${limits.headersTimeoutMs} ms, whole request within ${limits.requestTimeoutMs} ms, idle keep-alive ${limits.keepAliveTimeoutMs} ms, at most ${limits.maxConnections} connections (open-file limit ${fds})`,
  );
  console.log(
    `[engine] listening on ${host}:${engine.config.port} (public URL ${engine.config.publicUrl})`,
  );
  const urlWarning = publicUrlWarning(host, engine.config.publicUrl);
  if (urlWarning) console.warn(urlWarning);
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
