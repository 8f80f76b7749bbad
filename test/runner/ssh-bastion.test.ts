// Jump hosts (ProxyJump) and host-key pins on hosts offering several key types, against two real
// OpenSSH sshd: the target listens on 127.0.0.2 and, as root (CI), an iptables rule lets only the
// bastion's session process reach it (test/support/bastion.ts says how). Both keys are pinned; a
// wrong pin on either hop aborts before authentication.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, SshError, type SshTarget } from "../../scripts/lib/ssh.ts";
import { type BastionPair, startBastionPair } from "../support/bastion.ts";

let pair: BastionPair;
beforeAll(async () => {
  pair = await startBastionPair({}, { hostKeyTypes: ["ecdsa", "rsa"] });
}, 60_000);
afterAll(async () => {
  await pair?.stop();
});

const OTHER_PIN = "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

function via(targetKey: string, bastionKey = pair.bastion.hostKeyPin): SshTarget {
  return {
    host: pair.target.host,
    port: pair.target.port,
    user: pair.target.user,
    hostKey: targetKey,
    jump: {
      host: pair.bastion.host,
      port: pair.bastion.port,
      user: pair.bastion.user,
      hostKey: bastionKey,
    },
  };
}
const opts = () => ({ privateKey: pair.bastion.clientKey, connectTimeoutMs: 15_000 });
const pubLine = (type: string) =>
  readFileSync(join(pair.target.dir, `host_${type}.pub`), "utf8").trim();
/** Public-key authentication attempts the target's sshd logged so far. */
const targetAuthLines = () =>
  readFileSync(pair.target.logFile, "utf8")
    .split("\n")
    .filter((l) => /publickey/i.test(l));

describe("jump host", () => {
  it("the target is not reachable directly (enforced as root)", async () => {
    if (process.getuid?.() === 0) expect(pair.enforced).toBe(true);
    if (!pair.enforced) return;
    const direct = await connect(
      {
        host: pair.target.host,
        port: pair.target.port,
        user: pair.target.user,
        hostKey: pair.target.hostKeyPin,
      },
      opts(),
    ).then(
      (s) => {
        s.close();
        return null;
      },
      (e: SshError) => e,
    );
    expect(direct?.errorClass).toBe("connect_failed");
  });

  it("runs a command on the target through the bastion with both keys pinned", async () => {
    const s = await connect(via(pair.target.hostKeyPin), opts());
    try {
      const r = await s.exec("echo on-target; echo $SSH_CONNECTION", 10_000);
      expect(r.exit_code).toBe(0);
      const [first, conn] = r.stdout.trim().split("\n");
      expect(first).toBe("on-target");
      // The target saw the connection arrive on its own address, from the bastion's side.
      expect(conn?.split(" ")[2]).toBe("127.0.0.2");
    } finally {
      s.close();
    }
  });

  it("a wrong bastion pin aborts before authentication and never reaches the target", async () => {
    const before = readFileSync(pair.target.logFile, "utf8").length;
    const e = await connect(via(pair.target.hostKeyPin, OTHER_PIN), opts()).catch((x) => x);
    expect(e).toBeInstanceOf(SshError);
    expect(e.errorClass).toBe("host_key_mismatch");
    expect(e.authAttempted).toBe(false);
    expect(e.message).toMatch(/bastion .*does not match the pinned/);
    expect(readFileSync(pair.target.logFile, "utf8").slice(before)).not.toMatch(/Connection from/);
  });

  it("a wrong target pin aborts before authenticating at the target", async () => {
    const before = targetAuthLines().length;
    const e = await connect(via(OTHER_PIN), opts()).catch((x) => x);
    expect(e.errorClass).toBe("host_key_mismatch");
    expect(e.authAttempted).toBe(false);
    expect(e.message).not.toMatch(/bastion/);
    expect(targetAuthLines().length).toBe(before);
  });
});

describe("host-key pins on a host offering ed25519, ecdsa and rsa", () => {
  it.each([
    ["bare SHA256 of the RSA key", () => pair.target.hostKeyPins.rsa as string],
    ["typed ssh-rsa SHA256", () => `ssh-rsa ${pair.target.hostKeyPins.rsa}`],
    ["known_hosts line of the RSA key", () => `[127.0.0.2]:${pair.target.port} ${pubLine("rsa")}`],
    ["bare SHA256 of the ECDSA key", () => pair.target.hostKeyPins.ecdsa as string],
    [
      "typed ecdsa SHA256",
      () => `${pubLine("ecdsa").split(" ")[0]} ${pair.target.hostKeyPins.ecdsa}`,
    ],
    ["bare SHA256 of the ed25519 key", () => pair.target.hostKeyPin],
    ["typed ssh-ed25519 SHA256", () => `ssh-ed25519 ${pair.target.hostKeyPin}`],
  ])("%s connects", async (_name, pin) => {
    const s = await connect(via(pin()), opts());
    const r = await s.exec("true", 10_000);
    s.close();
    expect(r.exit_code).toBe(0);
  });

  it("a bare pin matching none of the offered keys aborts before authentication", async () => {
    const before = targetAuthLines().length;
    const e = await connect(via(OTHER_PIN), opts()).catch((x) => x);
    expect(e.errorClass).toBe("host_key_mismatch");
    expect(e.authAttempted).toBe(false);
    // Every type the host offers was seen, none matched.
    expect(e.message).toMatch(/ssh-ed25519/);
    expect(e.message).toMatch(/ssh-rsa/);
    expect(targetAuthLines().length).toBe(before);
  });

  it("a typed pin of the wrong key of that type aborts before authentication", async () => {
    const e = await connect(via(`ssh-rsa ${pair.target.hostKeyPin}`), opts()).catch((x) => x);
    expect(e.errorClass).toBe("host_key_mismatch");
    expect(e.authAttempted).toBe(false);
  });
});
