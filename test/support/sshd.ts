/**
 * Starts Debian's OpenSSH sshd on 127.0.0.1 (free port) for tests: its own ed25519 host key, a
 * generated ed25519 client key (more public keys can be authorised), StrictModes no, UsePAM no,
 * key auth only, logging in as a dedicated user `batontest` when run as root (CI), else as the
 * current user. `env` becomes sshd `SetEnv`, which
 * is how tests point deploy.sh at the stand-in container CLI (BATON_CONTAINER_CLI etc.).
 * Pitfalls from TOOLCHAIN.md: /run/sshd must exist; stdin/stdout are not inherited.
 */
import { execFileSync, spawn } from "node:child_process";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { connect as tcpConnect } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { proposePort } from "./ports.ts";

/** A running sshd. `hostKeyPin` is `SHA256:…` as `ssh-keygen -l -E sha256` prints it. */
export interface Sshd {
  host: string;
  port: number;
  user: string;
  dir: string;
  hostKeyPin: string;
  /** Pin (`SHA256:…`) of each host key the server offers, by type (ed25519 always). */
  hostKeyPins: Partial<Record<HostKeyType, string>>;
  /** `[127.0.0.1]:port ssh-ed25519 AAAA…` as ssh-keyscan prints it. */
  knownHostsLine: string;
  clientKeyPath: string;
  clientKey: string;
  logFile: string;
  /** Authorises one more public key (OpenSSH `.pub` line). */
  authorize(publicKeyLine: string): void;
  stop(): Promise<void>;
}

/** Host key types a test sshd can offer (ssh-keygen -t names). */
export type HostKeyType = "ed25519" | "rsa" | "ecdsa";

/** Options of {@link startSshd}. */
export interface SshdOptions {
  /** Host keys offered (default only ed25519); ed25519 is always included. */
  hostKeyTypes?: HostKeyType[];
  /** Log in as root instead of the test user (for a rootful container runtime, CI only). */
  root?: boolean;
  /** Listen address (default 127.0.0.1; any 127.0.0.0/8 address works on Linux). */
  listenAddress?: string;
  /** Extra sshd_config lines (e.g. `AllowUsers`, `Match` blocks; they go last). */
  extraConfig?: string[];
}

/** Generates a key pair with ssh-keygen; returns [private key path, public key line]. */
export function generateKey(
  dir: string,
  name: string,
  type: "ed25519" | "rsa" = "ed25519",
  opts: { passphrase?: string; pem?: boolean } = {},
): [string, string] {
  const path = join(dir, name);
  const args = [
    "-q",
    "-t",
    type,
    "-N",
    opts.passphrase ?? "",
    "-C",
    `baton-test-${name}`,
    "-f",
    path,
  ];
  if (type === "rsa") args.push("-b", "2048");
  if (opts.pem) args.push("-m", "PEM");
  execFileSync("ssh-keygen", args, { stdio: "ignore" });
  return [path, readFileSync(`${path}.pub`, "utf8").trim()];
}

function waitForBanner(port: number, deadlineMs: number, host = "127.0.0.1"): Promise<void> {
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const sock = tcpConnect({ host, port });
      sock.once("data", (d) => {
        sock.destroy();
        if (d.toString().startsWith("SSH-")) resolve();
        else reject(new Error(`[test] port ${port} answered something other than SSH`));
      });
      sock.once("error", () => {
        sock.destroy();
        if (Date.now() > deadlineMs)
          reject(new Error(`[test] sshd did not listen on ${port} in time`));
        else setTimeout(attempt, 50);
      });
    };
    attempt();
  });
}

/** Login user for test sshd sessions when running as root (see ensureTestUser). */
export const TEST_USER = "batontest";

/**
 * As root: makes sure the dedicated, unlocked login user exists (a non-root session, like a
 * real deploy user: OpenSSH honours channel `signal` requests only for privilege-separated,
 * i.e. non-root, sessions). Otherwise: the current user.
 */
export function ensureTestUser(): string {
  if (process.getuid?.() !== 0) return userInfo().username;
  const exists = () => {
    try {
      execFileSync("id", [TEST_USER], { stdio: "ignore" });
      return true;
    } catch {
      return false;
    }
  };
  if (!exists()) {
    try {
      execFileSync("useradd", ["-M", "-d", "/tmp", "-s", "/bin/sh", TEST_USER], {
        stdio: "ignore",
      });
      // Unlocked (no password, but not "!"), or sshd refuses key logins for the account.
      execFileSync("usermod", ["-p", "*", TEST_USER], { stdio: "ignore" });
    } catch (e) {
      // Another test worker may have created it at the same moment.
      if (!exists()) throw e;
    }
  }
  return TEST_USER;
}

/** Makes a fresh temp dir the test login user can write (mode 0777). */
export function sharedTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o777);
  return dir;
}

/** Starts sshd; call `stop()` in afterAll. Throws when sshd does not come up within 10 s. */
export async function startSshd(
  env: Record<string, string> = {},
  opts: SshdOptions = {},
): Promise<Sshd> {
  mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  const user = opts.root ? "root" : ensureTestUser();
  const listen = opts.listenAddress ?? "127.0.0.1";
  const dir = mkdtempSync(join(tmpdir(), "baton-sshd-"));
  // sshd reads authorized_keys as the login user.
  chmodSync(dir, 0o755);
  const types = [...new Set<HostKeyType>(["ed25519", ...(opts.hostKeyTypes ?? [])])];
  const hostKeyPins: Partial<Record<HostKeyType, string>> = {};
  for (const t of types) {
    const f = join(dir, `host_${t}`);
    execFileSync("ssh-keygen", ["-q", "-t", t, "-N", "", "-f", f], { stdio: "ignore" });
    hostKeyPins[t] = execFileSync("ssh-keygen", ["-l", "-E", "sha256", "-f", `${f}.pub`], {
      encoding: "utf8",
    }).split(/\s+/)[1] as string;
  }
  const [clientKeyPath, clientPub] = generateKey(dir, "client_ed25519");
  const authorized = join(dir, "authorized_keys");
  writeFileSync(authorized, `${clientPub}\n`, { mode: 0o644 });
  const hostPub = readFileSync(join(dir, "host_ed25519.pub"), "utf8").trim().split(/\s+/);
  const hostKeyPin = hostKeyPins.ed25519 as string;
  const setEnv = Object.entries({ PATH: process.env.PATH ?? "/usr/bin:/bin", ...env })
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  const logFile = join(dir, "sshd.log");
  // sshd must be told its port: a proposed one, and another when this sshd could not bind it
  // (another process took it first: sshd then exits) or did not answer in time.
  for (let tries = 0; tries < 3; tries++) {
    const port = await proposePort();
    writeFileSync(
      join(dir, "sshd_config"),
      [
        `Port ${port}`,
        `ListenAddress ${listen}`,
        ...types.map((t) => `HostKey ${join(dir, `host_${t}`)}`),
        `PidFile ${join(dir, "sshd.pid")}`,
        `AuthorizedKeysFile ${authorized}`,
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        opts.root ? "PermitRootLogin prohibit-password" : "PermitRootLogin no",
        "StrictModes no",
        "UsePAM no",
        "LogLevel VERBOSE",
        "MaxStartups 50",
        `SetEnv ${setEnv}`,
        ...(opts.extraConfig ?? []),
        "",
      ].join("\n"),
    );
    const log = openSync(logFile, "a");
    const child = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", join(dir, "sshd_config")], {
      stdio: ["ignore", log, log],
    });
    try {
      await waitForBanner(port, Date.now() + 10_000, listen);
      // The banner is this sshd's once it logged that it listens there (one that lost the port
      // logs that it could not bind, and exits). Bounded: 100 reads, 20 ms apart.
      const mine = `Server listening on ${listen} port ${port}`;
      for (let i = 0; i < 100 && !readFileSync(logFile, "utf8").includes(mine); i++) {
        if (child.exitCode !== null || child.signalCode !== null) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      if (!readFileSync(logFile, "utf8").includes(mine))
        throw new Error(
          `[test] sshd did not listen on ${port}: ${readFileSync(logFile, "utf8").slice(-400)}`,
        );
    } catch (e) {
      child.kill("SIGKILL");
      if (tries === 2) throw e;
      continue;
    }
    return {
      host: listen,
      port,
      user,
      dir,
      hostKeyPin,
      hostKeyPins,
      knownHostsLine: `[${listen}]:${port} ${hostPub[0]} ${hostPub[1]}`,
      clientKeyPath,
      clientKey: readFileSync(clientKeyPath, "utf8"),
      logFile,
      authorize: (line) =>
        writeFileSync(authorized, `${readFileSync(authorized, "utf8")}${line}\n`),
      stop: () =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null) {
            rmSync(dir, { recursive: true, force: true });
            resolve();
            return;
          }
          child.once("exit", () => {
            rmSync(dir, { recursive: true, force: true });
            resolve();
          });
          child.kill("SIGTERM");
        }),
    };
  }
  throw new Error("[test] sshd did not start");
}
