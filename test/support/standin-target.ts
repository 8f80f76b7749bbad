/**
 * A test target: a stand-in container CLI state dir, a deploy ledger, and helpers to read what
 * the stand-in recorded. Used with `sh scripts/target/deploy.sh` directly or through sshd.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { type HealthPorts, startHealthServer } from "../../engine/src/demo/fleet.ts";
import { sharedTempDir } from "./sshd.ts";

export const REPO = resolve(import.meta.dirname, "../..");
export const DEPLOY_SH = join(REPO, "scripts/target/deploy.sh");
export const STANDIN_CLI = join(REPO, "scripts/target/standin/docker");

/** `reg.example/acme/model@sha256:<c repeated 64>` */
export function image(c: string, name = "reg.example/acme/model"): string {
  return `${name}@sha256:${c.repeat(64).slice(0, 64)}`;
}

/** Container name deploy.sh derives: baton-<lane>-<first 12 hex of the digest>. */
export function containerName(lane: string, img: string): string {
  return `baton-${lane}-${img.split("@sha256:")[1]?.slice(0, 12)}`;
}

export interface StandinTarget {
  dir: string;
  standinDir: string;
  ledger: string;
  /** Environment deploy.sh needs (also passed to sshd as SetEnv). */
  env: Record<string, string>;
  /** Recorded stand-in calls (argv arrays). */
  calls(): string[][];
  container(
    name: string,
  ): { running: boolean; image: string; labels?: Record<string, string> } | null;
  /** Writes a knob file (fail-health, fail-pull, hang, signal) in the stand-in dir. */
  knob(file: string, value: string): void;
  /**
   * A health URL (`http://127.0.0.1:<port>/healthz`) on a new port the target's health server
   * holds from now on (started on first use; engine/src/demo/fleet.ts `startHealthServer`), so
   * no other process can take the port before a container is started on it.
   */
  healthUrl(): Promise<string>;
  /**
   * Pre-pulls and starts a container as if an earlier release's deploy.sh had started it (with
   * an instance id), or, with `o.instanceId` false, as one started by hand (none).
   */
  seedRunning(lane: string, img: string, healthUrl: string, o?: { instanceId?: boolean }): void;
  cleanup(): void;
}

/** Creates a target dir writable by the test login user. */
export function makeStandinTarget(): StandinTarget {
  const dir = sharedTempDir("baton-target-");
  const standinDir = join(dir, "standin");
  const ledger = join(dir, "ledger");
  const env = {
    BATON_CONTAINER_CLI: STANDIN_CLI,
    BATON_STANDIN_DIR: standinDir,
    BATON_LEDGER: ledger,
    BATON_HEALTH_INTERVAL_S: "0.2",
    BATON_STANDIN_HANG_S: "20",
    BATON_STANDIN_SERVER_MAX_S: "300",
    BATON_DEPLOY_CONF: join(dir, "none.conf"),
  };
  let health: HealthPorts | null = null;
  const t: StandinTarget = {
    dir,
    standinDir,
    ledger,
    env,
    calls: () => {
      const f = join(standinDir, "calls.jsonl");
      if (!existsSync(f)) return [];
      return readFileSync(f, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l).argv as string[]);
    },
    container: (name) => {
      const f = join(standinDir, "containers", `${encodeURIComponent(name)}.json`);
      return existsSync(f) ? JSON.parse(readFileSync(f, "utf8")) : null;
    },
    knob: (file, value) => {
      execFileSync("mkdir", ["-p", "-m", "777", standinDir]);
      writeFileSync(join(standinDir, file), value, { mode: 0o666 });
    },
    seedRunning: (lane, img, healthUrl, o = {}) => {
      const run = (args: string[]) =>
        execFileSync(STANDIN_CLI, args, { env: { ...process.env, ...env }, stdio: "ignore" });
      run(["pull", img]);
      const id = randomBytes(16).toString("hex");
      // deploy.sh gives every container it starts an instance id (identity health mode).
      const identity =
        o.instanceId === false
          ? []
          : ["--label", `baton.instance_id=${id}`, "-e", `BATON_INSTANCE_ID=${id}`];
      run([
        "run",
        "-d",
        "--name",
        containerName(lane, img),
        "--label",
        `baton.lane=${lane}`,
        ...identity,
        "-e",
        `BATON_HEALTH_URL=${healthUrl}`,
        img,
      ]);
    },
    healthUrl: async () => {
      health ??= startHealthServer(standinDir);
      return `http://127.0.0.1:${await health.hold()}/healthz`;
    },
    cleanup: () => {
      health?.release();
      // Health servers exit once their state dir is gone; stop them now rather than in 300 ms.
      const servers = join(standinDir, "servers");
      if (existsSync(servers)) {
        for (const f of readdirSync(servers)) {
          try {
            process.kill(Number(readFileSync(join(servers, f), "utf8")), "SIGTERM");
          } catch {}
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return t;
}
