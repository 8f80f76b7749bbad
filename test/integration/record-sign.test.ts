/**
 * A closed release record signed like a manifest (docs/record.md "Signing a record"), on both
 * stores: `baton record --out`, `baton sign-record`, `baton verify-record` through the CLI
 * against the engine's API. Refused: an open record, an edited record, another key, a bundle
 * of something else (a manifest), a bundle of another release's record. Keyless through a
 * loopback Sigstore (Fulcio + TSA) verified under the trust policy file.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../../engine/src/cli/program.ts";
import { signRecord, verifyRecord } from "../../engine/src/record/sign.ts";
import { makeTrust, REF, REPO, type Trust, WORKFLOW } from "../support/admission-fixture.ts";
import { IMAGE } from "../unit/recipe-fixture.ts";
import {
  drive,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
  T0,
} from "./service-harness.ts";

let trust: Trust;
let dir: string;
beforeAll(async () => {
  trust = await makeTrust();
  dir = mkdtempSync(join(tmpdir(), "baton-record-sign-"));
  writeFileSync(join(dir, "k.key"), trust.key.private_key_pem);
  writeFileSync(join(dir, "other.key"), trust.otherKey.private_key_pem);
});
afterAll(async () => {
  await trust?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Runs the CLI in-process; returns exit code and what it printed. */
async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, {
    out: { write: (s: string) => out.push(s) },
    err: { write: (s: string) => err.push(s) },
  });
  return { code, out: out.join(""), err: err.join("") };
}

describe.each(STORE_KINDS)("signing a release record on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  async function start(hh: Harness): Promise<string> {
    const r = recipe(2);
    const res = await op(hh, "POST", "/v1/releases", {
      recipe: r,
      bundle: await trust.sign(r, { issued_at: new Date(T0) }),
      attestations: [await trust.provenance(IMAGE)],
    });
    expect(res.status).toBe(201);
    return ((await res.json()) as { id: string }).id;
  }
  const recordOf = async (hh: Harness, id: string) =>
    (await (await op(hh, "GET", `/v1/releases/${id}/record`)).json()) as Record<string, unknown>;

  it.skipIf(skip)(
    "sign-record / verify-record: the signed digest is the record's; edits and strangers refused",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const id = await start(h);
      const f = (n: string) => join(dir, `${kind}-${n}`);

      // Open: no fixed digest yet, so nothing to sign.
      writeFileSync(f("open.json"), JSON.stringify(await recordOf(h, id)));
      const open = await cli([
        "sign-record",
        f("open.json"),
        "--key",
        join(dir, "k.key"),
        "--key-id",
        "release-key-1",
      ]);
      expect(open.code).toBe(1);
      expect(open.err).toMatch(/still open/);

      await drive(h);
      const rec = await recordOf(h, id);
      expect((rec.release as { state: string }).state).toBe("succeeded");
      writeFileSync(f("rec.json"), JSON.stringify(rec, null, 2));
      const signed = await cli([
        "sign-record",
        f("rec.json"),
        "--key",
        join(dir, "k.key"),
        "--key-id",
        "release-key-1",
        "--out",
        f("rec.bundle"),
      ]);
      expect(signed.code, signed.err).toBe(0);
      expect(signed.err).toContain(`sha256:${rec.digest}`);

      const ok = await cli([
        "verify-record",
        f("rec.json"),
        "--bundle",
        f("rec.bundle"),
        "--policy",
        trust.policyFile,
        "--json",
      ]);
      expect(ok.code, ok.err).toBe(0);
      expect(JSON.parse(ok.out)).toMatchObject({
        verified: true,
        digest: rec.digest,
        release_id: id,
        signer: { kind: "key", key_id: "release-key-1" },
      });
      const byKey = await cli([
        "verify-record",
        f("rec.json"),
        "--bundle",
        f("rec.bundle"),
        "--public-key",
        join(trust.dir, "release-key-1.pub"),
        "--key-id",
        "release-key-1",
      ]);
      expect(byKey.code, byKey.err).toBe(0);
      expect(byKey.out).toMatch(/verified: the record of/);

      // The record edited after the engine wrote it: its contents no longer hash to its digest.
      const edited = structuredClone(rec);
      (edited.intended as { image: string }).image = `ghcr.io/acme/other@sha256:${"c".repeat(64)}`;
      writeFileSync(f("edited.json"), JSON.stringify(edited));
      const e = await cli([
        "verify-record",
        f("edited.json"),
        "--bundle",
        f("rec.bundle"),
        "--policy",
        trust.policyFile,
      ]);
      expect(e.code).toBe(1);
      expect(e.err).toMatch(/digest: .*changed after the engine wrote it/);
      // Even with its digest field updated to match, the bundle signs the old digest.
      const { recordDigest } = await import("../../engine/src/record/build.ts");
      const {
        digest: _d,
        acceptance: _a,
        refused_events: _r,
        ...body
      } = edited as never as Parameters<typeof recordDigest>[0] & {
        digest: string;
        acceptance: unknown;
        refused_events: number;
      };
      writeFileSync(f("edited2.json"), JSON.stringify({ ...edited, digest: recordDigest(body) }));
      const e2 = await cli([
        "verify-record",
        f("edited2.json"),
        "--bundle",
        f("rec.bundle"),
        "--policy",
        trust.policyFile,
      ]);
      expect(e2.code).toBe(1);
      expect(e2.err).toMatch(/subject: the bundle signs record digest/);

      // Signed by a key the policy does not list (same key id, other key).
      const other = await cli([
        "sign-record",
        f("rec.json"),
        "--key",
        join(dir, "other.key"),
        "--key-id",
        "release-key-1",
        "--out",
        f("other.bundle"),
      ]);
      expect(other.code).toBe(0);
      const o = await cli([
        "verify-record",
        f("rec.json"),
        "--bundle",
        f("other.bundle"),
        "--policy",
        trust.policyFile,
      ]);
      expect(o.code).toBe(1);
      expect(o.err).toMatch(/signature: the bundle does not verify/);

      // A manifest's bundle (same signer) is not a record's.
      writeFileSync(f("manifest.bundle"), JSON.stringify(await trust.sign(recipe(2))));
      const m = await cli([
        "verify-record",
        f("rec.json"),
        "--bundle",
        f("manifest.bundle"),
        "--policy",
        trust.policyFile,
      ]);
      expect(m.code).toBe(1);
      expect(m.err).toMatch(/predicate: .*not a release record/);

      // Another closed release's record, with this record's bundle.
      const id2 = await start(h);
      await drive(h);
      const rec2 = await recordOf(h, id2);
      expect(rec2.digest).not.toBeNull();
      expect(() =>
        verifyRecord(
          rec2,
          JSON.parse(readFileSync(f("rec.bundle"), "utf8")),
          trust.policy,
          trust.policy.manifest.signers,
        ),
      ).toThrow(/signs record digest/);

      // Keyless, through the loopback Fulcio + TSA: verified under the policy's identities.
      const kl = await signRecord(rec2, {
        keyless: {
          fulcioURL: trust.sigstore.url,
          tsaServerURL: trust.sigstore.url,
          tlogUpload: false,
          identityToken: trust.sigstore.githubToken({
            repository: REPO,
            workflow: WORKFLOW,
            ref: REF,
          }),
        },
      });
      const v = verifyRecord(rec2, kl.bundle, trust.policy, trust.policy.manifest.signers);
      expect(v.signer).toMatchObject({ kind: "keyless", issuer: expect.any(String) });
      expect(v.release_id).toBe(id2);

      // Usage errors name the flags.
      expect((await cli(["sign-record", f("rec.json")])).code).toBe(2);
      expect((await cli(["verify-record", f("rec.json"), "--bundle", f("rec.bundle")])).code).toBe(
        2,
      );
      const missing = await cli([
        "verify-record",
        f("nope.json"),
        "--bundle",
        f("rec.bundle"),
        "--policy",
        trust.policyFile,
      ]);
      expect(missing.code).toBe(2);
      expect(missing.err).toMatch(/cannot read/);
    },
  );
});
