/**
 * The lifecycle verbs that start a new release from a finished one (docs/lifecycle.md), on
 * both stores with admission enforced: rollback of a succeeded release runs the previous
 * admitted manifest again as an explicit rollback (its older signature passes the freshness
 * check only because the rollback is explicit) and the fleet ends where that manifest put it;
 * roll forward replaces a rolled-back release with a fixed manifest. Each verb is refused in
 * the states where it makes no sense, naming what the release accepts.
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

const OLDEST = `ghcr.io/acme/summarizer@sha256:${"a1".repeat(32)}`;
const FIXED = `ghcr.io/acme/summarizer@sha256:${"f0".repeat(32)}`;

let trust: Trust;
beforeAll(async () => {
  trust = await makeTrust();
});
afterAll(async () => {
  await trust?.close();
});

/**
 * The image each lane runs, as the simulated runners installed it: the `image` of the last
 * passing attach/restore dispatch per lane (the runner's own view of the target).
 */
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

describe.each(STORE_KINDS)("lifecycle verbs on %s", (kind) => {
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
  const state = async (hh: Harness, id: string) => (await getRecord(hh, id)).state;
  const error = async (res: Response) =>
    ((await res.json()) as { error: { code: string; message: string } }).error;

  it.skipIf(skip)(
    "rollback of a succeeded release runs the previous admitted manifest again; the fleet ends where it put it",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const fleet = new Fleet();
      const v1 = recipe(2, { image: PREVIOUS_IMAGE, previous_image: OLDEST });
      const p = await start(h, v1, T0);
      await drive(h, fleet.decide());
      expect(await state(h, p)).toBe("succeeded");
      const weightsAfterV1 = h.cp.weights("summarizer-v7");
      expect([...fleet.images.values()]).toEqual([PREVIOUS_IMAGE, PREVIOUS_IMAGE]);

      h.clock.advance(3_600_000);
      const r = await start(h, recipe(2), T0 + 3_600_000);
      await drive(h, fleet.decide());
      expect(await state(h, r)).toBe("succeeded");
      expect([...fleet.images.values()]).toEqual([IMAGE, IMAGE]);

      // The older manifest started plainly is a freeze/rollback attack: refused.
      const replay = await op(h, "POST", "/v1/releases", {
        recipe: v1,
        bundle: await trust.sign(v1, { issued_at: new Date(T0) }),
        attestations: [await trust.provenance(PREVIOUS_IMAGE)],
      });
      expect(replay.status).toBe(422);
      expect((await error(replay)).message).toMatch(/manifest_freshness/);

      // Rollback of the first release, which r has since replaced on the lanes: refused
      // naming r (its own lack of an earlier manifest: rollback-offer.test.ts).
      const early = await op(h, "POST", `/v1/releases/${p}/rollback`, { reason: "x" });
      expect(early.status).toBe(409);
      const earlyError = await error(early);
      expect(earlyError.code).toBe("superseded");
      expect(earlyError.message).toContain(`${r} (succeeded) of model summarizer-v7 came after it`);
      // …and is not offered there: what is offered is what the engine accepts.
      const first = (await (await op(h, "GET", `/v1/releases/${p}`)).json()) as {
        lifecycle_actions: { action: string }[];
      };
      expect(first.lifecycle_actions.map((a) => a.action)).not.toContain("rollback");
      const second = (await (await op(h, "GET", `/v1/releases/${r}`)).json()) as {
        lifecycle_actions: { action: string; effect: string }[];
      };
      expect(second.lifecycle_actions.find((a) => a.action === "rollback")?.effect).toContain(
        `(${p}'s)`,
      );

      const res = await op(h, "POST", `/v1/releases/${r}/rollback`, {
        reason: "v8 answers slowly",
        actor: "oncall@acme.example",
      });
      expect(res.status, await res.clone().text()).toBe(201);
      const body = (await res.json()) as {
        id: string;
        lineage: { verb: string; of: string; manifest_of: string };
        admission: { rollback: boolean; checks: { check: string; outcome: string }[] };
      };
      expect(body.lineage).toEqual({ verb: "rollback", of: r, manifest_of: p });
      expect(body.admission.rollback).toBe(true);
      expect(body.admission.checks.every((c) => c.outcome !== "fail")).toBe(true);
      await drive(h, fleet.decide());
      const rb = await getRecord(h, body.id);
      expect(rb.state).toBe("succeeded");
      // The environment: every lane runs v1's image again, traffic as v1 left it.
      expect([...fleet.images.values()]).toEqual([PREVIOUS_IMAGE, PREVIOUS_IMAGE]);
      expect(h.cp.weights("summarizer-v7")).toEqual(weightsAfterV1);
      // Its undo would restore what the lanes ran before it (v8), not v1's previous image.
      const full = (await (await op(h, "GET", `/v1/releases/${body.id}`)).json()) as {
        manifest: { image: string; previous_image: string };
        lifecycle_actions: { action: string }[];
      };
      expect(full.manifest).toMatchObject({ image: PREVIOUS_IMAGE, previous_image: IMAGE });
      expect(full.lifecycle_actions.map((a) => a.action)).toEqual(["rollback"]);
      const rec = ReleaseRecordDocument.parse(
        await (await op(h, "GET", `/v1/releases/${body.id}/record`)).json(),
      );
      expect(rec.deviations.some((d) => /explicit rollback/.test(d.what))).toBe(true);
      // The record's lineage: rolled back from r, running p's manifest; r was a plain start.
      expect(rec.lineage).toEqual({
        verb: "rollback",
        of: r,
        manifest_of: p,
        chain: [{ id: r, verb: null, of: null, manifest_of: null }],
      });
    },
  );

  it.skipIf(skip)(
    "roll forward replaces a rolled-back release with a fixed manifest; each verb refused where it makes no sense",
    async () => {
      h = await makeHarness({ kind, admission: trust.admission });
      const fleet = new Fleet();
      const bad = recipe(2, { policy: { rerun_window_minutes: 0 } });
      const r = await start(h, bad, T0);
      let failAt = "";
      await drive(
        h,
        fleet.decide((p) => {
          if (!failAt && p.tool === "attach-queue-lane" && p.step_run_id.endsWith("_f")) {
            const a = p.args as { lane: { id: string } };
            if (a.lane.id === "lane-b") failAt = p.step_run_id;
          }
          return p.step_run_id === failAt;
        }),
        400,
        () => h?.clock.advance(1000),
      );
      expect(await state(h, r)).toBe("rolled_back");
      // Compensation put the old image back on every lane it touched.
      expect(new Set(fleet.images.values())).toEqual(new Set([PREVIOUS_IMAGE]));

      const rb = await op(h, "POST", `/v1/releases/${r}/rollback`, {});
      expect(rb.status).toBe(409);
      expect((await error(rb)).message).toMatch(/succeeded release.*It accepts: roll-forward/);

      const otherModel = await op(h, "POST", `/v1/releases/${r}/roll-forward`, {
        recipe: { ...recipe(2, { image: FIXED }), model: "other-model" },
      });
      expect(otherModel.status).toBe(422);
      expect(await otherModel.text()).toMatch(/"path":"model"/);
      const asRollback = await op(h, "POST", `/v1/releases/${r}/roll-forward`, {
        recipe: recipe(2, { image: FIXED }),
        rollback: true,
      });
      expect(asRollback.status).toBe(400);
      expect(await asRollback.text()).toMatch(/"path":"body\.rollback"/);
      const same = await op(h, "POST", `/v1/releases/${r}/roll-forward`, { recipe: bad });
      expect(same.status).toBe(422);
      expect(await same.text()).toMatch(/"path":"image"/);

      const fixed = recipe(2, { image: FIXED });
      h.clock.advance(60_000);
      const res = await op(h, "POST", `/v1/releases/${r}/roll-forward`, {
        recipe: fixed,
        bundle: await trust.sign(fixed, { issued_at: new Date(h.clock.now()) }),
        attestations: [await trust.provenance(FIXED)],
      });
      expect(res.status, await res.clone().text()).toBe(201);
      const body = (await res.json()) as { id: string; lineage: unknown };
      expect(body.lineage).toEqual({ verb: "roll_forward", of: r });
      await drive(h, fleet.decide());
      expect(await state(h, body.id)).toBe("succeeded");
      expect([...fleet.images.values()]).toEqual([FIXED, FIXED]);
      const rec = ReleaseRecordDocument.parse(
        await (await op(h, "GET", `/v1/releases/${body.id}/record`)).json(),
      );
      expect(rec.lineage).toEqual({
        verb: "roll_forward",
        of: r,
        manifest_of: null,
        chain: [{ id: r, verb: null, of: null, manifest_of: null }],
      });
      expect((await getRecord(h, r)).state).toBe("rolled_back");

      const again = await op(h, "POST", `/v1/releases/${body.id}/roll-forward`, { recipe: fixed });
      expect(again.status).toBe(409);
      // Succeeded, but the release before it was rolled back: nothing admitted to go back to.
      expect((await error(again)).message).toMatch(
        /It accepts: .*no earlier admitted manifest of model summarizer-v7 to roll r\d+ back to/,
      );
      // The rolled-back release was rolled forward once: the fix now defines the lanes, so a
      // second roll forward from it is refused naming the fix, and nothing is offered there.
      const twice = await op(h, "POST", `/v1/releases/${r}/roll-forward`, { recipe: fixed });
      expect(twice.status).toBe(409);
      const e = await error(twice);
      expect(e.code).toBe("superseded");
      expect(e.message).toContain(`${body.id} (succeeded) of model summarizer-v7 came after it`);
      const old = (await (await op(h, "GET", `/v1/releases/${r}`)).json()) as {
        lifecycle_actions: unknown[];
      };
      expect(old.lifecycle_actions).toEqual([]);
    },
  );
});
