// Key text handling (F09 detection, F10 normalisation) without any connection.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { inspectKey, normaliseKey } from "../../scripts/lib/key.ts";

const dir = mkdtempSync(join(tmpdir(), "baton-keytest-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function gen(name: string, args: string[]): string {
  execFileSync("ssh-keygen", ["-q", "-f", join(dir, name), "-C", "t", ...args], {
    stdio: "ignore",
  });
  return readFileSync(join(dir, name), "utf8");
}

describe("normaliseKey (F10)", () => {
  const key = gen("k1", ["-t", "ed25519", "-N", ""]);
  it.each([
    ["as is", key],
    ["CRLF", key.replace(/\n/g, "\r\n")],
    ["no final newline", key.trimEnd()],
    ["surrounding spaces and blank lines", `\n  \n   ${key.trimEnd()}   \n\n  `],
    ["several trailing newlines", `${key}\n\n\n`],
  ])("%s -> LF, exactly one trailing newline", (_name, raw) => {
    const out = normaliseKey(raw);
    expect(out).toBe(key);
    expect(out).not.toContain("\r");
    expect(out.endsWith("\n") && !out.endsWith("\n\n")).toBe(true);
  });
  it("refuses an empty key naming the input", () => {
    expect(() => normaliseKey(" \r\n ")).toThrow(/ssh-key is empty/);
  });
});

describe("inspectKey (F09)", () => {
  it("tells encrypted from plain keys in OpenSSH, PEM and PKCS#8 forms", () => {
    expect(inspectKey(gen("a", ["-t", "ed25519", "-N", ""]))).toEqual({
      format: "openssh",
      encrypted: false,
    });
    expect(inspectKey(gen("b", ["-t", "ed25519", "-N", "password1"]))).toEqual({
      format: "openssh",
      encrypted: true,
    });
    expect(inspectKey(gen("c", ["-t", "rsa", "-b", "2048", "-m", "PEM", "-N", ""]))).toEqual({
      format: "pem",
      encrypted: false,
    });
    expect(
      inspectKey(gen("d", ["-t", "rsa", "-b", "2048", "-m", "PEM", "-N", "password1"])),
    ).toEqual({ format: "pem", encrypted: true });
    expect(inspectKey(gen("e", ["-t", "ecdsa", "-m", "PKCS8", "-N", ""]))).toEqual({
      format: "pkcs8",
      encrypted: false,
    });
    expect(inspectKey("not a key").format).toBe("unknown");
  });
});
