/**
 * SSH client for the release tools, on `ssh2`. The host key is always checked against a pin
 * (see hostkey.ts) before authentication; there is no accept-any mode. Connecting has a hard
 * deadline that also covers a port that accepts TCP but never sends a banner (F11), and every
 * remote command has its own deadline. Exit code and signal are captured as the server reports
 * them: `exit_code: null` with a signal (F08), or no exit status at all, is never success.
 */
import ssh2 from "ssh2";
import { fingerprintOf, hostKeyAlgorithms, parseHostKeyPin } from "./hostkey.ts";
import { inspectKey } from "./key.ts";

// ssh2 is CommonJS: named imports type-check but fail at run time under ESM (TOOLCHAIN.md).
const { Client } = ssh2;

/** Most characters of stdout and of stderr kept per remote command (the tail). */
export const MAX_CAPTURE_CHARS = 1_000_000;

/** Failure classes reported in checks.json (`class`). */
export type SshErrorClass =
  | "host_key_invalid"
  | "host_key_mismatch"
  | "key_encrypted_no_passphrase"
  | "key_invalid"
  | "connect_timeout"
  | "connect_failed"
  | "auth_failed";

/** Error with a failure class; message starts with `[ssh]` and says what to do. */
export class SshError extends Error {
  constructor(
    readonly errorClass: SshErrorClass,
    message: string,
    /** Whether authentication had started when this happened (false for a host-key mismatch). */
    readonly authAttempted = false,
  ) {
    super(message);
    this.name = "SshError";
  }
}

/** Where to connect. `hostKey` is a pin: `SHA256:…` (optionally type-prefixed) or a known_hosts line. */
export interface SshTarget {
  host: string;
  port: number;
  user: string;
  hostKey: string;
}

/** Credentials and the connect deadline (ms, covers TCP, banner, key exchange and auth). */
export interface ConnectOptions {
  privateKey: string;
  passphrase?: string;
  connectTimeoutMs: number;
}

/** Outcome of one remote command. `duration_ms` in ms. */
export interface ExecResult {
  exit_code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  timed_out: boolean;
  duration_ms: number;
}

/** An authenticated connection. */
export interface SshSession {
  /** Runs `command` (a remote sh command line) with a deadline in ms. Never rejects on exit status. */
  exec(command: string, timeoutMs: number): Promise<ExecResult>;
  close(): void;
}

/**
 * Connects and authenticates. Rejects with {@link SshError}: `host_key_invalid` (unparseable pin),
 * `key_encrypted_no_passphrase` (checked before any connection), `key_invalid`,
 * `host_key_mismatch` (before authentication), `connect_timeout`, `connect_failed`, `auth_failed`.
 */
export function connect(target: SshTarget, opts: ConnectOptions): Promise<SshSession> {
  let pin: ReturnType<typeof parseHostKeyPin>;
  try {
    pin = parseHostKeyPin(target.hostKey);
  } catch (e) {
    return Promise.reject(new SshError("host_key_invalid", (e as Error).message));
  }
  const info = inspectKey(opts.privateKey);
  if (info.encrypted && !opts.passphrase) {
    return Promise.reject(
      new SshError(
        "key_encrypted_no_passphrase",
        "[ssh] the SSH private key is encrypted and no passphrase is configured; set the ssh-passphrase input (secret) or use a key without a passphrase",
      ),
    );
  }
  const parsed = ssh2.utils.parseKey(opts.privateKey, opts.passphrase);
  if (parsed instanceof Error) {
    const bad = /passphrase|decrypt|bad/i.test(parsed.message) && info.encrypted;
    return Promise.reject(
      new SshError(
        "key_invalid",
        bad
          ? "[ssh] the SSH private key could not be decrypted with the configured passphrase; check the ssh-passphrase secret"
          : `[ssh] the SSH private key could not be read (${parsed.message}); paste an OpenSSH or PEM private key`,
      ),
    );
  }

  return new Promise((resolve, reject) => {
    const client = new Client();
    let settled = false;
    let hostKeyRejected = false;
    let authAttempted = false;
    const fail = (err: SshError) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client.destroy();
      reject(err);
    };
    const where = `${target.user}@${target.host}:${target.port}`;
    const timer = setTimeout(
      () =>
        fail(
          new SshError(
            "connect_timeout",
            `[ssh] connecting to ${where} took longer than ${opts.connectTimeoutMs} ms (no banner, key exchange or auth); check the host, port and firewall`,
            authAttempted,
          ),
        ),
      opts.connectTimeoutMs,
    );
    client.on("ready", () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(session(client));
    });
    client.on("error", (err: Error & { level?: string }) => {
      if (hostKeyRejected) {
        fail(
          new SshError(
            "host_key_mismatch",
            `[ssh] host key of ${where} does not match the pinned ${pin.fingerprint}; if the machine was rebuilt, update the lane's host_key (ssh-keyscan + ssh-keygen -l -E sha256)`,
            false,
          ),
        );
      } else if (err.level === "client-authentication") {
        fail(
          new SshError(
            "auth_failed",
            `[ssh] ${where} refused the key for user ${target.user}; add the public key to that user's authorized_keys`,
            true,
          ),
        );
      } else {
        fail(
          new SshError(
            "connect_failed",
            `[ssh] cannot connect to ${where}: ${err.message}`,
            authAttempted,
          ),
        );
      }
    });
    client.on("close", () =>
      fail(
        new SshError(
          "connect_failed",
          `[ssh] ${where} closed the connection during setup`,
          authAttempted,
        ),
      ),
    );
    const algorithms = hostKeyAlgorithms(pin.keyType);
    client.connect({
      host: target.host,
      port: target.port,
      username: target.user,
      privateKey: opts.privateKey,
      passphrase: opts.passphrase,
      readyTimeout: opts.connectTimeoutMs,
      ...(algorithms ? { algorithms: { serverHostKey: algorithms as never } } : {}),
      hostVerifier: (key: Buffer) => {
        const ok = fingerprintMatches(key, pin.fingerprint);
        if (!ok) hostKeyRejected = true;
        return ok;
      },
      authHandler: (_methodsLeft, _partial, next) => {
        // Only the configured key; recording that auth began lets tests prove a wrong pin stops earlier.
        if (authAttempted) return next(false as never);
        authAttempted = true;
        next({
          type: "publickey",
          username: target.user,
          key: opts.privateKey,
          passphrase: opts.passphrase,
        } as never);
      },
    });
  });
}

function fingerprintMatches(key: Buffer, fingerprint: string): boolean {
  // A fingerprint is public data: a plain comparison is fine.
  return fingerprintOf(key) === fingerprint;
}

function session(client: InstanceType<typeof Client>): SshSession {
  return {
    close: () => client.end(),
    exec: (command, timeoutMs) =>
      new Promise<ExecResult>((resolve) => {
        const started = Date.now();
        let stdout = "";
        let stderr = "";
        let exitCode: number | null = null;
        let signal: string | null = null;
        let done = false;
        let channel: ssh2.ClientChannel | undefined;
        const finish = (timedOut: boolean) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          resolve({
            exit_code: exitCode,
            signal,
            stdout,
            stderr,
            timed_out: timedOut,
            duration_ms: Date.now() - started,
          });
        };
        const timer = setTimeout(() => {
          // Ask the server to kill the remote process, then give up on the channel either way.
          try {
            channel?.signal("KILL");
            channel?.close();
          } catch {}
          finish(true);
        }, timeoutMs);
        client.exec(command, (err, stream) => {
          if (err) {
            stderr += `[ssh] could not start the remote command: ${err.message}\n`;
            finish(false);
            return;
          }
          channel = stream;
          // Bounded capture: keep the last MAX_CAPTURE_CHARS of each stream.
          stream.on("data", (d: Buffer) => {
            stdout = (stdout + d.toString("utf8")).slice(-MAX_CAPTURE_CHARS);
          });
          stream.stderr.on("data", (d: Buffer) => {
            stderr = (stderr + d.toString("utf8")).slice(-MAX_CAPTURE_CHARS);
          });
          stream.on("exit", (code: number | null, sig?: string) => {
            exitCode = typeof code === "number" ? code : null;
            // ssh2 reports "SIGTERM"; RFC 4254 §6.10 and checks.json use the bare name "TERM".
            signal = typeof sig === "string" ? sig.replace(/^SIG/, "") : null;
          });
          stream.on("close", () => finish(false));
        });
      }),
  };
}
