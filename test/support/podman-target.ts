/**
 * A real container target for tests and the deploy benchmark: Debian's rootful `podman` (runc,
 * cgroupfs, fixed ulimits, file events log; TOOLCHAIN.md) with a private image store, and
 * Debian's `docker-registry` on 127.0.0.1 serving images over plain HTTP.
 *
 * Images are built locally from `busybox-static` (no registry access needed), pushed to the
 * loopback registry from a separate "builder" store, and referred to by their manifest digest
 * (`127.0.0.1:<port>/baton/app@sha256:…`), so the target's `pull` really fetches from the
 * registry. Each image serves `/healthz` on the port of its `BATON_HEALTH_URL` (8080 when none),
 * on all addresses or on `BIND` (an address given with `-e BIND=…`, e.g. 127.0.0.1 under host
 * networking), and echoes the instance id deploy.sh gives it (`BATON_INSTANCE_ID`) in the body
 * as `<tag> <instance id>`, as docs/runner.md asks of a model server. The world's default
 * environment runs them on podman's bridge network and probes the new container at its own
 * address (`BATON_HEALTH_TARGET=container`); host networking is `BATON_RUN_ARGS=--network host`.
 */
import { execFile, execFileSync, spawn } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { proposePort as freePort } from "./ports.ts";

const run = promisify(execFile);

/** What an image does when started. */
export type ImageBehaviour =
  /** serves 200 on /healthz with busybox httpd (body `<tag> <instance id>`) */
  | "healthy"
  /**
   * serves 200 `<tag> <instance id>` on every path, listening with SO_REUSEPORT: two such
   * containers share one host-network port (a server built for zero-downtime restarts). Needs
   * `gcc` with a static libc (test/support/reuseport-httpd.c).
   */
  | "reuseport"
  /** exits with status 3 at once */
  | "exits"
  /** keeps running but never listens (a model server still loading its weights) */
  | "silent";

/** The health port and address an image's entry script listens on (see the file comment). */
const LISTEN =
  `u="\${BATON_HEALTH_URL:-http://x:8080/}"; u="\${u#*://}"; u="\${u%%/*}"; port="\${u##*:}"; ` +
  `id="\${BATON_INSTANCE_ID:-}"; `;

/** Whether this machine can run the real-runtime tests (podman, runc, docker-registry, busybox, root). */
export function podmanAvailable(): boolean {
  return (
    process.getuid?.() === 0 &&
    ["/usr/bin/podman", "/usr/sbin/runc", "/usr/bin/docker-registry", "/bin/busybox"].every((f) =>
      existsSync(f),
    )
  );
}

/** A loopback registry plus a private podman store for the target. */
export interface PodmanWorld {
  dir: string;
  /** `127.0.0.1:<port>` */
  registry: string;
  /** Environment deploy.sh needs on the target (also sshd SetEnv). */
  env: Record<string, string>;
  /** Builds an image from busybox-static, pushes it, returns `<registry>/baton/app@sha256:…`. */
  image(tag: string, behaviour?: ImageBehaviour): Promise<string>;
  /** Runs `podman` against the target's store; returns stdout (trimmed). */
  podman(args: string[]): Promise<string>;
  /**
   * GET http://<container ip>:8080/healthz; the image tag it answers with (the body's first
   * word), or null when nothing answers.
   */
  probe(container: string): Promise<string | null>;
  /** GET `url` from this process (e.g. a host-network lane's health URL): the body, or null. */
  get(url: string): Promise<string | null>;
  /** The instance id deploy.sh gave the container (its `baton.instance_id` label), or "". */
  instanceId(container: string): Promise<string>;
  /** Names of every container the target's store holds, running or not (`ps -a`). */
  containers(): Promise<string[]>;
  /** Stops and removes everything; kills the registry. */
  cleanup(): Promise<void>;
}

function writeConf(dir: string, name: string, storeRoot: string, registry: string) {
  mkdirSync(join(dir, name), { recursive: true });
  const conf = join(dir, name, "containers.conf");
  writeFileSync(
    conf,
    [
      "[containers]",
      'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]',
      "[engine]",
      'runtime = "runc"',
      'cgroup_manager = "cgroupfs"',
      'events_logger = "file"',
      `events_logfile_path = "${join(dir, name, "events.log")}"`,
      "",
    ].join("\n"),
  );
  const storage = join(dir, name, "storage.conf");
  // vfs: no overlay mounts left behind if a test is killed; the images are a few MB.
  writeFileSync(
    storage,
    `[storage]\ndriver = "vfs"\ngraphroot = "${join(storeRoot, "graph")}"\nrunroot = "${join(storeRoot, "run")}"\n`,
  );
  const registries = join(dir, name, "registries.conf");
  writeFileSync(registries, `[[registry]]\nlocation = "${registry}"\ninsecure = true\n`);
  return {
    CONTAINERS_CONF: conf,
    CONTAINERS_STORAGE_CONF: storage,
    CONTAINERS_REGISTRIES_CONF: registries,
  };
}

async function waitHttp(url: string, deadlineMs: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      await fetch(url, { signal: AbortSignal.timeout(1000) });
      return;
    } catch {
      if (Date.now() > deadlineMs) break;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`[test] ${url} did not answer in time`);
}

/** Starts the registry and writes the podman configuration. Call `cleanup()` in afterAll. */
export async function startPodmanWorld(): Promise<PodmanWorld> {
  const dir = mkdtempSync(join(tmpdir(), "baton-podman-"));
  chmodSync(dir, 0o755);
  let registry = "";
  let child: ReturnType<typeof spawn> | undefined;
  for (let tries = 0; tries < 3 && !registry; tries++) {
    const port = await freePort();
    const cfg = join(dir, "registry.yml");
    writeFileSync(
      cfg,
      [
        "version: 0.1",
        "log:",
        "  level: warn",
        "storage:",
        "  filesystem:",
        `    rootdirectory: ${join(dir, "registry")}`,
        "http:",
        `  addr: 127.0.0.1:${port}`,
        "",
      ].join("\n"),
    );
    const log = openSync(join(dir, "registry.log"), "a");
    child = spawn("/usr/bin/docker-registry", ["serve", cfg], {
      stdio: ["ignore", log, log],
    });
    try {
      await waitHttp(`http://127.0.0.1:${port}/v2/`, Date.now() + 10_000);
      registry = `127.0.0.1:${port}`;
    } catch {
      child.kill("SIGKILL");
    }
  }
  if (!registry) throw new Error("[test] docker-registry did not start");
  const builderEnv = writeConf(dir, "builder", join(dir, "builder-store"), registry);
  const targetEnv = writeConf(dir, "target", join(dir, "target-store"), registry);
  const env: Record<string, string> = {
    ...targetEnv,
    BATON_CONTAINER_CLI: "podman",
    BATON_HEALTH_TARGET: "container",
    BATON_HEALTH_INTERVAL_S: "0.2",
    BATON_LEDGER: join(dir, "ledger", "ledger"),
    BATON_DEPLOY_CONF: join(dir, "none.conf"),
  };
  const podmanAs = async (which: Record<string, string>, args: string[], input?: Buffer) => {
    if (input) {
      return execFileSync("podman", args, {
        env: { ...process.env, ...which },
        input,
        encoding: "utf8",
        stdio: ["pipe", "pipe", "pipe"],
        timeout: 120_000,
      }).trim();
    }
    const r = await run("podman", args, {
      env: { ...process.env, ...which },
      timeout: 120_000,
      maxBuffer: 8 << 20,
    });
    return r.stdout.trim();
  };
  let built = 0;
  let reuseportBin = "";
  /** Compiles reuseport-httpd.c statically, once per world. */
  const reuseport = () => {
    if (!reuseportBin) {
      const out = join(dir, "reuseport-httpd");
      try {
        execFileSync(
          "gcc",
          ["-static", "-Os", "-o", out, join(import.meta.dirname, "reuseport-httpd.c")],
          { stdio: ["ignore", "pipe", "pipe"] },
        );
      } catch (e) {
        throw new Error(
          `[test] the reuseport image needs gcc with a static libc (Debian gcc, libc6-dev): ${(e as Error).message}`,
        );
      }
      reuseportBin = out;
    }
    return reuseportBin;
  };
  const get = async (url: string) => {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      return res.ok ? (await res.text()).trim() : null;
    } catch {
      return null;
    }
  };
  return {
    dir,
    registry,
    env,
    podman: (args) => podmanAs(targetEnv, args),
    image: async (tag, behaviour = "healthy") => {
      const root = join(dir, `rootfs-${built++}`);
      mkdirSync(join(root, "bin"), { recursive: true });
      mkdirSync(join(root, "www"), { recursive: true });
      copyFileSync("/bin/busybox", join(root, "bin", "busybox"));
      chmodSync(join(root, "bin", "busybox"), 0o755);
      if (behaviour === "reuseport") {
        copyFileSync(reuseport(), join(root, "bin", "reuseport-httpd"));
        chmodSync(join(root, "bin", "reuseport-httpd"), 0o755);
      }
      // busybox sh as PID 1 ends on TERM (a bare httpd as PID 1 would ignore it and make
      // `podman stop` wait 10 s; TOOLCHAIN.md); reuseport-httpd handles TERM itself.
      const script = {
        healthy:
          `${LISTEN}echo "${tag} $id" > /www/healthz; ` +
          `trap "exit 0" TERM; /bin/busybox httpd -f -p "\${BIND:+$BIND:}$port" -h /www & wait`,
        reuseport: `${LISTEN}exec /bin/reuseport-httpd "\${BIND:-0.0.0.0}" "$port" 200 "${tag} $id"`,
        exits: "echo starting; echo configuration missing >&2; exit 3",
        silent: 'trap "exit 0" TERM; /bin/busybox sleep 3600 & wait',
      }[behaviour];
      const tar = execFileSync("tar", ["-C", root, "-c", "."], { maxBuffer: 64 << 20 });
      const local = `localhost/baton-build/app:${tag}`;
      await podmanAs(
        builderEnv,
        [
          "import",
          "--change",
          `CMD ${JSON.stringify(["/bin/busybox", "sh", "-c", script])}`,
          "-",
          local,
        ],
        tar,
      );
      const digestFile = join(dir, `digest-${tag}`);
      await podmanAs(builderEnv, [
        "push",
        "-q",
        "--tls-verify=false",
        "--digestfile",
        digestFile,
        local,
        `${registry}/baton/app:${tag}`,
      ]);
      rmSync(root, { recursive: true, force: true });
      const digest = readFileSync(digestFile, "utf8").trim();
      if (!/^sha256:[0-9a-f]{64}$/.test(digest))
        throw new Error(`[test] push printed no digest: ${digest}`);
      return `${registry}/baton/app@${digest}`;
    },
    probe: async (container) => {
      const ip = await podmanAs(targetEnv, [
        "inspect",
        "-f",
        "{{.NetworkSettings.IPAddress}}",
        container,
      ]).catch(() => "");
      if (!ip) return null;
      return (await get(`http://${ip}:8080/healthz`))?.split(" ")[0] ?? null;
    },
    get,
    instanceId: (container) =>
      podmanAs(targetEnv, [
        "inspect",
        "-f",
        '{{index .Config.Labels "baton.instance_id"}}',
        container,
      ]).catch(() => ""),
    containers: async () =>
      (await podmanAs(targetEnv, ["ps", "-a", "--format", "{{.Names}}"]))
        .split("\n")
        .filter(Boolean),
    cleanup: async () => {
      await podmanAs(targetEnv, ["rm", "-a", "-f", "-t", "0"]).catch(() => "");
      child?.kill("SIGTERM");
      // podman's cleanup processes (conmon, `podman container cleanup`) may still be removing
      // files under the store after `rm -f` returns: retry on ENOTEMPTY/EBUSY, and leave a
      // temp folder behind (said on stderr) rather than fail the suite over it.
      try {
        rmSync(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 250 });
      } catch (err) {
        console.warn(`[test] left ${dir} behind: ${(err as Error).message}`);
      }
    },
  };
}
