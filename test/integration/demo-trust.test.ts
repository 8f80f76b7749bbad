/**
 * The demo's signing key (docs/demo.md): generated at the first start in a data dir and kept
 * there, so a second start on the same dir signs with the same key and a manifest signed by
 * the first start still passes admission (real sigstore-js verification) under the second
 * start's trust policy; a fresh dir gets a fresh key, which the other policy refuses.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { admit } from "../../engine/src/admission/admit.ts";
import { signManifest } from "../../engine/src/admission/sign.ts";
import { BundleVerifier } from "../../engine/src/admission/verify.ts";
import { demoTrust, loadRecipe } from "../../engine/src/demo/stack.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";

const dirs: string[] = [];
const fresh = () => {
  const d = mkdtempSync(join(tmpdir(), "baton-demo-trust-"));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("demo signing key", () => {
  it("is kept in the data dir and reused by a second start; another dir gets another key", async () => {
    const dir = fresh();
    const first = demoTrust(dir);
    expect(statSync(join(dir, "trust", "demo-key.pem")).mode & 0o777).toBe(0o600);
    const second = demoTrust(dir);
    expect(second.key.key_id).toBe(first.key.key_id);
    expect(second.key.private_key_pem).toBe(first.key.private_key_pem);

    const c = compileRecipeInput(loadRecipe());
    const bundle = await signManifest(c, { key: first.key });
    const check = (trust: ReturnType<typeof demoTrust>) =>
      admit({ mode: "enforce", policy: trust.policy }, new BundleVerifier(trust.policy), {
        manifest: c.manifest,
        manifest_digest: c.manifest_digest,
        bundle,
        attestations: [],
        rollback: false,
        mark: null,
        now: Date.now(),
      }).checks.find((x) => x.check === "manifest_signature");
    expect(check(second)?.outcome).toBe("pass");
    const other = demoTrust(fresh());
    expect(other.key.key_id).not.toBe(first.key.key_id);
    expect(check(other)?.outcome).toBe("fail");
  });
});
