/**
 * Standalone reference control plane.
 * Usage: `tsx engine/src/control-plane/main.ts [--port 8788] [--host 127.0.0.1] [--data ./.baton/control-plane.sqlite]`
 * Environment (flags win): BATON_CP_PORT, BATON_CP_HOST, BATON_CP_DATA, BATON_CP_FAULTS=1 (tests only).
 * Required: BATON_CP_TOKEN, the bearer token every write needs (≥ 16 characters; the engine sends
 * it as BATON_CONTROL_PLANE_TOKEN).
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { Command } from "commander";
import { startControlPlane } from "./server.ts";

const program = new Command()
  .name("baton-control-plane")
  .description("Baton's reference control plane (traffic weights, lane markers, capabilities)")
  .option("--port <n>", "TCP port (0 = any free port)", process.env.BATON_CP_PORT ?? "8788")
  .option("--host <addr>", "interface to bind", process.env.BATON_CP_HOST ?? "127.0.0.1")
  .option(
    "--data <file>",
    "SQLite file, or :memory:",
    process.env.BATON_CP_DATA ?? "./.baton/control-plane.sqlite",
  )
  .parse();

const opts = program.opts<{ port: string; host: string; data: string }>();
const port = Number(opts.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(
    `[control-plane] --port must be an integer 0–65535, got ${JSON.stringify(opts.port)}`,
  );
  process.exit(2);
}
const writeToken = process.env.BATON_CP_TOKEN?.trim() ?? "";
if (writeToken.length < 16) {
  console.error(
    `[control-plane] BATON_CP_TOKEN ${writeToken ? "must be at least 16 characters" : "is not set"}; fix: set it to a random secret, e.g. BATON_CP_TOKEN=$(openssl rand -hex 32), and give the engine the same value as BATON_CONTROL_PLANE_TOKEN`,
  );
  process.exit(2);
}
if (opts.data !== ":memory:") mkdirSync(dirname(opts.data), { recursive: true });

try {
  const cp = await startControlPlane({
    port,
    host: opts.host,
    dataFile: opts.data,
    faults: process.env.BATON_CP_FAULTS === "1",
    writeToken,
  });
  console.log(`[control-plane] listening on ${cp.url} (data ${opts.data})`);
  const stop = async () => {
    await cp.close();
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
} catch (err) {
  console.error((err as Error).message);
  process.exit(1);
}
