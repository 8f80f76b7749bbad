/**
 * Starts the reference control plane on loopback (or `host`), embeddable in the engine's process
 * or run standalone by `main.ts`. Its state lives in its own SQLite file so that it outlives a
 * crash of the engine.
 */
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { createControlPlaneApp } from "./app.ts";
import { ControlPlaneCore } from "./core.ts";
import { FaultPlan } from "./faults.ts";
import { Hangs } from "./hangs.ts";
import { SqliteCpStore } from "./sqlite-store.ts";
import { TrafficGenerator, type TrafficOptions } from "./traffic.ts";

export interface ControlPlaneOptions {
  /** TCP port; 0 (default) picks a free one. */
  port?: number;
  /** Interface to bind. Default `127.0.0.1`. */
  host?: string;
  /** SQLite file (created if missing), or `:memory:` (default) for tests. */
  dataFile?: string;
  /** Enables fault injection (`/v1/admin/faults`, `handle.faults`). Default false. */
  faults?: boolean;
  /** Clock, epoch ms. Default `Date.now`. */
  now?: () => number;
  /** Runs the router as a traffic generator for this model (exposed at `GET /metrics`). */
  traffic?: TrafficOptions;
  /**
   * The bearer token writes need (≥ 16 characters). Absent: a random one, readable as
   * `handle.writeToken` (tests and the embedded control plane hand it to their clients).
   */
  writeToken?: string;
}

export interface ControlPlaneHandle {
  /** Base URL, e.g. `http://127.0.0.1:40123` (no trailing slash). */
  url: string;
  port: number;
  /** The rules over the store, for in-process reads in tests. */
  core: ControlPlaneCore;
  /** The fault plan, or null when fault injection is disabled. */
  faults: FaultPlan | null;
  /** The traffic generator, or null when not asked for. */
  traffic: TrafficGenerator | null;
  /** The bearer token writes need (`Authorization: Bearer <writeToken>`). */
  writeToken: string;
  /** Releases injected hangs, stops listening, drops connections, closes the SQLite file. */
  close(): Promise<void>;
}

/** Starts a server; resolves once it listens. Throws if the port is taken or the file unusable. */
export async function startControlPlane(
  options: ControlPlaneOptions = {},
): Promise<ControlPlaneHandle> {
  const host = options.host ?? "127.0.0.1";
  const store = new SqliteCpStore(options.dataFile ?? ":memory:");
  const core = new ControlPlaneCore(store, options.now);
  const faults = options.faults ? new FaultPlan() : null;
  const hangs = new Hangs();
  const traffic = options.traffic ? new TrafficGenerator(core, options.traffic) : null;
  const writeToken = options.writeToken ?? randomBytes(24).toString("hex");
  const app = createControlPlaneApp({ core, faults, hangs, traffic, writeToken });

  const { server, info } = await new Promise<{
    server: ReturnType<typeof serve>;
    info: AddressInfo;
  }>((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port: options.port ?? 0, hostname: host }, (info) =>
      resolve({ server, info }),
    );
    server.once("error", (err) => {
      store.close();
      reject(
        new Error(`[control-plane] cannot listen on ${host}:${options.port ?? 0}: ${err.message}`),
      );
    });
  });

  const urlHost = host.includes(":") ? `[${host}]` : host;
  let closed = false;
  return {
    url: `http://${urlHost}:${info.port}`,
    port: info.port,
    core,
    faults,
    traffic,
    writeToken,
    async close() {
      if (closed) return;
      closed = true;
      traffic?.stop();
      hangs.releaseAll();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        if ("closeAllConnections" in server) server.closeAllConnections();
      });
      store.close();
    },
  };
}
