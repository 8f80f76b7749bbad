/**
 * The embedded fleet of the demo and the e2e tests: the reference control plane (its own
 * SQLite file, seeded with the lanes' baseline weights) and one embedded SSH target standing in
 * for every lane's machine (deploy.sh installed, the container stand-in on PATH, each lane's
 * previous image running and answering its own health URL on 127.0.0.1).
 *
 * It also owns the health-check knob: `failHealthOf(lane)` makes that lane's health URL answer
 * 503 (the stand-in's `fail-health` file, read per request) until `clearFailHealth()`.
 */

import { type ChildProcess, fork } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer, type Server } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { shQuote } from "../../../scripts/lib/shell-quote.ts";
import { connect } from "../../../scripts/lib/ssh.ts";
import { HttpControlPlane } from "../adapters/http-control-plane/index.ts";
import { startEmbeddedControlPlane } from "../control-plane/embedded.ts";
import type { ControlPlaneHandle } from "../control-plane/server.ts";
import type { Manifest } from "../domain/types.ts";
import {
  type EmbeddedTarget,
  type SshKeyPair,
  startEmbeddedTarget,
} from "../embedded-target/index.ts";

/** Repository root (this file is engine/src/demo/fleet.ts). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

export interface FleetOptions {
  /** Folder for the control plane's SQLite file and the target's sandbox. */
  dir: string;
  /** Lane ids to give a health port each. */
  laneIds: readonly string[];
  /** Model of the recipe (writes name it in their context; kept for callers' records). */
  model: string;
  /** Seconds deploy.sh waits for a health URL before failing the phase (default 2). */
  healthTimeoutS?: number;
  /**
   * Model-load time (ms) of every container started after `prepare` (the stand-in's
   * `model-load-ms` knob: its health URL answers 503 until then). Default 0.
   */
  modelLoadMs?: number;
}

/** Where one lane lives on the embedded target. */
export interface FleetLane {
  id: string;
  healthPort: number;
  healthUrl: string;
}

export interface Fleet {
  controlPlane: HttpControlPlane;
  cp: ControlPlaneHandle;
  target: EmbeddedTarget;
  lanes: Map<string, FleetLane>;
  /**
   * What changed from the addresses the folder kept (`ADDRESSES_FILE`): one sentence per port
   * of an earlier start that was taken and replaced. Empty on a first start or when every
   * address was kept.
   */
  moved: string[];
  /** Whether the target's address and host key were those of an earlier start in this folder. */
  kept: boolean;
  /** Absolute path of deploy.sh on the target (what BATON_DEPLOY_SCRIPT must name). */
  deployScript: string;
  /** Puts the lanes in their pre-release state: control-plane baseline + previous image running. */
  prepare(manifest: Manifest): Promise<void>;
  /**
   * From now on, the lane's health URL answers 503 (until `clearFailHealth`), with `body` as
   * its response body when given (what a model server says, e.g. `model not loaded: CUDA OOM`).
   */
  failHealthOf(laneId: string, body?: string): void;
  clearFailHealth(): void;
  close(): Promise<void>;
}

/** The stand-in's health server (one per state dir; scripts/target/standin/README.md). */
const HEALTH_SERVER = join(REPO_ROOT, "scripts/target/standin/health-server.cjs");

/**
 * The stand-in's health server of one state dir, started here, serving ports this process binds
 * and hands over (`startHealthServer`).
 */
export interface HealthPorts {
  /**
   * Binds `port` on 127.0.0.1 (default 0: a free one) and hands the listening socket to the
   * health server, which serves it until it stops. Resolves to the port once served there.
   * @throws Error when the port cannot be bound (its `code`, e.g. EADDRINUSE) or the server
   *   does not take it within 20 s.
   */
  hold(port?: number): Promise<number>;
  /** Lets go of the server: it keeps serving its ports until it is stopped or its dir is gone. */
  release(): void;
  /** Stops the server (SIGTERM). */
  stop(): void;
}

/**
 * Starts the stand-in's health server for the state dir `standinDir` (which it creates), with
 * a channel to hand it listening ports: a health URL's port is then never free between being
 * chosen and being served, whatever else binds ports meanwhile. A target stops it with its
 * other stand-in servers (its `close`); removing the state dir stops it too.
 */
export function startHealthServer(standinDir: string): HealthPorts {
  // World-writable, as the stand-in makes its state dir (the target's user may be another).
  for (const d of [standinDir, join(standinDir, "containers")]) {
    mkdirSync(d, { recursive: true });
    chmodSync(d, 0o777);
  }
  const child = fork(HEALTH_SERVER, [standinDir], {
    detached: true,
    stdio: ["ignore", "ignore", "ignore", "ipc"],
  });
  // Neither the process nor its channel keeps this one alive.
  child.unref();
  child.channel?.unref();
  return {
    async hold(want = 0) {
      const server = createServer();
      await new Promise<void>((ok, fail) => {
        server.once("error", fail);
        server.listen(want, "127.0.0.1", () => ok());
      });
      const port = (server.address() as AddressInfo).port;
      try {
        await handOver(child, server, port);
      } finally {
        // The health server has its own copy of the socket now.
        server.close();
      }
      return port;
    },
    release() {
      if (child.connected) child.disconnect();
    },
    stop() {
      child.kill("SIGTERM");
    },
  };
}

/**
 * Starts the stand-in's health server for `standinDir` and holds one port per lane id there
 * (`startHealthServer`). Resolves to lane id -> port.
 * @throws Error when the server does not take a port within 20 s.
 */
export async function holdHealthPorts(
  standinDir: string,
  laneIds: readonly string[],
  hold: (server: HealthPorts, laneId: string) => Promise<number> = (server) => server.hold(),
): Promise<Map<string, number>> {
  const server = startHealthServer(standinDir);
  const ports = new Map<string, number>();
  try {
    for (const id of laneIds) ports.set(id, await hold(server, id));
  } catch (e) {
    server.stop();
    throw e;
  } finally {
    server.release();
  }
  return ports;
}

/** Sends the listening `server` to the health server; resolves once it serves `port`. */
function handOver(child: ChildProcess, server: Server, port: number): Promise<void> {
  return new Promise((ok, fail) => {
    const done = (err?: Error) => {
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("exit", onExit);
      if (err) fail(err);
      else ok();
    };
    const onMessage = (m: unknown) => {
      if ((m as { baton_listening?: unknown })?.baton_listening === port) done();
    };
    const onExit = () =>
      done(new Error(`[demo] the stand-in health server exited before serving port ${port}`));
    const timer = setTimeout(
      () =>
        done(new Error(`[demo] the stand-in health server did not serve port ${port} within 20 s`)),
      20_000,
    );
    child.on("message", onMessage);
    child.once("exit", onExit);
    child.send({ baton_listen: port }, server, (err) => {
      if (err) done(err);
    });
  });
}

/**
 * The file in the target's sandbox that keeps the fleet's addresses between starts in one
 * folder (mode 0600: it holds the target's host key and the client key): a release's manifest
 * names its lanes' SSH port, host-key pin and health URLs, so a rollback to a release of an
 * earlier start (`npm run demo -- --data-dir D`, twice) reaches the same machine only if the
 * target comes back at the same address with the same host key.
 */
export const ADDRESSES_FILE = "fleet-addresses.json";

/** What `ADDRESSES_FILE` holds. */
interface FleetAddresses {
  v: 1;
  ssh_port: number;
  host_key: SshKeyPair;
  client_key: SshKeyPair;
  /** Lane id -> health port. */
  health_ports: Record<string, number>;
}

/** The kept addresses, or null when there are none (or the file is not ours). */
function readAddresses(file: string): FleetAddresses | null {
  if (!existsSync(file)) return null;
  try {
    const a = JSON.parse(readFileSync(file, "utf8")) as FleetAddresses;
    const port = (p: unknown) => Number.isInteger(p) && (p as number) > 0 && (p as number) < 65536;
    if (a?.v !== 1 || !port(a.ssh_port) || !a.host_key?.privateKey || !a.client_key?.privateKey)
      return null;
    const health: Record<string, number> = {};
    for (const [id, p] of Object.entries(a.health_ports ?? {})) if (port(p)) health[id] = p;
    return { ...a, health_ports: health };
  } catch {
    return null;
  }
}

/** Tries to bind a kept port again this many times before taking a new one. */
const REBIND_TRIES = 10;
/** Pause between those tries, ms: an earlier start's servers may still be closing. */
const REBIND_PAUSE_MS = 100;

/**
 * `bind(port)`, retried on EADDRINUSE (`REBIND_TRIES` times, `REBIND_PAUSE_MS` apart), then
 * `bind(0)`; `port` undefined binds 0 at once. Resolves to the bound result and whether the
 * kept port was lost.
 */
async function rebind<T>(
  port: number | undefined,
  bind: (port: number) => Promise<T>,
): Promise<{ value: T; lost: boolean }> {
  if (port === undefined) return { value: await bind(0), lost: false };
  for (let i = 0; i < REBIND_TRIES; i++) {
    try {
      return { value: await bind(port), lost: false };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EADDRINUSE") throw e;
      await new Promise((r) => setTimeout(r, REBIND_PAUSE_MS));
    }
  }
  return { value: await bind(0), lost: true };
}

/**
 * Starts the control plane and the target. Throws when a port or folder is unusable.
 * Call `prepare(manifest)` once the recipe is compiled. A folder started in before keeps the
 * target's port, host key and client key and each lane's health port (`ADDRESSES_FILE`): they
 * are bound again (a port taken meanwhile is replaced by a free one, said in `moved`).
 */
export async function startFleet(o: FleetOptions): Promise<Fleet> {
  const dir = resolve(o.dir);
  const sandboxDir = join(dir, "target");
  mkdirSync(sandboxDir, { recursive: true });
  // deploy.sh reads this file on the machine (scripts/target/deploy.sh "Configuration"):
  // short health deadlines keep a failing health check to a couple of seconds.
  writeFileSync(
    join(sandboxDir, "deploy.conf"),
    `BATON_CONTAINER_CLI=docker\nBATON_HEALTH_TIMEOUT_S=${o.healthTimeoutS ?? 2}\nBATON_HEALTH_INTERVAL_S=0.2\n`,
  );
  const { handle } = await startEmbeddedControlPlane({ dataDir: join(dir, "control-plane") });
  const controlPlane = new HttpControlPlane({ baseUrl: handle.url, token: handle.writeToken });
  const addressesFile = join(sandboxDir, ADDRESSES_FILE);
  const kept = readAddresses(addressesFile);
  const moved: string[] = [];
  let target: EmbeddedTarget;
  try {
    const t = await rebind(kept?.ssh_port, (port) =>
      startEmbeddedTarget({
        sandboxDir,
        port,
        ...(kept ? { hostKey: kept.host_key, clientKey: kept.client_key } : {}),
      }),
    );
    target = t.value;
    if (t.lost) {
      moved.push(
        `the SSH target's port ${kept?.ssh_port} of the last start is in use, so it listens on ${target.port} now: releases started before name port ${kept?.ssh_port}, and a rollback to them fails lane_credentials`,
      );
    }
  } catch (e) {
    await handle.close();
    throw e;
  }
  const standinDir = join(sandboxDir, "standin");
  const lanes = new Map<string, FleetLane>();
  try {
    const ports = await holdHealthPorts(standinDir, o.laneIds, async (server, id) => {
      const want = kept?.health_ports[id];
      const h = await rebind(want, (port) => server.hold(port));
      if (h.lost) {
        moved.push(
          `lane ${id}'s health port ${want} of the last start is in use, so its health URL is http://127.0.0.1:${h.value}/healthz now: releases started before name port ${want}`,
        );
      }
      return h.value;
    });
    for (const [id, healthPort] of ports) {
      lanes.set(id, { id, healthPort, healthUrl: `http://127.0.0.1:${healthPort}/healthz` });
    }
    const addresses: FleetAddresses = {
      v: 1,
      ssh_port: target.port,
      host_key: target.hostKey,
      client_key: { privateKey: target.clientPrivateKey, publicKey: target.clientPublicKey },
      // Lanes of other recipes started in this folder keep theirs too.
      health_ports: { ...kept?.health_ports, ...Object.fromEntries(ports) },
    };
    writeFileSync(addressesFile, `${JSON.stringify(addresses, null, 2)}\n`, { mode: 0o600 });
    chmodSync(addressesFile, 0o600);
  } catch (e) {
    await target.close().catch(() => {});
    await handle.close();
    throw e;
  }
  const failFile = join(standinDir, "fail-health");
  const bodyFile = join(standinDir, "health-body");
  const deployScript = target.deployScript;

  return {
    controlPlane,
    cp: handle,
    target,
    lanes,
    moved,
    kept: kept !== null && !moved.some((m) => m.startsWith("the SSH target")),
    deployScript,
    async prepare(manifest) {
      // The fleet before any release: baseline weights, no marker, capabilities not advertised
      // (what every backward step restores).
      handle.core.seed(
        manifest.lanes.map((l) => ({
          id: l.id,
          model: manifest.model,
          weight: l.baseline_weight,
          excluded: false,
          capabilities: [...l.capabilities].sort(),
          advertised: false,
          // What each lane reports it runs once the deploys below are done.
          image: manifest.previous_image,
        })),
      );
      // Each lane runs its previous image: deployed over SSH like any machine's first install.
      const session = await connect(
        { host: target.host, port: target.port, user: target.user, hostKey: target.hostKeyPin },
        { privateKey: target.clientPrivateKey, connectTimeoutMs: 20_000 },
      );
      try {
        for (const l of manifest.lanes) {
          const cmd = [
            deployScript,
            "deploy",
            "--lane",
            l.id,
            "--image",
            manifest.previous_image,
            "--health-url",
            l.health_url,
            "--operation-key",
            `bootstrap:${l.id}`,
          ]
            .map(shQuote)
            .join(" ");
          const r = await session.exec(cmd, 60_000);
          if (r.exit_code !== 0) {
            throw new Error(
              `[demo] could not start the previous image on lane ${l.id}: ${(r.stdout + r.stderr).trim().slice(-400)}`,
            );
          }
        }
      } finally {
        session.close();
      }
      // The lanes' previous images are up; containers started from now on load their model.
      if ((o.modelLoadMs ?? 0) > 0) {
        mkdirSync(standinDir, { recursive: true });
        writeFileSync(join(standinDir, "model-load-ms"), `${Math.round(o.modelLoadMs ?? 0)}\n`);
      }
    },
    failHealthOf(laneId, body) {
      mkdirSync(standinDir, { recursive: true });
      if (body !== undefined) writeFileSync(bodyFile, body);
      writeFileSync(failFile, `${laneId}\n`);
    },
    clearFailHealth() {
      rmSync(failFile, { force: true });
      rmSync(bodyFile, { force: true });
    },
    async close() {
      await target.close().catch(() => {});
      await handle.close().catch(() => {});
      // The stand-in's health server exits once its state folder is gone (health-server.cjs).
      rmSync(standinDir, { recursive: true, force: true });
    },
  };
}
