/**
 * A machine for the exposure witnesses: scripts/target/deploy.sh run as the tools run it, on
 * the per-container stand-in runtime (test/support/container-standin: every container its own
 * process and address). Each lane's port (its health URL and serve endpoint) is a forwarder
 * this module owns, bound to 127.0.0.1:0 and kept: each connection goes to one of the
 * containers holding that port, in turn, as host networking with `SO_REUSEPORT` would; so an
 * old container answers on the new one's port until it is stopped.
 *
 * `read(lane)` is the witness: it asks the runtime (`ps`, `inspect`) which containers of the
 * lane run and listen, and deploy.sh's ledger which image its last completed health phase on
 * the lane reported. Nothing of it comes from the engine.
 */
import { execFile } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { sharedTempDir } from "./sshd.ts";

const run = promisify(execFile);
const REPO = resolve(import.meta.dirname, "../..");
/** deploy.sh of this tree (in a mutant's patched copy, the patched one). */
export const DEPLOY_SCRIPT = join(REPO, "scripts/target/deploy.sh");
const CLI = join(import.meta.dirname, "container-standin/docker");

/** Container name deploy.sh derives: baton-<lane>-<first 12 hex of the digest>. */
export function containerNameOf(lane: string, image: string): string {
  return `baton-${lane}-${image.split("@sha256:")[1]?.slice(0, 12)}`;
}

/** What the runtime and deploy.sh say about one lane. */
export interface LaneRead {
  /** Running containers of the lane that listen (hold an address), with their images. */
  serving: { name: string; image: string }[];
  /** Running containers of the lane that do not listen (started, never healthy). */
  silent: { name: string; image: string }[];
  /** Image of deploy.sh's last completed `health` phase on the lane (its ledger), or null. */
  ledgerImage: string | null;
}

/** One deploy.sh run: exit code and its JSON lines. */
export interface DeployRun {
  code: number;
  lines: Record<string, unknown>[];
  output: string;
}

export class ContainerTarget {
  private readonly forwarders = new Map<string, net.Server>();
  /** Every open connection of each lane's port: closing a port ends them (keep-alive ones too). */
  private readonly connections = new Map<string, Set<net.Socket>>();
  private readonly turn = new Map<number, number>();
  private constructor(
    readonly dir: string,
    readonly env: Record<string, string>,
  ) {}

  static create(): ContainerTarget {
    const dir = sharedTempDir("baton-ctarget-");
    const state = join(dir, "standin");
    mkdirSync(state, { recursive: true, mode: 0o777 });
    return new ContainerTarget(dir, {
      BATON_CONTAINER_CLI: CLI,
      BATON_STANDIN_DIR: state,
      BATON_LEDGER: join(dir, "ledger"),
      BATON_HEALTH_INTERVAL_S: "0.1",
      BATON_HEALTH_INTERVAL_MAX_S: "0.2",
      // deploy.sh's default health mode (identity): an answer counts only with the new
      // container's instance id, so an old container answering on the lane's port never passes.
      BATON_DEPLOY_CONF: join(dir, "none.conf"),
      BATON_LANE_LOCK_WAIT_S: "30",
      BATON_STANDIN_MAX_S: "1800",
    });
  }

  private get state(): string {
    return this.env.BATON_STANDIN_DIR!;
  }

  /** Opens lane `lane`'s port (127.0.0.1:0, kept); returns its health URL. */
  async openLane(lane: string): Promise<string> {
    const open = new Set<net.Socket>();
    this.connections.set(lane, open);
    const server = net.createServer((socket) => {
      open.add(socket);
      socket.once("close", () => open.delete(socket));
      const port = (server.address() as net.AddressInfo).port;
      const holders = this.holders(port);
      if (holders.length === 0) return socket.destroy();
      const n = this.turn.get(port) ?? 0;
      this.turn.set(port, n + 1);
      const upstream = net.connect(port, holders[n % holders.length]!);
      socket.pipe(upstream).pipe(socket);
      const end = () => {
        socket.destroy();
        upstream.destroy();
      };
      upstream.on("error", end);
      socket.on("error", end);
    });
    await new Promise<void>((ok, ko) => {
      server.once("error", ko);
      server.listen(0, "127.0.0.1", () => ok());
    });
    this.forwarders.set(lane, server);
    return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/healthz`;
  }

  /** Addresses of the running containers that hold `port`. */
  private holders(port: number): string[] {
    const d = join(this.state, "holders", String(port));
    try {
      return readdirSync(d)
        .sort()
        .map((f) => readFileSync(join(d, f), "utf8").trim())
        .filter(Boolean);
    } catch {
      return [];
    }
  }

  /** Closes one lane's port (its containers are left to `close`). */
  async closeLane(lane: string): Promise<void> {
    const s = this.forwarders.get(lane);
    this.forwarders.delete(lane);
    // server.close waits for every connection to end: an idle keep-alive one never does.
    for (const socket of this.connections.get(lane) ?? []) socket.destroy();
    this.connections.delete(lane);
    if (s) await new Promise<void>((ok) => s.close(() => ok()));
  }

  /** Runs the stand-in runtime's CLI. */
  async cli(...args: string[]): Promise<string> {
    const r = await run(CLI, args, { env: { ...process.env, ...this.env } });
    return r.stdout;
  }

  /** `image` already running on `lane`, as an earlier release (or a hand fix) left it. */
  async seed(lane: string, image: string, healthUrl: string): Promise<void> {
    await this.cli("pull", image);
    await this.cli(
      "run",
      "-d",
      "--name",
      containerNameOf(lane, image),
      "--label",
      `baton.lane=${lane}`,
      "-e",
      `BATON_HEALTH_URL=${healthUrl}`,
      image,
    );
  }

  /** Containers of `image` (on `lane`, or on any lane when null) will never listen. */
  breakImage(lane: string | null, image: string): void {
    const digest = image.split("@sha256:")[1] ?? image;
    const f = join(this.state, "broken");
    writeFileSync(f, `${lane === null ? digest : `${lane} ${digest}`}\n`, { flag: "a" });
  }

  /** `pull` of refs containing `what` fails (null: no pull fails). */
  failPull(what: string | null): void {
    const f = join(this.state, "fail-pull");
    if (what === null) rmSync(f, { force: true });
    else writeFileSync(f, `${what}\n`);
  }

  /** Runs deploy.sh with these arguments (as the tools do, every phase at once). */
  async deploy(args: string[]): Promise<DeployRun> {
    let code = 0;
    let output = "";
    try {
      const r = await run("sh", [DEPLOY_SCRIPT, ...args], {
        env: { ...process.env, ...this.env },
        timeout: 120_000,
      });
      output = r.stdout;
    } catch (err) {
      const e = err as { code?: number; stdout?: string };
      code = typeof e.code === "number" ? e.code : 1;
      output = e.stdout ?? "";
    }
    const lines = output
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as Record<string, unknown>];
        } catch {
          return [];
        }
      });
    return { code, lines, output };
  }

  /** The witness read of one lane: the runtime's containers and deploy.sh's ledger. */
  async read(lane: string): Promise<LaneRead> {
    const ps = await this.cli("ps", "--format", "json");
    const mine = ps
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { Names: string; Image: string; Labels: Record<string, string> })
      .filter((c) => c.Labels["baton.lane"] === lane);
    const serving: LaneRead["serving"] = [];
    const silent: LaneRead["silent"] = [];
    for (const c of mine) {
      const addr = (
        await this.cli("inspect", "-f", "{{.NetworkSettings.IPAddress}}", c.Names)
      ).trim();
      (addr ? serving : silent).push({ name: c.Names, image: c.Image });
    }
    let ledgerImage: string | null = null;
    try {
      for (const l of readFileSync(this.env.BATON_LEDGER!, "utf8").split("\n")) {
        const [key, , phase, json] = l.split("\t");
        if (phase !== "health" || !key?.includes(`lane=${lane}:`) || !json) continue;
        const image = (JSON.parse(json) as { image?: string }).image;
        if (image) ledgerImage = image;
      }
    } catch {}
    return { serving, silent, ledgerImage };
  }

  /** Stops every container, closes every lane port and removes the state. */
  async close(): Promise<void> {
    for (const lane of [...this.forwarders.keys()]) await this.closeLane(lane);
    try {
      const d = join(this.state, "containers");
      for (const f of readdirSync(d)) {
        if (!f.endsWith(".json")) continue;
        const c = JSON.parse(readFileSync(join(d, f), "utf8")) as { pid: number };
        try {
          process.kill(c.pid, "SIGTERM");
        } catch {}
      }
    } catch {}
    rmSync(this.dir, { recursive: true, force: true });
  }
}
