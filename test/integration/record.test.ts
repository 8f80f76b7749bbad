/**
 * The release record through the API on both stores: it validates against the published
 * schema, carries the admission checks, the decisions and the recovery time; its digest is
 * fixed once the release is closed; the owner's acceptance is refused while open and recorded
 * (who, until when, which digest) after.
 */
import { readFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { recordDigest } from "../../engine/src/record/build.ts";
import {
  RECORD_SCHEMA_PATH,
  ReleaseRecordDocument,
  recordJsonSchemaText,
} from "../../engine/src/record/schema.ts";
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

it("the published JSON Schema is the one the record type generates (npm run schema)", () => {
  expect(readFileSync(RECORD_SCHEMA_PATH, "utf8")).toBe(recordJsonSchemaText());
});

describe.each(STORE_KINDS)("release record on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  async function start(hh: Harness, r = recipe(2)): Promise<string> {
    const res = await op(hh, "POST", "/v1/releases", {
      recipe: r,
      bundle: await trust.sign(r, { issued_at: new Date(T0) }),
      attestations: [await trust.provenance(IMAGE)],
    });
    expect(res.status).toBe(201);
    return ((await res.json()) as { id: string }).id;
  }
  const record = async (hh: Harness, id: string) =>
    ReleaseRecordDocument.parse(await (await op(hh, "GET", `/v1/releases/${id}/record`)).json());

  it.skipIf(skip)(
    "a succeeded release: schema-valid, admission evidence, decisions, fixed digest, acceptance",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const id = await start(h);
      const open = await record(h, id);
      expect(open.release.closed).toBe(false);
      expect(open.digest).toBeNull();
      const early = await op(h, "POST", `/v1/releases/${id}/accept`, { by: "owner@acme.example" });
      expect(early.status).toBe(409);
      expect(((await early.json()) as { error: { code: string } }).error.code).toBe("not_closed");

      await drive(h);
      const rec = await record(h, id);
      expect(rec.release.state).toBe("succeeded");
      expect(rec.release.closed).toBe(true);
      expect(rec.intended.signer).toEqual({ kind: "key", key_id: "release-key-1" });
      expect(rec.evidence.admission?.checks.map((c) => c.check)).toContain("image_provenance");
      expect(rec.ran.step_runs.length).toBe(rec.intended.rollout_policy.steps.length);
      expect(rec.decisions[0]).toMatchObject({ kind: "created", by: "operator", automatic: false });
      expect(rec.intended.recovery_class).toBe("reversible");
      expect(rec.intended.recovery_policy).toEqual({
        declared: false,
        unsafe_after: null,
        restore: null,
      });
      expect(rec.recovery).toEqual({
        class: "reversible",
        exercised: false,
        held_for_roll_forward: null,
        started_at: null,
        traffic_restored_at: null,
        restore: null,
        finished_at: null,
        rto_ms: null,
      });
      // Observed lane states: the control plane's lanes at start (as seeded), each traffic
      // assert's weights, the last of which the control plane still holds.
      const atStart = rec.ran.observed_lanes.filter((o) => o.source === "control_plane_at_start");
      expect(atStart.map((o) => [o.lane, o.observed.weight])).toEqual([
        ["lane-a", 50],
        ["lane-b", 50],
      ]);
      const asserts = rec.ran.observed_lanes.filter((o) => o.source === "traffic_assert");
      const assertSteps = rec.intended.rollout_policy.steps.filter(
        (s) => s.name === "assert_traffic_observed",
      );
      expect(new Set(asserts.map((o) => o.step_run_id)).size).toBe(assertSteps.length);
      const now = h.cp.weights("summarizer-v7");
      const lastAssert = asserts.filter((o) => o.step_run_id === asserts.at(-1)?.step_run_id);
      expect(Object.fromEntries(lastAssert.map((o) => [o.lane, o.observed.weight]))).toEqual(now);
      expect(rec.lineage).toBeNull();
      expect(rec.known_gaps.join("\n")).not.toMatch(/no observed baseline/);
      const { digest, acceptance: _a, refused_events: _r, ...body } = rec;
      expect(digest).toBe(recordDigest(body));

      const wrong = await op(h, "POST", `/v1/releases/${id}/accept`, {
        by: "owner@acme.example",
        record_digest: "0".repeat(64),
      });
      expect(wrong.status).toBe(409);
      const bad = await op(h, "POST", `/v1/releases/${id}/accept`, { expires_at: "tomorrow" });
      expect(bad.status).toBe(400);
      const ok = await op(h, "POST", `/v1/releases/${id}/accept`, {
        by: "owner@acme.example",
        expires_at: new Date(T0 + 30 * 86_400_000).toISOString(),
        note: "v7 serves all traffic",
        record_digest: digest,
      });
      expect(ok.status).toBe(200);
      const after = await record(h, id);
      expect(after.digest).toBe(digest); // acceptance does not move the digest
      expect(after.acceptance).toEqual({
        by: "owner@acme.example",
        at: h.clock.now(),
        expires_at: T0 + 30 * 86_400_000,
        note: "v7 serves all traffic",
        record_digest: digest,
      });

      // An acceptance is final: a second one is refused naming who accepted, when, and the
      // way out; the record still names the first.
      const firstAt = h.clock.now();
      h.clock.advance(60_000);
      const again = await op(h, "POST", `/v1/releases/${id}/accept`, { by: "someone-else" });
      expect(again.status).toBe(409);
      const e = ((await again.json()) as { error: { code: string; message: string } }).error;
      expect(e.code).toBe("already_accepted");
      expect(e.message).toContain("owner@acme.example");
      expect(e.message).toContain(new Date(firstAt).toISOString());
      expect(e.message).toContain(new Date(T0 + 30 * 86_400_000).toISOString());
      expect(e.message).toMatch(/a new acceptance is allowed once it has expired/);
      expect((await record(h, id)).acceptance).toMatchObject({
        by: "owner@acme.example",
        at: firstAt,
      });
    },
  );

  it.skipIf(skip)(
    "an open release's step run in flight is not a deviation; one that failed is",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const id = await start(h);
      // No runner answers: the first runner step stays dispatched.
      await drive(h, () => "skip");
      const rel = await h.store.getRelease(id);
      const inFlight = rel?.step_runs.filter(
        (s) => s.state === "dispatched" || s.state === "running",
      );
      expect(inFlight?.length).toBeGreaterThan(0);
      const open = await record(h, id);
      expect(open.release.closed).toBe(false);
      expect(open.deviations.map((d) => d.what).join("\n")).not.toMatch(
        /ended (dispatched|running)/,
      );
      expect(open.deviations.every((d) => d.at !== null)).toBe(true);
    },
  );

  it.skipIf(skip)(
    "record_digest may carry the sha256: prefix the CLI prints; the bare hex is compared and kept",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const id = await start(h);
      await drive(h);
      const { digest } = await record(h, id);
      expect(digest).toMatch(/^[a-f0-9]{64}$/);
      const wrong = await op(h, "POST", `/v1/releases/${id}/accept`, {
        by: "owner@acme.example",
        record_digest: `sha256:${"0".repeat(64)}`,
      });
      expect(wrong.status).toBe(409);
      expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe(
        "record_changed",
      );
      const ok = await op(h, "POST", `/v1/releases/${id}/accept`, {
        by: "owner@acme.example",
        record_digest: `sha256:${digest}`,
      });
      expect(ok.status).toBe(200);
      expect(((await ok.json()) as { record_digest: string }).record_digest).toBe(digest);
      expect((await record(h, id)).acceptance?.record_digest).toBe(digest);
    },
  );

  it.skipIf(skip)(
    "an acceptance without expiry is final; one whose expiry passed can be replaced, history keeps both",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const id = await start(h);
      await drive(h);
      const first = await op(h, "POST", `/v1/releases/${id}/accept`, {
        by: "team-lead",
        expires_at: new Date(h.clock.now() + 86_400_000).toISOString(),
      });
      expect(first.status).toBe(200);
      const firstAt = h.clock.now();
      // Still valid: refused.
      h.clock.advance(3_600_000);
      const early = await op(h, "POST", `/v1/releases/${id}/accept`, { by: "someone-else" });
      expect(early.status).toBe(409);
      expect(((await early.json()) as { error: { message: string } }).error.message).toMatch(
        /already accepted by team-lead at .* until .*; a new acceptance is allowed once it has expired/,
      );
      expect((await record(h, id)).acceptance?.by).toBe("team-lead");

      // Past its expiry: a new acceptance replaces it (with no expiry: it is final).
      h.clock.advance(2 * 86_400_000);
      const later = await op(h, "POST", `/v1/releases/${id}/accept`, { by: "someone-else" });
      expect(later.status).toBe(200);
      const secondAt = h.clock.now();
      expect((await record(h, id)).acceptance).toMatchObject({
        by: "someone-else",
        at: secondAt,
        expires_at: null,
      });
      const final = await op(h, "POST", `/v1/releases/${id}/accept`, { by: "team-lead" });
      expect(final.status).toBe(409);
      expect(((await final.json()) as { error: { message: string } }).error.message).toMatch(
        /already accepted by someone-else at .* without expiry; an acceptance without expiry is final/,
      );
      // The history keeps both decisions.
      const hist = (await (await op(h, "GET", `/v1/releases/${id}/history?limit=1000`)).json()) as {
        entries: { kind: string; outcome: string; at: number; data: { actor?: string } }[];
      };
      const acceptances = hist.entries.filter(
        (x) => x.kind === "accepted_by_owner" && x.outcome === "accepted",
      );
      expect(acceptances.map((x) => [x.data.actor, x.at])).toEqual([
        ["team-lead", firstAt],
        ["someone-else", secondAt],
      ]);
    },
  );

  it.skipIf(skip)(
    "a compensated release records its recovery time (RTO) and the deviation",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      // No re-run window: the failed step compensates at once (docs/state-machine.md).
      const id = await start(h, recipe(2, { policy: { rerun_window_minutes: 0 } }));
      const rec0 = await record(h, id);
      const bad = rec0.intended.rollout_policy.steps.filter(
        (s) => s.name === "attach_queue_lane",
      )[1]?.index;
      await drive(
        h,
        (p) => (p.step_run_id.endsWith(`_${bad}_f`) ? "fail" : "pass"),
        400,
        () => h?.clock.advance(1000),
      );
      const rec = await record(h, id);
      expect(rec.release.state).toBe("rolled_back");
      expect(rec.recovery.exercised).toBe(true);
      expect(rec.recovery.rto_ms).toBeGreaterThan(0);
      expect(rec.recovery.rto_ms).toBe(
        (rec.recovery.finished_at ?? 0) - (rec.recovery.started_at ?? 0),
      );
      expect(rec.deviations.some((d) => /compensation ran/.test(d.what))).toBe(true);
      expect(rec.decisions.some((d) => d.automatic && d.by === "engine")).toBe(true);
    },
  );
});
