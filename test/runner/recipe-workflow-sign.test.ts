// Key-based signing in the recipe workflow (docs/trust.md "Signing"): the start job's `run:`
// script of recipe.yml, executed as GitHub does (bash -e -o pipefail), with the
// BATON_SIGNING_KEY secret holding a key generated here. Against a real engine enforcing a
// trust policy that lists the key's public half, the manifest signature verifies and the
// release starts; against one that lists another key, admission refuses it (422 naming
// manifest_signature) and the job fails; a key without its id fails the job before anything.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { loadTrustPolicy } from "../../engine/src/admission/policy.ts";
import { generateSigningKey } from "../../engine/src/admission/sign.ts";
import {
  FakeClock,
  type Harness,
  makeHarness,
  OPERATOR,
  recipe,
} from "../integration/service-harness.ts";
import { runWorkflowStep } from "../support/recipe-workflow.ts";

let dir: string;
const key = generateSigningKey();
const other = generateSigningKey();
const open: { h: Harness; server: ReturnType<typeof serve> }[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "baton-recipe-sign-"));
});
afterAll(async () => {
  for (const o of open) {
    await new Promise<void>((resolve) => o.server.close(() => resolve()));
    await o.h.close();
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A real engine enforcing a trust policy that lists `pub` as key `release-key` (no provenance). */
async function engine(name: string, pub: string): Promise<{ h: Harness; url: string }> {
  const pdir = join(dir, name);
  mkdirSync(pdir);
  writeFileSync(join(pdir, "release-key.pub"), pub);
  writeFileSync(
    join(pdir, "trust-policy.json"),
    JSON.stringify({
      version: 1,
      manifest: {
        signers: { keys: [{ key_id: "release-key", public_key_file: "release-key.pub" }] },
      },
      images: { provenance: "off" },
    }),
  );
  const policy = loadTrustPolicy(join(pdir, "trust-policy.json"));
  // The script signs at the wall clock's time, so the engine's clock starts there.
  const h = await makeHarness({
    kind: "sqlite",
    admission: { mode: "enforce", policy },
    clock: new FakeClock(Date.now()),
  });
  h.cp.seed([{ id: "lane-1", model: "model-1", weight: 100 }]);
  const server = serve({ fetch: h.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  open.push({ h, server });
  return { h, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** A checkout with one recipe (lane-1 serving model-1 alone). */
function checkout(name: string): string {
  const c = join(dir, `checkout-${name}`);
  mkdirSync(join(c, "recipes"), { recursive: true });
  const r = recipe(1, { name: "svc-1", model: "model-1" });
  const l = { ...(r.lanes?.[0] as object), id: "lane-1", port: 2201 };
  writeFileSync(
    join(c, "recipes", "svc-1.yaml"),
    stringify({ ...r, lanes: [l], rollout: { waves: [{ lanes: ["lane-1"], traffic: 100 }] } }),
  );
  return c;
}

function runStart(cwd: string, url: string, env: Record<string, string>) {
  return runWorkflowStep(cwd, { BATON_ENGINE_URL: url, BATON_TOKEN: OPERATOR, ...env });
}

async function releases(url: string) {
  const res = await fetch(`${url}/v1/releases?limit=200`, {
    headers: { authorization: `Bearer ${OPERATOR}` },
  });
  return ((await res.json()) as { releases: { id: string }[] }).releases;
}

describe("recipe.yml start job with BATON_SIGNING_KEY", () => {
  it("signs each started manifest with the key: admitted where the policy lists its public key, refused where it lists another", async () => {
    const env = { BATON_SIGNING_KEY: key.private_key_pem, BATON_SIGNING_KEY_ID: "release-key" };

    const good = await engine("good", key.public_key_pem);
    const c1 = checkout("good");
    const ok = await runStart(c1, good.url, env);
    expect(ok.code, ok.out).toBe(0);
    expect(ok.out).toMatch(
      /started\s+recipes\/svc-1\.yaml: started r\d+ .*signed with key release-key/,
    );
    const [rel] = await releases(good.url);
    expect(rel).toBeDefined();
    const full = (await (
      await fetch(`${good.url}/v1/releases/${rel?.id}`, {
        headers: { authorization: `Bearer ${OPERATOR}` },
      })
    ).json()) as { admission: { checks: { check: string; outcome: string }[] } | null };
    expect(full.admission?.checks.find((x) => x.check === "manifest_signature")?.outcome).toBe(
      "pass",
    );
    // The key file was removed when the script ended.
    expect(readdirSync(c1).filter((f) => f.startsWith("baton-signing-key"))).toEqual([]);

    const wrong = await engine("wrong", other.public_key_pem);
    const bad = await runStart(checkout("wrong"), wrong.url, env);
    expect(bad.code, bad.out).toBe(1);
    expect(bad.out).toMatch(/failed\s+recipes\/svc-1\.yaml: .*manifest_signature/);
    expect(await releases(wrong.url)).toEqual([]);

    // Unsigned (no secret): this engine requires a signature, so it refuses too.
    const unsigned = await runStart(checkout("unsigned"), wrong.url, {});
    expect(unsigned.code, unsigned.out).toBe(1);
    expect(unsigned.out).toMatch(/manifest_signature/);

    // A key without its id: the job fails before asking the engine.
    const noId = await runStart(checkout("no-id"), good.url, {
      BATON_SIGNING_KEY: key.private_key_pem,
    });
    expect(noId.code).toBe(1);
    expect(noId.out).toMatch(/BATON_SIGNING_KEY_ID variable is not/);
  }, 180_000);
});
