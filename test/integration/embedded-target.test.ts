/**
 * The embedded SSH target with real SSH clients (ssh2 and OpenSSH): host key pin, public-key
 * auth, exec in the sandbox, exit status, stderr and exit-signal (failure case F08).
 */
import { execFile } from "node:child_process";
import { createHash, generateKeyPairSync } from "node:crypto";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import ssh2 from "ssh2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type EmbeddedTarget,
  generateEd25519,
  sha256Fingerprint,
  startEmbeddedTarget,
} from "../../engine/src/embedded-target/index.ts";

const { Client } = ssh2;

interface ExecOutcome {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/** Connects with `privateKey`, checking the host key against `pin`, and runs one command. */
function sshExec(
  t: EmbeddedTarget,
  command: string,
  opts: {
    privateKey?: string;
    passphrase?: string;
    pin?: string;
    user?: string;
    stdin?: string;
    env?: Record<string, string>;
  } = {},
): Promise<ExecOutcome> {
  return new Promise((resolve, reject) => {
    const conn = new Client();
    const timer = setTimeout(() => {
      conn.end();
      reject(new Error("ssh exec did not finish within 20 s"));
    }, 20_000);
    conn.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    conn.on("ready", () => {
      conn.exec(command, { env: opts.env ?? {} }, (err, stream) => {
        if (err) return reject(err);
        const out: ExecOutcome = { code: null, signal: null, stdout: "", stderr: "" };
        stream.on("data", (d: Buffer) => {
          out.stdout += d.toString();
        });
        stream.stderr.on("data", (d: Buffer) => {
          out.stderr += d.toString();
        });
        stream.on("exit", (code: number | null, signal?: string) => {
          out.code = code;
          out.signal = signal ?? null;
        });
        stream.on("close", () => {
          clearTimeout(timer);
          conn.end();
          resolve(out);
        });
        if (opts.stdin !== undefined) stream.end(opts.stdin);
      });
    });
    conn.connect({
      host: t.host,
      port: t.port,
      username: opts.user ?? t.user,
      privateKey: opts.privateKey ?? t.clientPrivateKey,
      passphrase: opts.passphrase,
      readyTimeout: 10_000,
      hostVerifier: (key: Buffer) =>
        `SHA256:${createHash("sha256").update(key).digest("base64").replace(/=+$/, "")}` ===
        (opts.pin ?? t.hostKeyPin),
    });
  });
}

let dir: string;
let target: EmbeddedTarget;

beforeAll(async () => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), "baton-target-")));
  target = await startEmbeddedTarget({ sandboxDir: join(dir, "sandbox") });
});
afterAll(async () => {
  await target?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("embedded SSH target", () => {
  it("closes even when a stand-in server's pid file cannot be read (it vanished mid-close)", async () => {
    // CI once saw the health server remove servers/daemon.pid between close()'s listing of the
    // folder and its read (ENOENT thrown from close). An entry that is not a readable file
    // stands in for that race, deterministically.
    const own = await startEmbeddedTarget({ sandboxDir: join(dir, "close-race") });
    mkdirSync(join(own.standinDir, "servers", "gone.pid"), { recursive: true });
    await expect(own.close()).resolves.toBeUndefined();
  });

  it("exposes a SHA256 pin that matches its public key, as ssh-keygen prints it", async () => {
    expect(target.hostKeyPin).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
    expect(sha256Fingerprint(target.hostPublicKey)).toBe(target.hostKeyPin);
    const pubFile = join(dir, "host.pub");
    writeFileSync(pubFile, `${target.hostPublicKey}\n`);
    const printed = await new Promise<string>((resolve, reject) =>
      execFile("ssh-keygen", ["-l", "-E", "sha256", "-f", pubFile], (err, stdout) =>
        err ? reject(err) : resolve(stdout),
      ),
    );
    expect(printed.split(" ")[1]).toBe(target.hostKeyPin);
  });

  it("runs a command with /bin/sh in the sandbox: exit code, stdout and stderr", async () => {
    const r = await sshExec(target, 'echo "out $(pwd) $HOME"; echo oops >&2; exit 3');
    expect(r.code).toBe(3);
    expect(r.signal).toBeNull();
    expect(r.stdout).toBe(`out ${target.sandboxDir} ${target.sandboxDir}\n`);
    expect(r.stderr).toBe("oops\n");
    expect(target.commands).toContain('echo "out $(pwd) $HOME"; echo oops >&2; exit 3');
  });

  it("delivers output that reaches it after the command exited, before the exit status", async () => {
    // On a loaded machine a command's last output can reach the target seconds after its exit
    // (the shell runs off-thread; the chaos harness saw deploy.sh's pull line lost this way at
    // load 38, "printed no result for pull (exit code 0)"). A background child holding stdout
    // two seconds past the exit stands in for that late output.
    const r = await sshExec(target, "(sleep 2; echo late) & echo early");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("early\nlate\n");
  });

  it("puts the container CLI stand-in first on PATH and installs deploy.sh", async () => {
    const r = await sshExec(
      target,
      "command -v docker; command -v deploy.sh; echo $BATON_STANDIN_DIR",
    );
    expect(r.code).toBe(0);
    const [docker, deploy, standinDir] = r.stdout.trim().split("\n");
    expect(docker).toMatch(/scripts\/target\/standin\/docker$/);
    expect(deploy).toBe(join(target.sandboxDir, "bin/deploy.sh"));
    expect(standinDir).toBe(join(target.sandboxDir, "standin"));
  });

  it("reports a command killed by a signal as exit-signal TERM with no exit code", async () => {
    const r = await sshExec(target, "echo before; kill -TERM $$; echo after");
    expect(r.code).toBeNull();
    // The wire carries "TERM" (RFC 4254 §6.10); ssh2's client reports it with the SIG prefix.
    expect(r.signal).toBe("SIGTERM");
    expect(r.stdout).toBe("before\n");
  });

  it("forwards a client's signal request, and hangs up a command whose client went away", async () => {
    const conn = new Client();
    await new Promise<void>((ok, fail) => {
      conn.once("ready", () => ok());
      conn.once("error", fail);
      conn.connect({
        host: target.host,
        port: target.port,
        username: target.user,
        privateKey: target.clientPrivateKey,
        hostVerifier: () => true,
      });
    });
    const startSleeper = () =>
      new Promise<{ pid: number; stream: ssh2.ClientChannel }>((ok, fail) => {
        conn.exec("echo $$; exec sleep 30", (err, stream) => {
          if (err) return fail(err);
          stream.once("data", (d: Buffer) => ok({ pid: Number(d.toString().trim()), stream }));
        });
      });
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    // 1. signal request: the command dies by TERM and the client is told so.
    const a = await startSleeper();
    const exited = new Promise<unknown[]>((ok) =>
      a.stream.once("exit", (...args: unknown[]) => ok(args)),
    );
    a.stream.signal("TERM");
    const [code, signal] = await exited;
    expect(code).toBeNull();
    expect(signal).toBe("SIGTERM");
    // 2. the client goes away: the command is hung up on (bounded wait: 100 x 50 ms).
    const b = await startSleeper();
    expect(alive(b.pid)).toBe(true);
    conn.end();
    for (let i = 0; i < 100 && alive(b.pid); i++) await new Promise((ok) => setTimeout(ok, 50));
    expect(alive(b.pid)).toBe(false);
  });

  it("streams stdin to the command and passes BATON_* environment requests only", async () => {
    const r = await sshExec(
      target,
      'cat > uploaded.txt; wc -c < uploaded.txt; echo "[$BATON_X] [$EVIL]"',
      {
        stdin: "hello target\n",
        env: { BATON_X: "yes", EVIL: "no" },
      },
    );
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n").map((l) => l.trim())).toEqual(["13", "[yes] []", ""]);
    expect(readFileSync(join(target.sandboxDir, "uploaded.txt"), "utf8")).toBe("hello target\n");
  });

  it("refuses a key it did not generate, a wrong user, and a client that expects another host key", async () => {
    const other = ssh2.utils.generateKeyPairSync("ed25519");
    await expect(sshExec(target, "true", { privateKey: other.private })).rejects.toThrow(
      /authentication methods failed/,
    );
    await expect(sshExec(target, "true", { user: "root" })).rejects.toThrow(
      /authentication methods failed/,
    );
    await expect(
      sshExec(target, "true", { pin: "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }),
    ).rejects.toThrow(/verification failed/i);
  });

  it("works with OpenSSH's ssh client, pinning the host key through known_hosts", async () => {
    const keyFile = join(dir, "id_ed25519");
    writeFileSync(keyFile, target.clientPrivateKey);
    chmodSync(keyFile, 0o600);
    const knownHosts = join(dir, "known_hosts");
    writeFileSync(knownHosts, `${target.knownHostsLine}\n`);
    const run = (cmd: string) =>
      new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
        execFile(
          "ssh",
          [
            "-F",
            "/dev/null",
            "-i",
            keyFile,
            "-p",
            String(target.port),
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            `UserKnownHostsFile=${knownHosts}`,
            "-o",
            "ConnectTimeout=10",
            `${target.user}@127.0.0.1`,
            cmd,
          ],
          { timeout: 20_000 },
          (err, stdout, stderr) =>
            resolve({
              code: err ? Number((err as { code?: number }).code ?? 255) : 0,
              stdout,
              stderr,
            }),
        );
      });
    const r = await run("echo hi; echo warn >&2; exit 4");
    expect(r.code).toBe(4);
    expect(r.stdout).toBe("hi\n");
    expect(r.stderr).toContain("warn");
    writeFileSync(
      knownHosts,
      `[127.0.0.1]:${target.port} ${ssh2.utils.generateKeyPairSync("ed25519").public.split(" ").slice(0, 2).join(" ")}\n`,
    );
    const refused = await run("echo should-not-run");
    expect(refused.code).toBe(255);
    expect(refused.stdout).toBe("");
  });

  it("accepts an encrypted client key with its passphrase and an extra RSA key in PEM", async () => {
    const rsa = generateKeyPairSync("rsa", {
      modulusLength: 2048,
      privateKeyEncoding: { type: "pkcs1", format: "pem" },
      publicKeyEncoding: { type: "spki", format: "pem" },
    });
    const second = await startEmbeddedTarget({
      sandboxDir: join(dir, "sandbox2"),
      clientKeyPassphrase: "correct horse",
      extraAuthorizedKeys: [rsa.privateKey],
    });
    try {
      expect(second.clientPrivateKey).toContain("BEGIN OPENSSH PRIVATE KEY");
      const a = await sshExec(second, "echo ok", { passphrase: "correct horse" });
      expect(a).toMatchObject({ code: 0, stdout: "ok\n" });
      const b = await sshExec(second, "echo rsa", { privateKey: rsa.privateKey });
      expect(b).toMatchObject({ code: 0, stdout: "rsa\n" });
    } finally {
      await second.close();
    }
  });

  it("several targets (one per lane) can share one client key, each with its own host key", async () => {
    const shared = generateEd25519("fleet-deploy-key");
    const a = await startEmbeddedTarget({ sandboxDir: join(dir, "lane-a"), clientKey: shared });
    const b = await startEmbeddedTarget({ sandboxDir: join(dir, "lane-b"), clientKey: shared });
    try {
      expect(a.hostKeyPin).not.toBe(b.hostKeyPin);
      for (const t of [a, b]) {
        expect(await sshExec(t, "pwd", { privateKey: shared.privateKey })).toMatchObject({
          code: 0,
          stdout: `${t.sandboxDir}\n`,
        });
      }
      // A client pinned to lane a's host key refuses lane b.
      await expect(sshExec(b, "true", { pin: a.hostKeyPin })).rejects.toThrow(
        /verification failed/i,
      );
    } finally {
      await a.close();
      await b.close();
    }
  });
});
