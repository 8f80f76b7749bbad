/**
 * The embedded target's key generation must never hand out a key ssh2 cannot parse: ssh2 1.17
 * writes about 1 ed25519 pair in 256 with a truncated key, which made the chaos harness (about
 * 40 keys per run) and the e2e tests fail at random with "Malformed OpenSSH private key".
 */
import ssh2 from "ssh2";
import { describe, expect, it } from "vitest";
import { generateEd25519 } from "../../engine/src/embedded-target/keys.ts";

const { utils } = ssh2;

describe("embedded target keys", () => {
  it("1,500 generated pairs all parse, with and without a passphrase", () => {
    let bad = 0;
    for (let i = 0; i < 1_500; i++) {
      const pass = i % 500 === 0 ? "chaos-passphrase" : undefined;
      const k = generateEd25519("chaos", pass);
      if (utils.parseKey(k.privateKey, pass) instanceof Error) bad++;
      if (utils.parseKey(k.publicKey) instanceof Error) bad++;
    }
    expect(bad).toBe(0);
  }, 60_000);
});
