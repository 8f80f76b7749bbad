/**
 * The embedded default: the reference control plane in the engine's process, on its own SQLite
 * file in the data directory. The engine reaches it through its real HTTP adapter (built by the
 * caller from `handle.url`), so timeouts and replays behave as they would against a remote
 * control plane, and its state survives an engine crash. The reference server never imports an
 * engine adapter: both sides share only the wire contract (protocol/control-plane.ts).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type ControlPlaneHandle, startControlPlane } from "./server.ts";

export interface EmbeddedControlPlane {
  /** The running server (url, core, faults, close). */
  handle: ControlPlaneHandle;
}

/**
 * Starts the reference server on `127.0.0.1:port` (0 = any) with `<dataDir>/control-plane.sqlite`
 * (or `:memory:` when `dataDir` is `:memory:`). Throws if the port or file is unusable.
 */
export async function startEmbeddedControlPlane(o: {
  dataDir: string;
  port?: number;
  faults?: boolean;
  /** The write token (default a random one; read it back as `handle.writeToken`). */
  writeToken?: string;
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
    ...(o.writeToken ? { writeToken: o.writeToken } : {}),
  });
  return { handle };
}
