/**
 * The embedded SSH target: an SSH server (ssh2's `Server`) on 127.0.0.1 that stands in for a
 * serving machine in the demo and the e2e tests. It authenticates one generated client key
 * (public key only), runs each `exec` request with `/bin/sh -c` in a sandbox folder whose
 * PATH starts with the container CLI stand-in, and installs `deploy.sh` into the sandbox.
 * No pty, no shell, no port forwarding: only what the release tools use.
 */
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ssh2 from "ssh2";
import { type RunningExec, runExec } from "./exec.ts";
import { generateEd25519, parsePublicKey, type SshKeyPair, sha256Fingerprint } from "./keys.ts";

const { Server } = ssh2;

/** Repository root, from this file's place in it (engine/src/embedded-target/). */
const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

export interface EmbeddedTargetOptions {
  /** Folder the commands run in (cwd and HOME); created if missing. */
  sandboxDir: string;
  /** Login name the client must use; default `baton`. */
  user?: string;
  /** Encrypts the generated client key with this passphrase (failure case F09). */
  clientKeyPassphrase?: string;
  /**
   * Use this client key instead of generating one: several targets (one per lane) then accept
   * the one key the action is given, as a fleet's machines share the deploy user's key.
   */
  clientKey?: SshKeyPair;
  /**
   * Use this host key instead of generating one: a target started again with the same host key
   * and port keeps the pin (`hostKeyPin`) and address that earlier manifests name.
   */
  hostKey?: SshKeyPair;
  /** More authorised public keys (OpenSSH `.pub` lines or PEM), e.g. an RSA key for F09. */
  extraAuthorizedKeys?: string[];
  /** Folders put first on PATH; default the container CLI stand-in `scripts/target/standin`. */
  pathPrepend?: string[];
  /** Extra environment for every command (wins over the defaults). */
  env?: Record<string, string>;
  /** TCP port; default 0 (ephemeral). */
  port?: number;
}

/** A running target. `hostKeyPin` goes into a recipe's `host_key`. */
export interface EmbeddedTarget {
  host: "127.0.0.1";
  port: number;
  user: string;
  /** `SHA256:…` pin of the host key (as `ssh-keygen -l -E sha256` prints it). */
  hostKeyPin: string;
  /** Host public key line and a known_hosts line, for OpenSSH clients. */
  hostPublicKey: string;
  knownHostsLine: string;
  /** The authorised client key (OpenSSH format; encrypted if a passphrase was given). */
  clientPrivateKey: string;
  clientPublicKey: string;
  sandboxDir: string;
  /** The container CLI stand-in's state folder (knob files such as `fail-health` go here). */
  standinDir: string;
  /**
   * The installed deploy script as the tools should call it (their `BATON_DEPLOY_SCRIPT`):
   * `baton-deploy`, found on the target's PATH, so one value serves every embedded target.
   */
  deployScript: string;
  /** The host key pair (OpenSSH format), to start the target again with the same pin. */
  hostKey: SshKeyPair;
  /** Commands run so far (for tests and the demo's log), oldest first. */
  commands: string[];
  /** Stops listening, ends sessions and kills running commands. */
  close(): Promise<void>;
}

/** Longest time (ms) a connection may take to authenticate before it is dropped. */
const AUTH_DEADLINE_MS = 20_000;

/**
 * Starts the target.
 * @throws Error when the sandbox cannot be created or the port cannot be bound.
 */
export async function startEmbeddedTarget(options: EmbeddedTargetOptions): Promise<EmbeddedTarget> {
  const sandboxDir = resolve(options.sandboxDir);
  const binDir = join(sandboxDir, "bin");
  mkdirSync(binDir, { recursive: true });
  const deployScript = join(REPO_ROOT, "scripts/target/deploy.sh");
  // Installed on the machine as the README tells operators to (the tools' default path is
  // /usr/local/bin/baton-deploy; point them here with BATON_DEPLOY_SCRIPT=<deployScript>).
  if (existsSync(deployScript)) {
    for (const name of ["baton-deploy", "deploy.sh"]) {
      copyFileSync(deployScript, join(binDir, name));
      chmodSync(join(binDir, name), 0o755);
    }
  }
  const user = options.user ?? "baton";
  const host = options.hostKey ?? generateEd25519("baton-embedded-target");
  const client =
    options.clientKey ?? generateEd25519(`${user}@baton-embedded`, options.clientKeyPassphrase);
  const authorized = [client.publicKey, ...(options.extraAuthorizedKeys ?? [])].map((k) =>
    parsePublicKey(k),
  );
  const pathPrepend = options.pathPrepend ?? [join(REPO_ROOT, "scripts/target/standin")];
  const env: Record<string, string> = {
    HOME: sandboxDir,
    USER: user,
    LOGNAME: user,
    SHELL: "/bin/sh",
    LANG: "C.UTF-8",
    PATH: [...pathPrepend, binDir, process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin"].join(":"),
    // Keep the target's state inside the sandbox (deploy.sh ledger, stand-in containers).
    BATON_DEPLOY_CONF: join(sandboxDir, "deploy.conf"),
    BATON_LEDGER: join(sandboxDir, "ledger"),
    BATON_STANDIN_DIR: join(sandboxDir, "standin"),
    ...options.env,
  };
  const commands: string[] = [];
  const running = new Set<RunningExec>();
  const connections = new Set<ssh2.Connection>();

  const server = new Server({ hostKeys: [host.privateKey] }, (conn) => {
    connections.add(conn);
    const deadline = setTimeout(() => conn.end(), AUTH_DEADLINE_MS);
    conn.on("close", () => {
      clearTimeout(deadline);
      connections.delete(conn);
    });
    conn.on("error", () => {}); // a client that drops the TCP connection is not our failure
    conn.on("authentication", (ctx) => {
      if (ctx.method !== "publickey" || ctx.username !== user) return ctx.reject(["publickey"]);
      // ssh2 hands over the key's SSH wire blob (README "Server" example does the same).
      const key = authorized.find((k) => k.getPublicSSH().equals(ctx.key.data));
      if (!key) return ctx.reject(["publickey"]);
      // Without a signature the client only asks whether this key would do.
      if (!ctx.signature || !ctx.blob) return ctx.accept();
      if (key.verify(ctx.blob, ctx.signature, ctx.hashAlgo) !== true)
        return ctx.reject(["publickey"]);
      ctx.accept();
    });
    conn.on("ready", () => {
      clearTimeout(deadline);
      conn.on("session", (acceptSession) => {
        const session = acceptSession();
        const sessionEnv: Record<string, string> = {};
        let current: RunningExec | undefined;
        session.on("env", (accept, reject, info) => {
          // Like sshd's AcceptEnv: only our own variables and the locale.
          if (/^(BATON_[A-Z0-9_]+|LANG|LC_[A-Z]+)$/.test(info.key)) {
            sessionEnv[info.key] = info.val;
            accept?.();
          } else reject?.();
        });
        session.on("exec", (accept, _reject, info) => {
          const channel = accept();
          commands.push(info.command);
          current = runExec(channel, info.command, {
            cwd: sandboxDir,
            env: { ...env, ...sessionEnv },
          });
          running.add(current);
          const mine = current;
          void mine.done.then(() => running.delete(mine));
        });
        session.on("signal", (accept, _reject, info) => {
          accept?.();
          current?.kill(`SIG${info.name.replace(/^SIG/, "")}` as NodeJS.Signals);
        });
        for (const refused of ["pty", "shell", "subsystem", "x11", "auth-agent"] as const) {
          session.on(refused as "pty", (_accept, reject) => reject?.());
        }
      });
      conn.on("request", (_accept, reject) => reject?.()); // no port forwarding
    });
  });

  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(options.port ?? 0, "127.0.0.1", () => ok());
  });
  const port = (server.address() as AddressInfo).port;
  const hostLine = host.publicKey.split(" ").slice(0, 2).join(" ");
  return {
    host: "127.0.0.1",
    port,
    user,
    hostKeyPin: sha256Fingerprint(host.publicKey),
    hostPublicKey: hostLine,
    knownHostsLine: `[127.0.0.1]:${port} ${hostLine}`,
    clientPrivateKey: client.privateKey,
    clientPublicKey: client.publicKey,
    hostKey: host,
    sandboxDir,
    deployScript: "baton-deploy",
    standinDir: env.BATON_STANDIN_DIR!,
    commands,
    async close() {
      for (const r of running) r.kill("SIGKILL");
      for (const c of connections) c.end();
      stopStandinServers(env.BATON_STANDIN_DIR!);
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}

/**
 * Stops the stand-in's health server (one per state dir, serving every container's port; it
 * outlives the SSH session, like containers).
 */
function stopStandinServers(standinDir: string): void {
  const dir = join(standinDir, "servers");
  if (!existsSync(dir)) return;
  for (const f of readdirSync(dir).filter((n) => n.endsWith(".pid"))) {
    let pid: number;
    try {
      pid = Number(readFileSync(join(dir, f), "utf8").trim());
    } catch {
      // The server removed its pid file between the listing and the read: it is stopping.
      continue;
    }
    if (!Number.isInteger(pid) || pid <= 1) continue;
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
}
