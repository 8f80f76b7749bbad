/**
 * The engine for `bench/hostile.bench.ts`, as its own process so that its memory is measured
 * alone: `createEngine` on a SQLite file in a temp dir, served as `baton serve` serves it
 * (`serveWithLimits` with the limits from the environment: timeouts, connection cap, the
 * lingering close after a 413) on 127.0.0.1 port 0. Prints `PORT <n>` once listening; exits on
 * SIGTERM.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createEngine } from "../../engine/src/engine.ts";
import { httpLimitsFromEnv, serveWithLimits } from "../../engine/src/node/http-server.ts";

const dir = mkdtempSync(path.join(tmpdir(), "baton-hostile-"));
const engine = await createEngine({
  databaseUrl: null,
  dataDir: dir,
  port: 1,
  host: "127.0.0.1",
  publicUrl: "http://127.0.0.1:1",
  callbackSecrets: ["callback-secret-0123456789abcdef"],
  operatorToken: "operator-token-0123456789abcdef",
  viewerToken: null,
  controlPlaneUrl: null,
  dispatcher: "local",
  githubRepository: null,
  githubToken: null,
  githubApp: null,
  tickMs: 60_000,
  sshKey: null,
});
const server = serveWithLimits(
  { fetch: engine.app.fetch, port: 0, hostname: "127.0.0.1", limits: httpLimitsFromEnv() },
  (info) => {
    console.log(`PORT ${info.port}`);
  },
);
process.once("SIGTERM", () => {
  server.close();
  engine.close().finally(() => {
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  });
});
