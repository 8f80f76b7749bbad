/**
 * Admission checks with real sigstore-js signing and verification, offline: key-based bundles,
 * keyless bundles from a mock Fulcio + TSA, and the bad cases (forged, expired, wrong
 * identity, wrong subject, replayed, missing or foreign provenance). Each refusal names its
 * check and a fix.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AdmissionInput, admit } from "../../engine/src/admission/admit.ts";
import { admissionFromEnv, parseTrustPolicy } from "../../engine/src/admission/policy.ts";
import { BundleVerifier } from "../../engine/src/admission/verify.ts";
import type { AdmissionReport } from "../../engine/src/domain/admission.ts";
import { BatonError } from "../../engine/src/domain/errors.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { makeTrust, type Trust } from "../support/admission-fixture.ts";
import { goodRecipe, IMAGE, PREVIOUS_IMAGE } from "./recipe-fixture.ts";

const DAY = 86_400_000;
let trust: Trust;
let verifier: BundleVerifier;

beforeAll(async () => {
  trust = await makeTrust();
  verifier = new BundleVerifier(trust.policy);
});
afterAll(async () => {
  await trust?.close();
});

const compiled = () => compileRecipeInput(goodRecipe());

async function input(over: Partial<AdmissionInput> = {}): Promise<AdmissionInput> {
  const c = compiled();
  return {
    manifest: c.manifest,
    manifest_digest: c.manifest_digest,
    bundle: await trust.sign(goodRecipe()),
    attestations: [await trust.provenance(IMAGE)],
    rollback: false,
    mark: null,
    now: Date.now(),
    ...over,
  };
}

function outcomes(r: AdmissionReport): Record<string, string> {
  return Object.fromEntries(r.checks.map((c) => [c.check, c.outcome]));
}

function failed(r: AdmissionReport, check: string) {
  const c = r.checks.find((x) => x.check === check);
  expect(c?.outcome, JSON.stringify(r.checks, null, 1)).toBe("fail");
  expect(c?.fix).toBeTruthy();
  expect(r.ok).toBe(false);
  return c as { message: string; fix: string };
}

describe("admission", () => {
  it("admits a key-signed manifest with provenance; every check is a named row", async () => {
    const r = admit(trust.admission, verifier, await input());
    expect(r.ok).toBe(true);
    expect(outcomes(r)).toEqual({
      manifest_signature: "pass",
      manifest_subject: "pass",
      manifest_expiry: "pass",
      manifest_freshness: "pass",
      image_provenance: "pass",
      image_sbom: "skipped",
    });
    expect(r.signer).toEqual({ kind: "key", key_id: "release-key-1" });
    expect(r.expires_at).toBe((r.issued_at ?? 0) + 7 * DAY);
  });

  it("admits a keyless manifest signed by the allowed workflow (mock Fulcio certificate, TSA time)", async () => {
    const r = admit(
      trust.admission,
      verifier,
      await input({ bundle: await trust.sign(goodRecipe(), { keyless: {} }) }),
    );
    expect(r.ok, JSON.stringify(r.checks)).toBe(true);
    expect(r.signer).toEqual({
      kind: "keyless",
      san: "https://github.com/acme/models/.github/workflows/recipe.yml@refs/heads/main",
      issuer: "https://token.actions.githubusercontent.com",
    });
  });

  it("refuses a forged bundle (payload changed after signing)", async () => {
    const good = (await trust.sign(goodRecipe())) as { dsseEnvelope: { payload: string } };
    const st = JSON.parse(Buffer.from(good.dsseEnvelope.payload, "base64").toString());
    st.predicate.expires_at = "2099-01-01T00:00:00.000Z";
    const forged = structuredClone(good);
    forged.dsseEnvelope.payload = Buffer.from(JSON.stringify(st)).toString("base64");
    const c = failed(
      admit(trust.admission, verifier, await input({ bundle: forged })),
      "manifest_signature",
    );
    expect(c.message).toMatch(/signature verification failed/);
  });

  it("refuses a bundle signed by another key under an allowed key id", async () => {
    const r = admit(
      trust.admission,
      verifier,
      await input({ bundle: await trust.sign(goodRecipe(), { key: trust.otherKey }) }),
    );
    expect(failed(r, "manifest_signature").message).toMatch(/verification failed/);
  });

  it("refuses a key the policy does not list, naming it", async () => {
    const r = admit(
      trust.admission,
      verifier,
      await input({
        bundle: await trust.sign(goodRecipe(), { key: { ...trust.otherKey, key_id: "stranger" } }),
      }),
    );
    const c = failed(r, "manifest_signature");
    expect(c.message).toContain('"stranger"');
    expect(c.fix).toMatch(/manifest\.signers\.keys/);
  });

  it("refuses keyless signatures from another repository or another ref (wrong identity)", async () => {
    for (const keyless of [{ repository: "evil/models" }, { ref: "refs/heads/dev" }]) {
      const r = admit(
        trust.admission,
        verifier,
        await input({ bundle: await trust.sign(goodRecipe(), { keyless }) }),
      );
      const c = failed(r, "manifest_signature");
      expect(c.message).toMatch(/which the trust policy does not allow/);
      expect(c.fix).toMatch(/manifest\.signers\.identities/);
    }
  });

  it("refuses an expired manifest (its own expiry, and the policy's max_age)", async () => {
    const old = await trust.sign(goodRecipe(), { issued_at: new Date(Date.now() - 8 * DAY) });
    expect(
      failed(admit(trust.admission, verifier, await input({ bundle: old })), "manifest_expiry")
        .message,
    ).toMatch(/expired at/);
    // Valid for a year by its own word, but the policy caps validity at 30 days.
    const long = await trust.sign(goodRecipe(), {
      issued_at: new Date(Date.now() - 31 * DAY),
      valid_for_ms: 365 * DAY,
    });
    const c = failed(
      admit(trust.admission, verifier, await input({ bundle: long })),
      "manifest_expiry",
    );
    expect(c.message).toMatch(/max_age 720h/);
  });

  it("refuses a manifest issued in the future beyond the clock skew", async () => {
    const b = await trust.sign(goodRecipe(), { issued_at: new Date(Date.now() + DAY) });
    expect(
      failed(admit(trust.admission, verifier, await input({ bundle: b })), "manifest_expiry")
        .message,
    ).toMatch(/in the future/);
  });

  it("refuses a bundle whose subject is another manifest (wrong subject), naming both digests", async () => {
    const other = { ...goodRecipe(), name: "another-rollout" };
    const b = await trust.sign(other);
    const r = admit(trust.admission, verifier, await input({ bundle: b }));
    const c = failed(r, "manifest_subject");
    expect(c.message).toContain(compileRecipeInput(other).manifest_digest);
    expect(c.message).toContain(compiled().manifest_digest);
    // Dependent checks are skipped, not passed.
    expect(outcomes(r).manifest_expiry).toBe("skipped");
    expect(outcomes(r).manifest_freshness).toBe("skipped");
  });

  it("refuses a replayed older manifest (freeze / rollback), unless it is an explicit rollback", async () => {
    const issued = new Date(Date.now() - DAY);
    const b = await trust.sign(goodRecipe(), { issued_at: issued });
    const mark = {
      model: "summarizer-v7",
      issued_at: Date.now() - 60_000,
      manifest_digest: "f".repeat(64),
      release_id: "r9",
    };
    const c = failed(
      admit(trust.admission, verifier, await input({ bundle: b, mark })),
      "manifest_freshness",
    );
    expect(c.message).toMatch(/older than the last admitted manifest .*release r9/);
    expect(c.fix).toMatch(/baton rollback/);
    const r = admit(trust.admission, verifier, await input({ bundle: b, mark, rollback: true }));
    expect(r.ok).toBe(true);
    expect(r.checks.find((x) => x.check === "manifest_freshness")?.message).toMatch(
      /explicit rollback/,
    );
    // The same manifest again (same issue time, same digest) is not a replay of an older one.
    const same = {
      ...mark,
      issued_at: issued.getTime(),
      manifest_digest: compiled().manifest_digest,
    };
    expect(admit(trust.admission, verifier, await input({ bundle: b, mark: same })).ok).toBe(true);
  });

  it("refuses an unsigned start and a malformed bundle", async () => {
    expect(
      failed(
        admit(trust.admission, verifier, await input({ bundle: undefined })),
        "manifest_signature",
      ).message,
    ).toMatch(/^unsigned/);
    expect(
      failed(
        admit(trust.admission, verifier, await input({ bundle: { hello: 1 } })),
        "manifest_signature",
      ).message,
    ).toMatch(/not a Sigstore bundle/);
  });

  it("refuses an image attestation sent as the manifest signature", async () => {
    const r = admit(
      trust.admission,
      verifier,
      await input({ bundle: await trust.provenance(IMAGE) }),
    );
    expect(failed(r, "manifest_signature").message).toMatch(/predicateType/);
  });

  it("image_provenance: missing, wrong subject, builder or repository not allowed, untrusted signer", async () => {
    expect(
      failed(
        admit(trust.admission, verifier, await input({ attestations: [] })),
        "image_provenance",
      ).message,
    ).toMatch(/no verified SLSA provenance/);
    expect(
      failed(
        admit(
          trust.admission,
          verifier,
          await input({ attestations: [await trust.provenance(PREVIOUS_IMAGE)] }),
        ),
        "image_provenance",
      ).message,
    ).toMatch(/subject is sha256:dd1bac.*not the image's digest sha256:6bac9d/);
    expect(
      failed(
        admit(
          trust.admission,
          verifier,
          await input({
            attestations: [
              await trust.provenance(IMAGE, { builder: "https://evil.example/builder" }),
            ],
          }),
        ),
        "image_provenance",
      ).message,
    ).toMatch(/builder https:\/\/evil\.example\/builder is not allowed/);
    expect(
      failed(
        admit(
          trust.admission,
          verifier,
          await input({
            attestations: [
              await trust.provenance(IMAGE, { repository: "https://github.com/evil/fork" }),
            ],
          }),
        ),
        "image_provenance",
      ).message,
    ).toMatch(/source repository https:\/\/github\.com\/evil\/fork is not allowed/);
    expect(
      failed(
        admit(
          trust.admission,
          verifier,
          await input({ attestations: [await trust.provenance(IMAGE, { key: trust.otherKey })] }),
        ),
        "image_provenance",
      ).message,
    ).toMatch(/verification failed/);
  });

  it("image_sbom: required by the policy, missing fails, a keyless SBOM attestation passes", async () => {
    const t = await makeTrust({
      images: {
        provenance: "required",
        sbom: "required",
        builders: ["https://github.com/actions/runner/github-hosted"],
        source_repositories: ["https://github.com/acme/models"],
      },
    });
    try {
      const v = new BundleVerifier(t.policy);
      const base = {
        ...(await input()),
        bundle: await t.sign(goodRecipe()),
        attestations: [await t.provenance(IMAGE)],
      };
      expect(failed(admit(t.admission, v, base), "image_sbom").fix).toMatch(/attest-sbom/);
      const r = admit(t.admission, v, {
        ...base,
        attestations: [...base.attestations, await t.sbom(IMAGE)],
      });
      expect(r.ok, JSON.stringify(r.checks)).toBe(true);
      expect(outcomes(r).image_sbom).toBe("pass");
    } finally {
      await t.close();
    }
  });

  it("with no policy every start is refused as unsigned; BATON_ADMISSION=off skips every check", async () => {
    const un = admit({ mode: "unconfigured" }, null, await input());
    expect(failed(un, "manifest_signature").fix).toMatch(/BATON_TRUST_POLICY/);
    const off = admit({ mode: "off" }, null, await input({ bundle: undefined }));
    expect(off.ok).toBe(true);
    expect(new Set(off.checks.map((c) => c.outcome))).toEqual(new Set(["skipped"]));
  });
});

describe("trust policy", () => {
  it("is chosen from the environment, and contradictions stop the engine", () => {
    expect(admissionFromEnv({}).mode).toBe("unconfigured");
    expect(admissionFromEnv({ BATON_ADMISSION: "off" }).mode).toBe("off");
    expect(admissionFromEnv({ BATON_TRUST_POLICY: trust.policyFile }).mode).toBe("enforce");
    expect(() =>
      admissionFromEnv({ BATON_ADMISSION: "off", BATON_TRUST_POLICY: trust.policyFile }),
    ).toThrow(/both set/);
    expect(() => admissionFromEnv({ BATON_ADMISSION: "maybe" })).toThrow(/on or off/);
    expect(() => admissionFromEnv({ BATON_TRUST_POLICY: "/nonexistent/policy.yaml" })).toThrow(
      /cannot read/,
    );
  });

  it("names every bad field with a fix", () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-policy-"));
    writeFileSync(join(dir, "bad.pub"), "not a key");
    try {
      parseTrustPolicy(
        {
          version: 1,
          manifest: {
            signers: {
              keys: [{ key_id: "k", public_key_file: "bad.pub" }],
              identities: [
                {
                  repository: "acme/models",
                  workflow: ".github/workflows/r.yml",
                  ref: "refs/heads/main",
                },
              ],
            },
          },
          images: { provenance: "required" },
        },
        dir,
      );
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(BatonError);
      const paths = (e as BatonError).problems.map((p) => p.path);
      expect(paths).toEqual([
        "trust_policy.manifest.signers.keys.0",
        "trust_policy.trusted_root",
        "trust_policy.images.builders",
        "trust_policy.images.source_repositories",
      ]);
      expect((e as BatonError).problems.every((p) => p.fix.length > 0)).toBe(true);
    }
    expect(() => parseTrustPolicy({ version: 2 }, dir)).toThrow(/version must be 1/);
    expect(() =>
      parseTrustPolicy(
        { version: 1, manifest: { signers: {} }, images: { provenance: "off" } },
        dir,
      ),
    ).toThrow(/no signer is allowed/);
  });
});
