/**
 * A real engine on one store (the service harness), served over HTTP on 127.0.0.1 port 0 by
 * @hono/node-server, with a scratch directory: what the CLI tests point `baton` at.
 */
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { serve } from "@hono/node-server";
import { type Harness, makeHarness } from "../integration/service-harness.ts";

/** A served engine: its harness, its base URL, a scratch directory; `close` frees all three. */
export interface Served {
  h: Harness;
  url: string;
  dir: string;
  close(): Promise<void>;
}

/**
 * Starts an engine on `kind` and serves it; `prefix` names the scratch directory; `prepare`
 * runs on the harness before the engine serves (e.g. seeding the control plane's lanes).
 */
export async function served(
  kind: "sqlite" | "postgres",
  prefix: string,
  prepare: (h: Harness) => void = () => {},
): Promise<Served> {
  const h = await makeHarness({ kind });
  prepare(h);
  const server = serve({ fetch: h.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((ok) => server.once("listening", () => ok()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return {
    h,
    url,
    dir,
    async close() {
      await new Promise<void>((ok) => {
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => ok());
      });
      await h.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
