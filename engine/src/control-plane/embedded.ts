/**
 * The embedded default: the reference control plane in the engine's process, on its own SQLite
 * file in the data directory, reached through the real HTTP adapter (so timeouts and replays
 * behave as they would against a remote control plane, and its state survives an engine crash).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { HttpControlPlane } from "../adapters/http-control-plane/index.ts";
import { type ControlPlaneHandle, startControlPlane } from "./server.ts";

export interface EmbeddedControlPlane {
  /** The port implementation to give the engine. */
  controlPlane: HttpControlPlane;
  /** The running server (url, core, faults, close). */
  handle: ControlPlaneHandle;
}

/**
 * Starts the reference server on `127.0.0.1:port` (0 = any) with `<dataDir>/control-plane.sqlite`
 * (or `:memory:` when `dataDir` is `:memory:`), and an HTTP adapter pointed at it.
 * `timeoutMs`: the adapter's request timeout (default 5000). Throws if the port or file is unusable.
 */
export async function startEmbeddedControlPlane(o: {
  dataDir: string;
  port?: number;
  timeoutMs?: number;
  model?: string;
  faults?: boolean;
}): Promise<EmbeddedControlPlane> {
  let dataFile = ":memory:";
  if (o.dataDir !== ":memory:") {
    mkdirSync(o.dataDir, { recursive: true });
    dataFile = join(o.dataDir, "control-plane.sqlite");
  }
  const handle = await startControlPlane({
    port: o.port ?? 0,
    dataFile,
    faults: o.faults ?? false,
  });
  const controlPlane = new HttpControlPlane({
    baseUrl: handle.url,
    timeoutMs: o.timeoutMs ?? 5000,
    model: o.model,
  });
  return { controlPlane, handle };
}
