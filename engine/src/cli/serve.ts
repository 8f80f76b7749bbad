/**
 * The commands that start a program rather than talk to an engine: `serve` (the Node entry)
 * and `demo`. They sit with the entries (docs/architecture.md "Layers"): the rest of the CLI
 * is a client of the HTTP API and imports nothing above it.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { BatonError } from "../domain/errors.ts";
import { CliError, EXIT, type ExitCode, usage } from "./errors.ts";

/** `serve`: the Node server (engine/src/main-node.ts), configured from the environment. */
export async function serve(o: { port?: string; host?: string }): Promise<ExitCode> {
  if (o.port !== undefined) {
    const n = Number(o.port);
    if (!Number.isInteger(n) || n < 1 || n > 65535)
      throw usage(`[cli] --port must be 1..65535; got ${JSON.stringify(o.port)}`);
    process.env.PORT = String(n);
  }
  const { startNodeServer } = await import("../main-node.ts");
  let server: Awaited<ReturnType<typeof startNodeServer>>["server"];
  try {
    ({ server } = await startNodeServer({}, o.host));
  } catch (err) {
    if (err instanceof BatonError) throw new CliError(err.message, EXIT.usage, []);
    throw err;
  }
  // Serving is the command's work: it ends when the server closes (SIGTERM or SIGINT; the
  // shutdown then closes the engine and exits), not when it starts listening.
  await new Promise<void>((resolve) => server.once("close", () => resolve()));
  return EXIT.ok;
}

const DEMO = new URL("../demo/main.ts", import.meta.url);

/**
 * `demo`: delegates to engine/src/demo/main.ts (loaded lazily). The module may export
 * `main(args)` (or a default function) resolving to an exit code; otherwise it runs on import.
 */
export async function demo(args: string[]): Promise<ExitCode> {
  if (!existsSync(fileURLToPath(DEMO))) {
    throw new CliError(
      "[cli] the demo is not part of this build (engine/src/demo/main.ts is missing); run `baton serve` and `baton start <recipe>` instead",
    );
  }
  const mod = (await import(DEMO.href)) as { main?: (a: string[]) => unknown; default?: unknown };
  const fn =
    mod.main ??
    (typeof mod.default === "function" ? (mod.default as (a: string[]) => unknown) : undefined);
  const code = fn ? await fn(args) : undefined;
  return code === EXIT.failed || code === EXIT.usage ? code : EXIT.ok;
}
