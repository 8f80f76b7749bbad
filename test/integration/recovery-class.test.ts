/**
 * Recovery classes in the release (docs/lifecycle.md "Recovery classes"), on both stores with
 * admission enforced, through the API, asserting what the control plane holds and what each
 * lane's runner installed: a roll_forward_only release failing after its `unsafe_after` step
 * pauses without compensating and offers roll forward (which closes it, nothing undone, and
 * runs the fix); abort past the point undoes nothing; one failing before the point compensates
 * as any release. The record states the class and the hold.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { ReleaseRecordDocument } from "../../engine/src/record/schema.ts";
import { makeTrust, type Trust } from "../support/admission-fixture.ts";
import { IMAGE, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import {
  drive,
  getRecord,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
  T0,
} from "./service-harness.ts";

const FIXED = `ghcr.io/acme/summarizer@sha256:${"f0".repeat(32)}`;

let trust: Trust;
beforeAll(async () => {
  trust = await makeTrust();
});
afterAll(async () => {
  await trust?.close();
});

/** The image each lane runs, as the simulated runners installed it (the target's view). */
class Fleet {
  readonly images = new Map<string, string>();
  decide = (fail?: (p: DispatchPayload) => boolean) => (p: DispatchPayload) => {
    if (fail?.(p)) return "fail" as const;
    if (p.tool === "attach-queue-lane" || p.tool === "restore-queue-lane") {
      const a = p.args as { lane: { id: string }; image: string };
      this.images.set(a.lane.id, a.image);
    }
    return "pass" as const;
  };
}

/** Fails the forward attach_queue_lane of `lane` (first dispatch only). */
const failAttachOf = (lane: string) => {
  let failed = "";
  return (p: DispatchPayload) => {
    if (p.tool !== "attach-queue-lane" || !p.step_run_id.endsWith("_f")) return false;
    if ((p.args as { lane: { id: string } }).lane.id !== lane) return false;
    if (failed && failed !== p.step_run_id) return false;
    failed = p.step_run_id;
    return true;
  };
};

const rollForwardOnly = (unsafeLane: string): RecipeInput =>
  recipe(2, {
    recovery_class: "roll_forward_only",
    unsafe_after: { step: "attach_queue_lane", lane: unsafeLane },
    policy: { rerun_window_minutes: 0 },
  });

describe.each(STORE_KINDS)("recovery classes on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  async function start(hh: Harness, r: RecipeInput, issuedAt: number): Promise<string> {
    const res = await op(hh, "POST", "/v1/releases", {
      recipe: r,
      bundle: await trust.sign(r, { issued_at: new Date(issuedAt) }),
      attestations: [await trust.provenance(r.image as string)],
    });
    expect(res.status, await res.clone().text()).toBe(201);
    return ((await res.json()) as { id: string }).id;
  }
  const full = async (hh: Harness, id: string) =>
    (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as {
      state: string;
      reason: string | null;
      step_runs: { id: string; direction: string; state: string }[];
      available_actions: { action: string; effect: string; target: string }[];
      lifecycle_actions: { action: string; effect: string }[];
      restore: { action: string; confirmed: unknown } | null;
      roll_forward_hold: { unsafe_after: number; why: string } | null;
    };
  const record = async (hh: Harness, id: string) =>
    ReleaseRecordDocument.parse(await (await op(hh, "GET", `/v1/releases/${id}/record`)).json());

  it.skipIf(skip)(
    "A roll-forward-only release failing after its named point pauses and offers roll forward",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const fleet = new Fleet();
      const id = await start(h, rollForwardOnly("lane-a"), T0);
      await drive(h, fleet.decide(failAttachOf("lane-b")), 400, () => h?.clock.advance(1000));
      const held = await full(h, id);
      expect(held.state).toBe("paused");
      expect(held.roll_forward_hold?.why).toMatch(/attach_queue_lane/);
      expect(held.reason).toMatch(
        /not compensated: the recipe's recovery class is roll_forward_only and step \d+ attach_queue_lane on lane-a may have taken effect, after which rollback is unsafe; roll forward with a fixed recipe \(baton roll-forward r\d+/,
      );
      // Nothing was undone: no backward step run, lane-a still runs the new image, and the
      // control plane holds what it held when lane-b's deploy failed.
      expect(held.step_runs.filter((s) => s.direction === "bwd")).toEqual([]);
      expect(fleet.images.get("lane-a")).toBe(IMAGE);
      const weightsAtFailure = h.cp.weights("summarizer-v7");
      expect(weightsAtFailure["lane-a"]).toBeGreaterThan(0);
      h.clock.advance(3_600_000);
      await drive(h, fleet.decide());
      expect((await full(h, id)).state).toBe("paused");
      expect(h.cp.weights("summarizer-v7")).toEqual(weightsAtFailure);
      // Offered: roll forward (lifecycle), retry of the failed step run, abort undoing nothing.
      expect(held.lifecycle_actions.map((a) => a.action)).toEqual(["roll_forward"]);
      expect(held.available_actions.map((a) => a.action).sort()).toEqual([
        "abort",
        "resume",
        "retry",
      ]);
      expect(held.available_actions.find((a) => a.action === "abort")?.effect).toMatch(
        /without undoing anything/,
      );

      const rec = await record(h, id);
      expect(rec.intended.recovery_class).toBe("roll_forward_only");
      expect(rec.intended.recovery_policy.unsafe_after).toMatchObject({
        name: "attach_queue_lane",
        lane: "lane-a",
      });
      expect(rec.recovery.exercised).toBe(false);
      expect(rec.recovery.held_for_roll_forward?.why).toMatch(/attach_queue_lane.*ended failed/);

      // Roll forward with a fixed image: the held release ends aborted, nothing undone; the
      // fix runs and every lane ends on it.
      // lane-b is out of service (its deploy failed after exclude_lane): the fix deploys it
      // first, while lane-a serves.
      const fixed = recipe(2, {
        image: FIXED,
        previous_image: IMAGE,
        rollout: {
          waves: [
            { lanes: ["lane-b"], traffic: 50 },
            { lanes: ["lane-a"], traffic: 100 },
          ],
        },
      });
      const res = await op(h, "POST", `/v1/releases/${id}/roll-forward`, {
        recipe: fixed,
        bundle: await trust.sign(fixed, { issued_at: new Date(h.clock.now()) }),
        attestations: [await trust.provenance(FIXED)],
      });
      expect(res.status, await res.clone().text()).toBe(201);
      const next = (await res.json()) as { id: string; lineage: unknown };
      expect(next.lineage).toEqual({ verb: "roll_forward", of: id });
      const closed = await full(h, id);
      expect(closed.state).toBe("aborted");
      expect(closed.reason).toMatch(/nothing was undone/);
      expect(closed.step_runs.filter((s) => s.direction === "bwd")).toEqual([]);
      await drive(h, fleet.decide());
      expect((await getRecord(h, next.id)).state).toBe("succeeded");
      expect([...fleet.images.values()]).toEqual([FIXED, FIXED]);
      const after = await record(h, id);
      expect(after.release.state).toBe("aborted");
      expect(after.recovery.held_for_roll_forward).not.toBeNull();
      expect(after.deviations.some((d) => /not compensated \(roll_forward_only/.test(d.what))).toBe(
        true,
      );
    },
  );

  it.skipIf(skip)(
    "abort past the point ends the release aborted with nothing undone; roll forward is then accepted",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const fleet = new Fleet();
      const id = await start(h, rollForwardOnly("lane-a"), T0);
      await drive(h, fleet.decide(failAttachOf("lane-b")), 400, () => h?.clock.advance(1000));
      expect((await full(h, id)).state).toBe("paused");
      const weights = h.cp.weights("summarizer-v7");
      const resumed = await op(h, "POST", `/v1/releases/${id}/abort`, { reason: "giving up" });
      expect(resumed.status, await resumed.clone().text()).toBe(200);
      await drive(h, fleet.decide());
      const r = await full(h, id);
      expect(r.state).toBe("aborted");
      expect(r.reason).toMatch(/nothing was undone.*roll forward/);
      expect(r.step_runs.filter((s) => s.direction === "bwd")).toEqual([]);
      expect(h.cp.weights("summarizer-v7")).toEqual(weights);
      expect(fleet.images.get("lane-a")).toBe(IMAGE);
      expect(r.lifecycle_actions.map((a) => a.action)).toEqual(["roll_forward"]);
    },
  );

  it.skipIf(skip)(
    "a roll-forward-only release failing before its named point compensates normally",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const fleet = new Fleet();
      const baseline = h.cp.weights("summarizer-v7");
      const id = await start(h, rollForwardOnly("lane-b"), T0);
      await drive(h, fleet.decide(failAttachOf("lane-a")), 400, () => h?.clock.advance(1000));
      const r = await full(h, id);
      expect(r.state).toBe("rolled_back");
      expect(r.step_runs.some((s) => s.direction === "bwd" && s.state === "succeeded")).toBe(true);
      expect(h.cp.weights("summarizer-v7")).toEqual(baseline);
      expect(fleet.images.get("lane-a")).toBe(PREVIOUS_IMAGE);
      const rec = await record(h, id);
      expect(rec.intended.recovery_class).toBe("roll_forward_only");
      expect(rec.recovery.exercised).toBe(true);
      expect(rec.recovery.held_for_roll_forward).toBeNull();
    },
  );

  it.skipIf(skip)(
    "rollback of a succeeded roll-forward-only release is refused by its recovery class; nothing is written or changed",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const fleet = new Fleet();
      // An earlier succeeded release of the model, so there is a manifest to roll back to.
      const p = await start(h, recipe(2, { image: PREVIOUS_IMAGE, previous_image: FIXED }), T0);
      await drive(h, fleet.decide());
      expect((await full(h, p)).state).toBe("succeeded");
      h.clock.advance(3_600_000);
      const id = await start(h, rollForwardOnly("lane-a"), T0 + 3_600_000);
      await drive(h, fleet.decide());
      expect((await full(h, id)).state).toBe("succeeded");
      // Not offered: its recovery class forbids it.
      expect((await full(h, id)).lifecycle_actions).toEqual([]);
      const weights = h.cp.weights("summarizer-v7");
      const before = (await (await op(h, "GET", "/v1/releases")).json()) as {
        releases: unknown[];
      };

      const res = await op(h, "POST", `/v1/releases/${id}/rollback`, { reason: "x" });
      const body = (await res.json()) as {
        error: { code: string; message: string; problems: { path: string; fix: string }[] };
      };
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(body.error.code).toBe("prerequisite_failed");
      expect(body.error.message).toMatch(
        new RegExp(
          `rollback of ${id} refused before anything ran: recovery_class: .*roll_forward_only`,
        ),
      );
      expect(body.error.problems).toHaveLength(1);
      expect(body.error.problems[0]?.path).toBe("recovery_class");
      expect(body.error.problems[0]?.fix).toMatch(/^roll forward instead/);
      // Nothing written, nothing changed: no new release; lanes and weights as they were.
      const after = (await (await op(h, "GET", "/v1/releases")).json()) as { releases: unknown[] };
      expect(after.releases.length).toBe(before.releases.length);
      expect(h.cp.weights("summarizer-v7")).toEqual(weights);
      expect([...fleet.images.values()]).toEqual([IMAGE, IMAGE]);
      expect((await full(h, id)).state).toBe("succeeded");

      // The same history with a reversible recipe: admitted, with a passing recovery_class row.
      h.clock.advance(3_600_000);
      const q = await start(h, recipe(2, { image: FIXED, previous_image: IMAGE }), T0 + 7_200_000);
      await drive(h, fleet.decide());
      expect((await full(h, q)).state).toBe("succeeded");
      const ok = await op(h, "POST", `/v1/releases/${q}/rollback`, { reason: "y" });
      const started = (await ok.json()) as {
        prerequisites: { checks: { check: string; lane: string | null; outcome: string }[] };
      };
      expect(ok.status, JSON.stringify(started)).toBe(201);
      expect(started.prerequisites.checks[0]).toMatchObject({
        check: "recovery_class",
        lane: null,
        outcome: "pass",
      });
    },
  );

  it.skipIf(skip)(
    "a recoverable release rolls traffic back, then waits for its restore action until an operator confirms it; the record has who, when and the RTO",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const fleet = new Fleet();
      const baseline = h.cp.weights("summarizer-v7");
      const restore = "restore the feature store snapshot with ./ops/restore-fs.sh";
      const r = recipe(2, {
        recovery_class: "recoverable",
        restore,
        policy: { rerun_window_minutes: 0 },
      });
      const id = await start(h, r, T0);
      await drive(h, fleet.decide(failAttachOf("lane-b")), 400, () => h?.clock.advance(1000));
      const waiting = await full(h, id);
      // Traffic is rolled back (the environment): weights back to the baseline, lane-a runs
      // the previous image again; but the release is not rolled back until the restore.
      expect(waiting.state).toBe("needs_operator");
      expect(h.cp.weights("summarizer-v7")).toEqual(baseline);
      expect(fleet.images.get("lane-a")).toBe(PREVIOUS_IMAGE);
      expect(waiting.step_runs.filter((s) => s.direction === "bwd").length).toBeGreaterThan(0);
      expect(
        waiting.step_runs
          .filter((s) => s.direction === "bwd")
          .every((s) => s.state === "succeeded"),
      ).toBe(true);
      expect(waiting.reason).toContain(restore);
      expect(waiting.restore).toMatchObject({ action: restore, confirmed: null });
      expect(waiting.available_actions.map((a) => a.action).sort()).toEqual([
        "abandon",
        "confirm_restore",
      ]);
      // It stays so: time passing does not end it, and its lanes stay claimed.
      h.clock.advance(3_600_000);
      await drive(h, fleet.decide());
      expect((await full(h, id)).state).toBe("needs_operator");
      const second = await op(h, "POST", "/v1/releases", {
        recipe: recipe(2, { image: FIXED, previous_image: PREVIOUS_IMAGE }),
        bundle: await trust.sign(recipe(2, { image: FIXED, previous_image: PREVIOUS_IMAGE }), {
          issued_at: new Date(h.clock.now()),
        }),
        attestations: [await trust.provenance(FIXED)],
      });
      expect(second.status, await second.clone().text()).toBe(409);
      const open = await record(h, id);
      expect(open.recovery.restore).toMatchObject({ action: restore, confirmed: null });
      expect(open.recovery.rto_ms).toBeNull();
      expect(open.known_gaps.some((g) => /nobody confirmed the restore action yet/.test(g))).toBe(
        true,
      );

      // Refusals name the field and the fix.
      const noReason = await op(h, "POST", `/v1/releases/${id}/confirm-restore`, {
        actor: "alice",
      });
      expect(noReason.status).toBe(422);
      expect(await noReason.text()).toMatch(/reason is required: say what you ran/);
      const abort = await op(h, "POST", `/v1/releases/${id}/abort`, { reason: "x" });
      expect(abort.status).toBe(409);
      expect(await abort.text()).toContain("confirm-restore");

      const at = h.clock.now();
      const ok = await op(h, "POST", `/v1/releases/${id}/confirm-restore`, {
        actor: "alice",
        reason: "restored snapshot fs-2041; row counts match",
      });
      expect(ok.status, await ok.clone().text()).toBe(200);
      const closed = await full(h, id);
      expect(closed.state).toBe("rolled_back");
      expect(h.cp.weights("summarizer-v7")).toEqual(baseline);
      const rec = await record(h, id);
      expect(rec.record_version).toBe(3);
      expect(rec.intended.recovery_class).toBe("recoverable");
      expect(rec.intended.recovery_policy.restore).toBe(restore);
      expect(rec.recovery.exercised).toBe(true);
      // The API names who did it as the token's role and the actor given.
      expect(rec.recovery.restore?.confirmed).toEqual({
        by: "operator:alice",
        at,
        what: "restored snapshot fs-2041; row counts match",
      });
      expect(rec.recovery.finished_at).toBe(at);
      expect(rec.recovery.traffic_restored_at).not.toBeNull();
      expect(rec.recovery.rto_ms).toBe(at - (rec.recovery.started_at ?? 0));
      expect(rec.recovery.rto_ms).toBeGreaterThan(3_600_000);
      expect(rec.decisions.find((d) => d.kind === "confirm_restore")).toMatchObject({
        by: "operator:alice",
        automatic: false,
      });
      expect(rec.known_gaps.some((g) => /restore action/.test(g))).toBe(false);
      expect(rec.digest).toMatch(/^[0-9a-f]{64}$/);
      // Its lanes are free again: the next release of the model starts.
      const third = recipe(2, { image: FIXED, previous_image: PREVIOUS_IMAGE });
      const next = await op(h, "POST", "/v1/releases", {
        recipe: third,
        bundle: await trust.sign(third, { issued_at: new Date(h.clock.now()) }),
        attestations: [await trust.provenance(FIXED)],
      });
      expect(next.status, await next.clone().text()).toBe(201);
    },
  );
  it.skipIf(skip)(
    "rollback of a succeeded recoverable release restores traffic and images, then waits for the rolled-back recipe's restore action; confirm-restore ends it succeeded with who, when and the RTO in its record",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const fleet = new Fleet();
      // The earlier succeeded release whose admitted manifest the rollback runs again.
      const p = await start(h, recipe(2, { image: PREVIOUS_IMAGE, previous_image: FIXED }), T0);
      await drive(h, fleet.decide());
      expect((await full(h, p)).state).toBe("succeeded");
      const leftByP = h.cp.weights("summarizer-v7");
      const restore = "restore the feature store snapshot with ./ops/restore-fs.sh";
      h.clock.advance(3_600_000);
      const id = await start(
        h,
        recipe(2, { recovery_class: "recoverable", restore }),
        T0 + 3_600_000,
      );
      await drive(h, fleet.decide());
      expect((await full(h, id)).state).toBe("succeeded");
      expect([...fleet.images.values()]).toEqual([IMAGE, IMAGE]);
      // Offered, saying the restore follows.
      const offered = (await full(h, id)).lifecycle_actions.find((a) => a.action === "rollback");
      expect(offered?.effect).toMatch(/restore action/);

      h.clock.advance(60_000);
      const asked = h.clock.now();
      const res = await op(h, "POST", `/v1/releases/${id}/rollback`, {
        reason: "p99 latency doubled",
        actor: "bob",
      });
      expect(res.status, await res.clone().text()).toBe(201);
      const q = ((await res.json()) as { id: string }).id;
      await drive(h, fleet.decide(), 400, () => h?.clock.advance(1000));
      // The environment: traffic and images are p's again.
      expect([...fleet.images.values()]).toEqual([PREVIOUS_IMAGE, PREVIOUS_IMAGE]);
      expect(h.cp.weights("summarizer-v7")).toEqual(leftByP);
      // But the rollback is not done until the restore action ran: it waits, lanes claimed.
      const waiting = await full(h, q);
      expect(waiting.state).toBe("needs_operator");
      expect(waiting.reason).toContain(restore);
      expect(waiting.reason).toContain(`baton confirm-restore ${q}`);
      expect(waiting.reason).toContain(id);
      expect(waiting.step_runs.filter((s) => s.direction === "bwd")).toEqual([]);
      expect(waiting.available_actions.map((a) => a.action).sort()).toEqual([
        "abandon",
        "confirm_restore",
      ]);
      expect(waiting.available_actions.find((a) => a.action === "confirm_restore")?.effect).toMatch(
        /ends succeeded/,
      );
      h.clock.advance(3_600_000);
      await drive(h, fleet.decide());
      expect((await full(h, q)).state).toBe("needs_operator");
      const other = recipe(2, { image: FIXED, previous_image: PREVIOUS_IMAGE });
      const blocked = await op(h, "POST", "/v1/releases", {
        recipe: other,
        bundle: await trust.sign(other, { issued_at: new Date(h.clock.now()) }),
        attestations: [await trust.provenance(FIXED)],
      });
      expect(blocked.status, await blocked.clone().text()).toBe(409);
      const open = await record(h, q);
      expect(open.lineage).toMatchObject({ verb: "rollback", of: id, manifest_of: p });
      expect(open.recovery.restore).toMatchObject({ action: restore, confirmed: null });
      expect(open.recovery.rto_ms).toBeNull();
      expect(open.known_gaps.some((g) => /nobody confirmed the restore action yet/.test(g))).toBe(
        true,
      );
      const abort = await op(h, "POST", `/v1/releases/${q}/abort`, { reason: "x" });
      expect(abort.status).toBe(409);
      expect(await abort.text()).toContain("confirm-restore");

      const at = h.clock.now();
      const ok = await op(h, "POST", `/v1/releases/${q}/confirm-restore`, {
        actor: "alice",
        reason: "restored snapshot fs-2041; row counts match",
      });
      expect(ok.status, await ok.clone().text()).toBe(200);
      const done = await full(h, q);
      expect(done.state).toBe("succeeded");
      expect([...fleet.images.values()]).toEqual([PREVIOUS_IMAGE, PREVIOUS_IMAGE]);
      expect(h.cp.weights("summarizer-v7")).toEqual(leftByP);
      const rec = await record(h, q);
      expect(rec.release.state).toBe("succeeded");
      expect(rec.recovery.exercised).toBe(true);
      expect(rec.recovery.restore?.action).toBe(restore);
      expect(rec.recovery.restore?.confirmed).toEqual({
        by: "operator:alice",
        at,
        what: "restored snapshot fs-2041; row counts match",
      });
      // The rollback's recovery: from its request to the restore's confirmation.
      expect(rec.recovery.started_at).toBe(asked);
      expect(rec.recovery.traffic_restored_at).toBe(rec.recovery.restore?.waited_since);
      expect(rec.recovery.finished_at).toBe(at);
      expect(rec.recovery.rto_ms).toBe(at - asked);
      expect(rec.decisions.find((d) => d.kind === "confirm_restore")).toMatchObject({
        by: "operator:alice",
        automatic: false,
      });
      expect(
        rec.deviations.some((d) =>
          new RegExp(`restore action run by operator:alice after the rollback of ${id}`).test(
            d.what,
          ),
        ),
      ).toBe(true);
      expect(rec.known_gaps.some((g) => /restore action/.test(g))).toBe(false);
      // Its lanes are free again.
      const next = await op(h, "POST", "/v1/releases", {
        recipe: other,
        bundle: await trust.sign(other, { issued_at: new Date(h.clock.now()) }),
        attestations: [await trust.provenance(FIXED)],
      });
      expect(next.status, await next.clone().text()).toBe(201);
    },
  );

  it.skipIf(skip)(
    "a wrong unsafe_after is refused 422 before anything is written, at the exact field, with what to write there",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const cases: [unknown, string, string][] = [
        [
          "attach_queue_lane",
          "unsafe_after",
          "Write `unsafe_after` as a mapping of the step after which rollback is unsafe: e.g. `unsafe_after: {step: attach_queue_lane, lane: lane-a}` (`lane` one of lane-a, lane-b).",
        ],
        [
          { step: "migrate_db" },
          "unsafe_after.step",
          "a lane step (exclude_lane, attach_queue_lane, assert_smoke_passed, advertise_capabilities, include_lane) with `unsafe_after.lane`, or a wave step (drain_wave, set_traffic, assert_traffic_observed) with `unsafe_after.wave`",
        ],
        [
          { step: "set_traffic", wave: 0 },
          "unsafe_after.wave",
          "Set `unsafe_after.wave` to a whole wave number, 1 to 2 (1 = the first wave)",
        ],
        [
          { step: "attach_queue_lane", lane: "lane-z" },
          "unsafe_after.lane",
          "Set `unsafe_after.lane` to one of lane-a, lane-b.",
        ],
      ];
      for (const [given, path, fix] of cases) {
        const bad = { ...rollForwardOnly("lane-a"), unsafe_after: given } as RecipeInput;
        // No bundle can be signed for it (signing compiles it): the contract check answers first.
        const res = await op(h, "POST", "/v1/releases", { recipe: bad });
        expect(res.status, JSON.stringify(given)).toBe(422);
        const e = (
          (await res.json()) as {
            error: { code: string; problems: { path: string; message: string; fix: string }[] };
          }
        ).error;
        expect(e.code).toBe("contract_failed");
        const p = e.problems.find((x) => x.path === path);
        expect(p, JSON.stringify(e.problems)).toBeDefined();
        expect(p?.fix).toContain(fix);
      }
      // Nothing was started, and the control plane was not written to.
      expect(await h.store.listReleases({ limit: 10 })).toEqual([]);
      expect(h.cp.history()).toEqual([]);
    },
  );
});
