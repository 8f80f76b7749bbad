/**
 * `baton attest`: a SLSA provenance bundle signed with a local key (the demo's), which
 * admission's `image_provenance` check accepts for a trust policy listing that key, builder and
 * repository; refused for another repository and missing. Usage errors name the flag.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { admit } from "../../engine/src/admission/admit.ts";
import { signManifest } from "../../engine/src/admission/sign.ts";
import { BundleVerifier } from "../../engine/src/admission/verify.ts";
import { demoTrust, loadRecipe } from "../../engine/src/demo/stack.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { baton, ROOT } from "./run-baton.ts";

const dir = mkdtempSync(join(tmpdir(), "baton-attest-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const trust = demoTrust(dir);
const keyFlags = ["--key", join(dir, "trust/demo-key.pem"), "--key-id", trust.key.key_id];
const recipeFile = join(ROOT, "recipes/example.yaml");
const compiled = compileRecipeInput(loadRecipe(recipeFile));

async function provenanceCheck(attestations: unknown[]) {
  const report = admit(
    { mode: "enforce", policy: trust.policy },
    new BundleVerifier(trust.policy),
    {
      manifest: compiled.manifest,
      manifest_digest: compiled.manifest_digest,
      bundle: await signManifest(compiled, { key: trust.key }),
      attestations,
      rollback: false,
      mark: null,
      now: Date.now(),
    },
  );
  return report.checks.find((c) => c.check === "image_provenance");
}

describe("baton attest", () => {
  it("signs provenance for a recipe's image that admission accepts under the demo's policy", async () => {
    const out = join(dir, "provenance.json");
    const r = await baton([
      "attest",
      recipeFile,
      ...keyFlags,
      "--repository",
      trust.repository,
      "--out",
      out,
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`attested ${compiled.manifest.image}`);
    const check = await provenanceCheck([JSON.parse(readFileSync(out, "utf8"))]);
    expect(check?.outcome, check?.message).toBe("pass");
    // Without it: refused, naming the check.
    expect((await provenanceCheck([]))?.outcome).toBe("fail");
  });

  it("an image given by digest, printed to stdout; another repository is refused by the policy", async () => {
    const r = await baton([
      "attest",
      compiled.manifest.image,
      ...keyFlags,
      "--repository",
      "https://github.com/someone/else",
    ]);
    expect(r.code, r.stderr).toBe(0);
    const check = await provenanceCheck([JSON.parse(r.stdout)]);
    expect(check?.outcome).toBe("fail");
    expect(check?.message).toContain("someone/else");
  });

  it("usage errors name the missing flag (exit 2)", async () => {
    const noRepo = await baton(["attest", recipeFile, ...keyFlags]);
    expect(noRepo.code).toBe(2);
    expect(noRepo.stderr).toContain("--repository");
    const noKeyId = await baton([
      "attest",
      recipeFile,
      "--key",
      join(dir, "trust/demo-key.pem"),
      "--repository",
      trust.repository,
    ]);
    expect(noKeyId.code).toBe(2);
    expect(noKeyId.stderr).toContain("--key-id");
    const notRecipe = join(dir, "nope.yaml");
    writeFileSync(notRecipe, "name: x\n");
    const bad = await baton(["attest", notRecipe, ...keyFlags, "--repository", trust.repository]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("nope.yaml");
  });

  it("an image reference not pinned by digest is named as one, with the right form", async () => {
    for (const ref of ["ghcr.io/a/b:latest", "b@sha256:abc"]) {
      const r = await baton(["attest", ref, ...keyFlags, "--repository", trust.repository]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`attest ${ref}: this looks like an image reference not pinned`);
      expect(r.stderr).toContain("baton attest <image@sha256:…|recipe.yaml> --key <file>");
      expect(r.stderr).not.toContain("ENOENT");
    }
    // A missing recipe file is still named as one.
    const missing = await baton([
      "attest",
      join(dir, "gone.yaml"),
      ...keyFlags,
      "--repository",
      trust.repository,
    ]);
    expect(missing.stderr).toContain("cannot read recipe file");
  });
});
