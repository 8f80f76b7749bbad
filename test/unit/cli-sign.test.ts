/**
 * `baton keygen` and `baton sign` (no engine): the bundle they write verifies under a trust
 * policy listing the generated public key, and its subject is the recipe's manifest digest.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { parseTrustPolicy } from "../../engine/src/admission/policy.ts";
import { BundleVerifier } from "../../engine/src/admission/verify.ts";
import { runCli } from "../../engine/src/cli/program.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { goodRecipe } from "./recipe-fixture.ts";

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    io: { out: { write: (s: string) => out.push(s) }, err: { write: (s: string) => err.push(s) } },
  };
}

describe("baton keygen and sign", () => {
  it("signs a recipe's manifest with a generated key; the bundle verifies and names the digest", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-sign-"));
    try {
      const recipeFile = join(dir, "r.yaml");
      writeFileSync(recipeFile, stringify(goodRecipe()));
      const k = io();
      expect(await runCli(["keygen", join(dir, "rk")], k.io)).toBe(0);
      expect(statSync(join(dir, "rk.key")).mode & 0o777).toBe(0o600);
      const s = io();
      const out = join(dir, "b.json");
      expect(
        await runCli(
          ["sign", recipeFile, "--key", join(dir, "rk.key"), "--key-id", "rk", "--out", out],
          s.io,
        ),
      ).toBe(0);
      const digest = compileRecipeInput(goodRecipe()).manifest_digest;
      expect(s.err.join("")).toContain(digest);
      const policy = parseTrustPolicy(
        {
          version: 1,
          manifest: { signers: { keys: [{ key_id: "rk", public_key_file: "rk.pub" }] } },
          images: { provenance: "off" },
        },
        dir,
      );
      const v = new BundleVerifier(policy).verify(
        JSON.parse(readFileSync(out, "utf8")),
        policy.manifest.signers,
      );
      expect(v.ok).toBe(true);
      if (v.ok) expect(v.statement.subject[0]?.digest.sha256).toBe(digest);
      // Usage errors: neither or both of --key / --keyless, --key without --key-id.
      expect(await runCli(["sign", recipeFile], io().io)).toBe(2);
      expect(await runCli(["sign", recipeFile, "--key", join(dir, "rk.key")], io().io)).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keygen refuses to overwrite an existing key or public key unless --force", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-keygen-"));
    try {
      const prefix = join(dir, "rk");
      expect(await runCli(["keygen", prefix], io().io)).toBe(0);
      const key = readFileSync(`${prefix}.key`, "utf8");
      const again = io();
      expect(await runCli(["keygen", prefix], again.io)).toBe(2);
      expect(again.err.join("")).toContain(`${prefix}.key already exists`);
      expect(again.err.join("")).toContain("--force");
      expect(readFileSync(`${prefix}.key`, "utf8")).toBe(key);
      // Only the .pub left: still refused, naming it.
      rmSync(`${prefix}.key`);
      const pubOnly = io();
      expect(await runCli(["keygen", prefix], pubOnly.io)).toBe(2);
      expect(pubOnly.err.join("")).toContain(`${prefix}.pub already exists`);
      writeFileSync(`${prefix}.key`, "old", { mode: 0o644 });
      expect(await runCli(["keygen", prefix, "--force"], io().io)).toBe(0);
      expect(readFileSync(`${prefix}.key`, "utf8")).not.toBe(key);
      expect(statSync(`${prefix}.key`).mode & 0o777).toBe(0o600);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("sign refuses --valid-for 0, a bad unit and more than 366d, naming the flag and the bounds", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-valid-for-"));
    try {
      const recipeFile = join(dir, "r.yaml");
      writeFileSync(recipeFile, stringify(goodRecipe()));
      expect(await runCli(["keygen", join(dir, "rk")], io().io)).toBe(0);
      const sign = async (validFor: string) => {
        const r = io();
        const args = ["sign", recipeFile, "--key", join(dir, "rk.key"), "--key-id", "rk"];
        const code = await runCli([...args, "--valid-for", validFor], r.io);
        return { code, out: r.out.join(""), err: r.err.join("") };
      };
      for (const bad of ["0d", "0h", "367d", "99999d", "8785h", "7w"]) {
        const r = await sign(bad);
        expect(r.code, bad).toBe(2);
        expect(r.err).toContain(`--valid-for "${bad}"`);
        expect(r.err).toContain("1h to 366d");
      }
      // The bounds themselves are accepted; 366d expires 366 days after it was issued.
      expect((await sign("1h")).code).toBe(0);
      const longest = await sign("366d");
      expect(longest.code, longest.err).toBe(0);
      const bundle = JSON.parse(longest.out) as { dsseEnvelope: { payload: string } };
      const statement = JSON.parse(
        Buffer.from(bundle.dsseEnvelope.payload, "base64").toString("utf8"),
      ) as { predicate: { issued_at: string; expires_at: string } };
      const days =
        (Date.parse(statement.predicate.expires_at) - Date.parse(statement.predicate.issued_at)) /
        86_400_000;
      expect(days).toBe(366);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("sign refuses a --key file that is not a private key, naming the file and baton keygen", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-bad-key-"));
    try {
      const recipeFile = join(dir, "r.yaml");
      writeFileSync(recipeFile, stringify(goodRecipe()));
      expect(await runCli(["keygen", join(dir, "rk")], io().io)).toBe(0);
      const notKey = join(dir, "passwd");
      writeFileSync(notKey, "root:x:0:0:root:/root:/bin/bash\n");
      for (const file of [notKey, join(dir, "rk.pub")]) {
        const r = io();
        const args = ["sign", recipeFile, "--key", file, "--key-id", "rk"];
        expect(await runCli(args, r.io)).toBe(2);
        const err = r.err.join("");
        expect(err).toContain(`--key ${file} is not a private key`);
        expect(err).toContain("baton keygen");
        expect(err).not.toContain("DECODER");
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
