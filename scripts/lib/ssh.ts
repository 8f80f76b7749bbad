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

/**
 * One SSH hop. `hostKey` is a pin: `SHA256:…` (optionally type-prefixed, e.g.
 * `ssh-rsa SHA256:…`) or a known_hosts line.
 */
export interface SshHop {
  host: string;
  port: number;
  user: string;
  hostKey: string;
}

/** Where to connect; with `jump`, through that bastion (OpenSSH ProxyJump), both keys pinned. */
export interface SshTarget extends SshHop {
  jump?: SshHop;
}

/** Credentials and the connect deadline (ms, covers TCP, banner, key exchange and auth; with a
 * jump host, both hops together). The same key authenticates at the bastion and the target. */
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

type Client = InstanceType<typeof ssh2.Client>;

/**
 * Host key types in the order ssh2 prefers them. A bare `SHA256:` pin cannot say its type, and
 * the server presents only the one key type negotiated, so a bare pin of (say) the RSA key of a
 * host that also has ed25519 is tried again with the types not yet seen, each attempt aborted
 * before authentication, until the pinned key is presented or every type was seen.
 */
const KEY_TYPE_ORDER = [
  "ssh-ed25519",
  "ecdsa-sha2-nistp256",
  "ecdsa-sha2-nistp384",
  "ecdsa-sha2-nistp521",
  "ssh-rsa",
] as const;

/** Key type named inside a host key blob (RFC 4253 §6.6), e.g. `ssh-ed25519`. */
function blobType(key: Buffer): string {
  const len = key.length >= 4 ? key.readUInt32BE(0) : 0;
  return key.subarray(4, 4 + Math.min(len, 64)).toString("latin1");
}

/** Raised inside one attempt when the presented key is not the pin; carries its type. */
class PinMismatch extends Error {
  constructor(readonly presentedType: string) {
    super("host key mismatch");
  }
}

/**
 * Connects and authenticates (through `target.jump` when set). Rejects with {@link SshError}:
 * `host_key_invalid` (unparseable pin), `key_encrypted_no_passphrase` (checked before any
 * connection), `key_invalid`, `host_key_mismatch` (before authentication), `connect_timeout`,
 * `connect_failed`, `auth_failed`. Messages name the hop (`bastion …` or the target).
 */
export async function connect(target: SshTarget, opts: ConnectOptions): Promise<SshSession> {
  const pins: ReturnType<typeof parseHostKeyPin>[] = [];
  for (const [hop, label] of [
    [target, "host_key"],
    ...(target.jump ? [[target.jump, "jump.host_key"] as const] : []),
  ] as const) {
    try {
      pins.push(parseHostKeyPin(hop.hostKey));
    } catch (e) {
      throw new SshError(
        "host_key_invalid",
        (e as Error).message.replace("host_key", label === "host_key" ? "host_key" : label),
      );
    }
  }
  const info = inspectKey(opts.privateKey);
  if (info.encrypted && !opts.passphrase) {
    throw new SshError(
      "key_encrypted_no_passphrase",
      "[ssh] the SSH private key is encrypted and no passphrase is configured; set the ssh-passphrase input (secret) or use a key without a passphrase",
    );
  }
  const parsed = ssh2.utils.parseKey(opts.privateKey, opts.passphrase);
  if (parsed instanceof Error) {
    const bad = /passphrase|decrypt|bad/i.test(parsed.message) && info.encrypted;
    throw new SshError(
      "key_invalid",
      bad
        ? "[ssh] the SSH private key could not be decrypted with the configured passphrase; check the ssh-passphrase secret"
        : `[ssh] the SSH private key could not be read (${parsed.message}); paste an OpenSSH or PEM private key`,
    );
  }
  const deadline = Date.now() + opts.connectTimeoutMs;
  if (!target.jump) {
    const client = await connectPinned(target, "", opts, deadline);
    return session(client, []);
  }
  const jump = target.jump;
  const bastion = await connectPinned(jump, "bastion ", opts, deadline);
  try {
    const where = `${target.user}@${target.host}:${target.port}`;
    const client = await connectPinned(target, "", opts, deadline, () =>
      forwardOut(bastion, target.host, target.port, where, jump, deadline),
    );
    return session(client, [bastion]);
  } catch (e) {
    bastion.end();
    throw e;
  }
}

/** A TCP channel from the bastion to host:port (the `direct-tcpip` request ProxyJump makes). */
function forwardOut(
  bastion: Client,
  host: string,
  port: number,
  where: string,
  jump: SshHop,
  deadline: number,
): Promise<import("node:stream").Duplex> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(
          new SshError(
            "connect_timeout",
            `[ssh] the bastion ${jump.host}:${jump.port} did not open a channel to ${where} in time`,
          ),
        ),
      Math.max(1, deadline - Date.now()),
    );
    bastion.forwardOut("127.0.0.1", 0, host, port, (err, stream) => {
      clearTimeout(timer);
      if (err) {
        reject(
          new SshError(
            "connect_failed",
            `[ssh] the bastion ${jump.user}@${jump.host}:${jump.port} could not reach ${where}: ${err.message}; check that the bastion can reach the target's SSH port and allows TCP forwarding (AllowTcpForwarding)`,
          ),
        );
      } else resolve(stream);
    });
  });
}

/**
 * Connects one hop with its pin, retrying with other host key types for a bare fingerprint
 * (see KEY_TYPE_ORDER). `sock` opens the transport (a channel through the bastion).
 */
async function connectPinned(
  hop: SshHop,
  label: "" | "bastion ",
  opts: ConnectOptions,
  deadline: number,
  sock?: () => Promise<import("node:stream").Duplex>,
): Promise<Client> {
  const pin = parseHostKeyPin(hop.hostKey);
  const where = `${label}${hop.user}@${hop.host}:${hop.port}`;
  const seen: string[] = [];
  let algorithms = hostKeyAlgorithms(pin.keyType);
  for (let attempt = 0; attempt < KEY_TYPE_ORDER.length; attempt++) {
    try {
      return await connectOnce(hop, where, pin.fingerprint, opts, deadline, algorithms, sock);
    } catch (e) {
      const noFormat =
        e instanceof SshError &&
        e.errorClass === "connect_failed" &&
        /host key format|no matching/i.test(e.message);
      if (!(e instanceof PinMismatch) && !(noFormat && seen.length > 0)) throw e;
      if (e instanceof PinMismatch) seen.push(e.presentedType);
      const rest = KEY_TYPE_ORDER.filter((t) => !seen.includes(t));
      // A typed pin names the one type to ask for; a bare pin tries the types not yet seen.
      if (pin.keyType || noFormat || rest.length === 0) {
        throw new SshError(
          "host_key_mismatch",
          `[ssh] host key of ${where} does not match the pinned ${pin.fingerprint} (it presented ${seen.join(", ")}); if the machine was rebuilt, update the lane's ${label ? "jump." : ""}host_key (ssh-keyscan + ssh-keygen -l -E sha256)`,
          false,
        );
      }
      algorithms = rest.flatMap((t) => hostKeyAlgorithms(t) ?? []);
    }
  }
  throw new SshError("host_key_mismatch", `[ssh] host key of ${where} does not match the pin`);
}

function connectOnce(
  hop: SshHop,
  where: string,
  fingerprint: string,
  opts: ConnectOptions,
  deadline: number,
  algorithms: string[] | undefined,
  sock?: () => Promise<import("node:stream").Duplex>,
): Promise<Client> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    let settled = false;
    let presented: string | undefined;
    let authAttempted = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client.destroy();
      reject(err);
    };
    const budget = Math.max(1, deadline - Date.now());
    const timer = setTimeout(
      () =>
        fail(
          new SshError(
            "connect_timeout",
            `[ssh] connecting to ${where} took longer than ${opts.connectTimeoutMs} ms (no banner, key exchange or auth); check the host, port and firewall`,
            authAttempted,
          ),
        ),
      budget,
    );
    client.on("ready", () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(client);
    });
    client.on("error", (err: Error & { level?: string }) => {
      if (presented !== undefined) {
        fail(new PinMismatch(presented));
      } else if (err.level === "client-authentication") {
        fail(
          new SshError(
            "auth_failed",
            `[ssh] ${where} refused the key for user ${hop.user}; add the public key to that user's authorized_keys`,
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
        presented !== undefined
          ? new PinMismatch(presented)
          : new SshError(
              "connect_failed",
              `[ssh] ${where} closed the connection during setup`,
              authAttempted,
            ),
      ),
    );
    const start = (stream?: import("node:stream").Duplex) =>
      client.connect({
        ...(stream ? { sock: stream as never } : { host: hop.host, port: hop.port }),
        username: hop.user,
        privateKey: opts.privateKey,
        passphrase: opts.passphrase,
        readyTimeout: budget,
        ...(algorithms ? { algorithms: { serverHostKey: algorithms as never } } : {}),
        hostVerifier: (key: Buffer) => {
          const ok = fingerprintMatches(key, fingerprint);
          if (!ok) presented = blobType(key);
          return ok;
        },
        authHandler: (_methodsLeft, _partial, next) => {
          // Only the configured key; recording that auth began lets tests prove a wrong pin stops earlier.
          if (authAttempted) return next(false as never);
          authAttempted = true;
          next({
            type: "publickey",
            username: hop.user,
            key: opts.privateKey,
            passphrase: opts.passphrase,
          } as never);
        },
      });
    if (sock) sock().then(start, fail);
    else start();
  });
}

function fingerprintMatches(key: Buffer, fingerprint: string): boolean {
  // A fingerprint is public data: a plain comparison is fine.
  return fingerprintOf(key) === fingerprint;
}

function session(client: Client, hops: Client[]): SshSession {
  return {
    close: () => {
      client.end();
      for (const h of hops) h.end();
    },
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
