/**
 * Admission through the HTTP API on both stores: a signed start is admitted and its checks
 * are stored on the release; refusals are 422 naming the check and the fix, and write nothing;
 * the model's admission mark refuses a replayed older manifest.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { makeTrust, type Trust } from "../support/admission-fixture.ts";
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
beforeAll(async () => {
  trust = await makeTrust();
});
afterAll(async () => {
  await trust?.close();
});

describe.each(STORE_KINDS)("admission over HTTP on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  const signedStart = async (
    hh: Harness,
    o: { issued_at?: number; rollback?: boolean; bundle?: unknown; attestations?: unknown[] } = {},
  ) =>
    op(hh, "POST", "/v1/releases", {
      recipe: recipe(2),
      bundle: o.bundle ?? (await trust.sign(recipe(2), { issued_at: new Date(o.issued_at ?? T0) })),
      attestations: o.attestations ?? [await trust.provenance(IMAGE)],
      ...(o.rollback ? { rollback: true } : {}),
    });

  it.skipIf(skip)("admits a signed start and stores every check on the release", async () => {
    h = await makeHarness({ kind, admission: trust.admission });
    const res = await signedStart(h);
    expect(res.status).toBe(201);
    const body = (await res.json()) as {
      id: string;
      admission: { ok: boolean; checks: { check: string; outcome: string }[] };
    };
    expect(body.admission.ok).toBe(true);
    const rec = (await (await op(h, "GET", `/v1/releases/${body.id}`)).json()) as {
      state: string;
      admission: { signer: unknown; checks: { check: string; outcome: string }[] };
      history: { kind: string; message: string }[];
    };
    expect(rec.state).toBe("running");
    expect(rec.admission.signer).toEqual({ kind: "key", key_id: "release-key-1" });
    expect(rec.admission.checks.map((c) => `${c.check}:${c.outcome}`)).toEqual([
      "manifest_signature:pass",
      "manifest_subject:pass",
      "manifest_expiry:pass",
      "manifest_freshness:pass",
      "image_provenance:pass",
      "image_sbom:skipped",
    ]);
    expect(rec.history.find((x) => x.kind === "admission")?.message).toMatch(
      /signed by key release-key-1/,
    );
    expect(await h.store.getAdmissionMark("summarizer-v7")).toMatchObject({
      release_id: body.id,
      issued_at: T0,
    });
  });

  it.skipIf(skip)(
    "refuses with 422 naming each failed check and its fix; nothing is written",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const unsigned = await op(h, "POST", "/v1/releases", recipe(2));
      expect(unsigned.status).toBe(422);
      const u = (await unsigned.json()) as {
        error: {
          code: string;
          message: string;
          problems: { path: string; message: string; fix: string }[];
        };
      };
      expect(u.error.code).toBe("admission_refused");
      expect(u.error.problems.map((p) => p.path)).toEqual([
        "manifest_signature",
        "image_provenance",
      ]);
      expect(u.error.problems[0]?.fix).toMatch(/baton sign/);
      // Each verb that takes a recipe is named with its --bundle (a roll forward is refused too).
      expect(u.error.problems[0]?.fix).toMatch(
        /baton roll-forward <id> <fixed-recipe\.yaml> --bundle/,
      );

      const wrongSubject = await signedStart(h, { bundle: await trust.sign(recipe(3)) });
      expect(wrongSubject.status).toBe(422);
      const w = (await wrongSubject.json()) as { error: { problems: { path: string }[] } };
      expect(w.error.problems.map((p) => p.path)).toEqual(["manifest_subject"]);
      expect(await h.store.listReleases({ limit: 10 })).toEqual([]);
      expect(await h.store.getAdmissionMark("summarizer-v7")).toBeNull();
    },
  );

  it.skipIf(skip)(
    "a replayed older manifest is refused after a newer one was admitted, and `rollback: true` on a start does not let it through",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const older = await trust.sign(recipe(2), { issued_at: new Date(T0 - 3_600_000) });
      const first = await signedStart(h);
      expect(first.status).toBe(201);
      const id = ((await first.json()) as { id: string }).id;
      await drive(h); // finished: its lanes are free again
      const replay = await signedStart(h, { bundle: older });
      expect(replay.status).toBe(422);
      const body = (await replay.json()) as {
        error: { problems: { path: string; message: string }[] };
      };
      expect(body.error.problems.map((p) => p.path)).toEqual(["manifest_freshness"]);
      expect(body.error.problems[0]?.message).toContain(`release ${id}`);
      // Only the rollback verb (operator, reason, history) admits an older manifest: a start
      // that asks for a rollback is refused before admission, naming the field and the verb.
      const asRollback = await signedStart(h, { bundle: older, rollback: true });
      expect(asRollback.status).toBe(400);
      const refused = (await asRollback.json()) as {
        error: { problems: { path: string; message: string; fix: string }[] };
      };
      expect(refused.error.problems.map((p) => p.path)).toEqual(["body.rollback"]);
      expect(refused.error.problems[0]?.fix).toContain(`POST /v1/releases/<id>/rollback`);
      expect((await h.store.listReleases({ limit: 10 })).map((r) => r.id)).toEqual([id]);
      // The mark stays at the newest manifest.
      expect(await h.store.getAdmissionMark("summarizer-v7")).toMatchObject({
        release_id: id,
        issued_at: T0,
      });
    },
  );

  it.skipIf(skip)("a signed start with a bad shape is a 400 naming the field", async () => {
    h = await makeHarness({ kind, admission: trust.admission });
    const res = await op(h, "POST", "/v1/releases", {
      recipe: recipe(2),
      bundle: "nope",
      extra: 1,
    });
    expect(res.status).toBe(400);
    const b = (await res.json()) as { error: { problems: { path: string }[] } };
    expect(b.error.problems.map((p) => p.path).sort()).toEqual(["body", "body.bundle"]);
  });
});
