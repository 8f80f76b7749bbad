// scripts/lib/ssh.ts against a real OpenSSH sshd on 127.0.0.1: host-key pinning (wrong pin fails
// before authentication), exit codes and signals (F08), deadlines (F11), key formats (F09).
import { readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fingerprintOf, hostKeyAlgorithms, parseHostKeyPin } from "../../scripts/lib/hostkey.ts";
import { connect, SshError } from "../../scripts/lib/ssh.ts";
import { generateKey, type Sshd, sharedTempDir, startSshd } from "../support/sshd.ts";

let sshd: Sshd;
let keysDir: string;
beforeAll(async () => {
  sshd = await startSshd();
  keysDir = sharedTempDir("baton-keys-");
});
afterAll(async () => {
  await sshd?.stop();
  if (keysDir) rmSync(keysDir, { recursive: true, force: true });
});

const target = (hostKey = sshd.hostKeyPin) => ({
  host: sshd.host,
  port: sshd.port,
  user: sshd.user,
  hostKey,
});

describe("host-key pins", () => {
  it("parses a fingerprint, a typed fingerprint and a known_hosts line to the same fingerprint", () => {
    expect(parseHostKeyPin(sshd.hostKeyPin)).toEqual({ fingerprint: sshd.hostKeyPin });
    expect(parseHostKeyPin(`ssh-ed25519 ${sshd.hostKeyPin}`)).toEqual({
      fingerprint: sshd.hostKeyPin,
      keyType: "ssh-ed25519",
    });
    expect(parseHostKeyPin(sshd.knownHostsLine)).toEqual({
      fingerprint: sshd.hostKeyPin,
      keyType: "ssh-ed25519",
    });
    const blob = Buffer.from(sshd.knownHostsLine.split(" ")[2] as string, "base64");
    expect(fingerprintOf(blob)).toBe(sshd.hostKeyPin);
    expect(hostKeyAlgorithms("ssh-ed25519")).toEqual(["ssh-ed25519"]);
  });

  it.each([
    "",
    "example.org",
    "@cert-authority * ssh-ed25519 AAAA",
    "SHA256:short",
    "host ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIA==",
  ])("refuses a pin that is neither form: %j", (pin) => {
    expect(() => parseHostKeyPin(pin)).toThrow(/^\[ssh\] host_key/);
  });
});

describe("connect + exec", () => {
  it("connects with a fingerprint pin and with a known_hosts line, and captures exit code, stdout, stderr", async () => {
    for (const pin of [sshd.hostKeyPin, sshd.knownHostsLine]) {
      const s = await connect(target(pin), {
        privateKey: sshd.clientKey,
        connectTimeoutMs: 10_000,
      });
      const r = await s.exec("echo out; echo err >&2; exit 7", 10_000);
      s.close();
      expect(r).toMatchObject({ exit_code: 7, signal: null, stdout: "out\n", timed_out: false });
      expect(r.stderr).toContain("err\n");
    }
  });

  it("a wrong pin fails with host_key_mismatch before authentication starts", async () => {
    const before = readFileSync(sshd.logFile, "utf8");
    const wrong = `SHA256:${"A".repeat(43)}`;
    const err = await connect(target(wrong), {
      privateKey: sshd.clientKey,
      connectTimeoutMs: 10_000,
    }).catch((e) => e);
    expect(err).toBeInstanceOf(SshError);
    expect(err.errorClass).toBe("host_key_mismatch");
    expect(err.authAttempted).toBe(false);
    const after = readFileSync(sshd.logFile, "utf8").slice(before.length);
    expect(after).not.toMatch(/Accepted publickey|Failed publickey|Postponed publickey/);
  });

  it("a known_hosts line of another key type restricts the algorithms and fails closed", async () => {
    const [, rsaPub] = generateKey(keysDir, "other_rsa", "rsa");
    const line = `[127.0.0.1]:${sshd.port} ${rsaPub.split(" ").slice(0, 2).join(" ")}`;
    const err = await connect(target(line), {
      privateKey: sshd.clientKey,
      connectTimeoutMs: 10_000,
    }).catch((e) => e);
    expect(err).toBeInstanceOf(SshError);
    expect(err.authAttempted).toBe(false);
  });

  it("F08: a remote process killed by TERM is exit_code null, signal TERM", async () => {
    const s = await connect(target(), { privateKey: sshd.clientKey, connectTimeoutMs: 10_000 });
    const r = await s.exec("exec sh -c 'kill -TERM $$'", 10_000);
    s.close();
    expect(r.exit_code).toBeNull();
    expect(r.signal).toBe("TERM");
  });

  it("F11: a command past its deadline is timed_out and the remote process is killed", async () => {
    const s = await connect(target(), { privateKey: sshd.clientKey, connectTimeoutMs: 10_000 });
    const marker = `baton-hang-${process.pid}`;
    const r = await s.exec(`exec sh -c 'sleep 40; echo ${marker}'`, 800);
    expect(r.timed_out).toBe(true);
    expect(r.exit_code).toBeNull();
    // The connection stays usable, and no `sleep 40` is left behind (bounded poll, 5 s; an exact match, since other tests may run e.g. `sleep 400`).
    let left = "";
    for (let i = 0; i < 25; i++) {
      left = (await s.exec("ps -eo args | grep -x 'sleep 40' || true", 5_000)).stdout;
      if (!left.trim()) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    s.close();
    expect(left.trim()).toBe("");
  });

  it("F11: a port that accepts TCP but never sends a banner fails with connect_timeout", async () => {
    const sockets: import("node:net").Socket[] = [];
    const silent: Server = createServer((sock) => sockets.push(sock));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const port = (silent.address() as { port: number }).port;
    try {
      const err = await connect(
        { host: "127.0.0.1", port, user: sshd.user, hostKey: sshd.hostKeyPin },
        { privateKey: sshd.clientKey, connectTimeoutMs: 700 },
      ).catch((e) => e);
      expect(err).toBeInstanceOf(SshError);
      expect(err.errorClass).toBe("connect_timeout");
      expect(sockets.length).toBe(1);
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });
});

describe("F09: key formats", () => {
  it("(b) ed25519 OpenSSH without passphrase, (c) RSA PEM, and ed25519 with its passphrase connect", async () => {
    const [edPath, edPub] = generateKey(keysDir, "ed_plain");
    const [rsaPath, rsaPub] = generateKey(keysDir, "rsa_pem", "rsa", { pem: true });
    const [encPath, encPub] = generateKey(keysDir, "ed_enc", "ed25519", {
      passphrase: "correct horse",
    });
    for (const pub of [edPub, rsaPub, encPub]) sshd.authorize(pub);
    expect(readFileSync(rsaPath, "utf8")).toMatch(/BEGIN RSA PRIVATE KEY/);
    const cases: [string, string | undefined][] = [
      [edPath, undefined],
      [rsaPath, undefined],
      [encPath, "correct horse"],
    ];
    for (const [path, passphrase] of cases) {
      const s = await connect(target(), {
        privateKey: readFileSync(path, "utf8"),
        passphrase,
        connectTimeoutMs: 10_000,
      });
      expect((await s.exec("echo ok", 10_000)).stdout).toBe("ok\n");
      s.close();
    }
  });

  it("(a) an encrypted key without passphrase fails with key_encrypted_no_passphrase before any connection", async () => {
    const [encPath] = generateKey(keysDir, "ed_enc2", "ed25519", { passphrase: "pw" });
    let connections = 0;
    const counter = createServer((sock) => {
      connections++;
      sock.destroy();
    });
    await new Promise<void>((r) => counter.listen(0, "127.0.0.1", r));
    const port = (counter.address() as { port: number }).port;
    try {
      const err = await connect(
        { host: "127.0.0.1", port, user: sshd.user, hostKey: sshd.hostKeyPin },
        { privateKey: readFileSync(encPath, "utf8"), connectTimeoutMs: 5_000 },
      ).catch((e) => e);
      expect(err.errorClass).toBe("key_encrypted_no_passphrase");
      expect(err.message).not.toMatch(/auth/i);
      expect(connections).toBe(0);
    } finally {
      counter.close();
    }
  });

  it("a wrong passphrase is key_invalid, not an authentication failure", async () => {
    const [encPath] = generateKey(keysDir, "ed_enc3", "ed25519", { passphrase: "right" });
    const err = await connect(target(), {
      privateKey: readFileSync(encPath, "utf8"),
      passphrase: "wrong",
      connectTimeoutMs: 5_000,
    }).catch((e) => e);
    expect(err.errorClass).toBe("key_invalid");
  });

  it("an unauthorised key is auth_failed", async () => {
    const [path] = generateKey(keysDir, "stranger");
    const err = await connect(target(), {
      privateKey: readFileSync(path, "utf8"),
      connectTimeoutMs: 10_000,
    }).catch((e) => e);
    expect(err.errorClass).toBe("auth_failed");
    expect(err.authAttempted).toBe(true);
  });
});
