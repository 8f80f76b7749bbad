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
import { createServer, connect as tcpConnect } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";

/** A running sshd. `hostKeyPin` is `SHA256:…` as `ssh-keygen -l -E sha256` prints it. */
export interface Sshd {
  host: "127.0.0.1";
  port: number;
  user: string;
  dir: string;
  hostKeyPin: string;
  /** `[127.0.0.1]:port ssh-ed25519 AAAA…` as ssh-keyscan prints it. */
  knownHostsLine: string;
  clientKeyPath: string;
  clientKey: string;
  logFile: string;
  /** Authorises one more public key (OpenSSH `.pub` line). */
  authorize(publicKeyLine: string): void;
  stop(): Promise<void>;
}

/** Free TCP port on 127.0.0.1 (ephemeral bind, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === "object" && addr ? addr.port : 0));
    });
  });
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

function waitForBanner(port: number, deadlineMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const sock = tcpConnect({ host: "127.0.0.1", port });
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
export async function startSshd(env: Record<string, string> = {}): Promise<Sshd> {
  mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  const user = ensureTestUser();
  const dir = mkdtempSync(join(tmpdir(), "baton-sshd-"));
  // sshd reads authorized_keys as the login user.
  chmodSync(dir, 0o755);
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", join(dir, "host_ed25519")], {
    stdio: "ignore",
  });
  const [clientKeyPath, clientPub] = generateKey(dir, "client_ed25519");
  const authorized = join(dir, "authorized_keys");
  writeFileSync(authorized, `${clientPub}\n`, { mode: 0o644 });
  const hostPub = readFileSync(join(dir, "host_ed25519.pub"), "utf8").trim().split(/\s+/);
  const hostKeyPin = execFileSync(
    "ssh-keygen",
    ["-l", "-E", "sha256", "-f", join(dir, "host_ed25519.pub")],
    {
      encoding: "utf8",
    },
  ).split(/\s+/)[1] as string;
  const setEnv = Object.entries({ PATH: process.env.PATH ?? "/usr/bin:/bin", ...env })
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  const logFile = join(dir, "sshd.log");
  for (let tries = 0; tries < 3; tries++) {
    const port = await freePort();
    writeFileSync(
      join(dir, "sshd_config"),
      [
        `Port ${port}`,
        "ListenAddress 127.0.0.1",
        `HostKey ${join(dir, "host_ed25519")}`,
        `PidFile ${join(dir, "sshd.pid")}`,
        `AuthorizedKeysFile ${authorized}`,
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin no",
        "StrictModes no",
        "UsePAM no",
        "LogLevel VERBOSE",
        "MaxStartups 50",
        `SetEnv ${setEnv}`,
        "",
      ].join("\n"),
    );
    const log = openSync(logFile, "a");
    const child = spawn("/usr/sbin/sshd", ["-D", "-e", "-f", join(dir, "sshd_config")], {
      stdio: ["ignore", log, log],
    });
    try {
      await waitForBanner(port, Date.now() + 10_000);
    } catch (e) {
      child.kill("SIGKILL");
      if (tries === 2) throw e;
      continue;
    }
    return {
      host: "127.0.0.1",
      port,
      user,
      dir,
      hostKeyPin,
      knownHostsLine: `[127.0.0.1]:${port} ${hostPub[0]} ${hostPub[1]}`,
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
