/**
 * A rehearsal on the lanes marked for drills (docs/recovery-actions.md "Rehearsing on the drill
 * lanes"), on both stores with a fake clock: `POST /v1/models/:model/drills/rehearse` takes the
 * drill lanes of the last known good release out of routing and puts them back, and only them
 * (read at the control plane double, which records every call; no runner is dispatched); it
 * records a passed drill with the RTO measured from the decision to the verified evacuation,
 * which clears the drill schedule's due drill; it writes no release, so the last known good and
 * the release that stands are unchanged. Refused: no drill lanes (with the fix), a release of the
 * model in flight, no reason, no other lane to take the drill lanes' share. A write the control
 * plane acknowledges but drops is caught by the read-back: the drill is recorded failed. One
 * rehearsal of a model at a time (a store lease).
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { ControlPlane } from "../../engine/src/ports/control-plane.ts";
import { rehearsalLease } from "../../engine/src/service/use-cases/drills.ts";
import {
  createRelease,
  drive,
  FakeClock,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  seedControlPlane,
  skipStore,
} from "./service-harness.ts";

const MODEL = String(recipe().model);
const INTERVAL = 30_000;
/** What each control-plane write takes on the fake clock: the RTO is made of them. */
const WRITE_MS = 40;
const IDS = (recipe(3).lanes ?? []).map((l) => l.id);

/** The three-lane test recipe with the lanes at `marked` (indexes) marked for drills. */
const marking = (marked: number[], extra: Partial<RecipeInput> = {}): RecipeInput => {
  const r = recipe(3, extra);
  return {
    ...r,
    lanes: (r.lanes ?? []).map((l, i) => (marked.includes(i) ? { ...l, drill: true } : l)),
  };
};

type Rehearsal = {
  drill: {
    drill: string;
    passed: boolean;
    rto_ms: number | null;
    rpo_ms: number | null;
    rows_lost: number | null;
    restored: boolean;
    verified: boolean;
    release: string;
    by: string;
    reason: string;
    problems: string[];
  };
  release: string;
  lanes: string[];
  before: { lane: string; weight: number; excluded: boolean }[];
  evacuated: { lane: string; weight: number; excluded: boolean }[];
  returned: { lane: string; weight: number; excluded: boolean }[];
  decided_at: number;
  recovered_at: number;
};

describe.each(STORE_KINDS)("rehearsal on the drill lanes on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  /** An engine whose control plane is the double, each write taking `WRITE_MS` on the clock. */
  const engine = async () => {
    const clock = new FakeClock();
    const cp = new MemoryControlPlane({ model: MODEL, now: () => clock.now() });
    seedControlPlane(cp, recipe(3));
    const timed: ControlPlane = {
      apply: (o, ctx) => {
        clock.advance(WRITE_MS);
        return cp.apply(o, ctx);
      },
      observe: (o, ctx) => cp.observe(o, ctx),
      lanes: (m) => cp.lanes(m),
    };
    return makeHarness({
      kind,
      clock,
      cp,
      controlPlane: timed,
      config: { driftIntervalMs: INTERVAL },
    });
  };
  /** Drives one release of `input` (lane 1 marked for drills) to succeeded; its id. */
  const succeeded = async (e: Harness, input: RecipeInput = marking([1])): Promise<string> => {
    const id = await createRelease(e, input);
    await drive(e);
    expect((await e.store.getRelease(id))?.state).toBe("succeeded");
    return id;
  };
  const rehearse = (body: unknown = { reason: "quarterly rehearsal", actor: "dana" }) =>
    op(h as Harness, "POST", `/v1/models/${MODEL}/drills/rehearse`, body);

  it.skipIf(skip)(
    "only the drill lanes are taken out and put back; a passed drill with its RTO is recorded and clears the due drill; no release is written",
    async () => {
      h = await engine();
      const r1 = await succeeded(h, marking([1], { policy: { drill_every_days: 7 } }));
      // The schedule's look: the model has no passed drill, so one is due on r1.
      h.clock.advance(INTERVAL);
      await h.engine.tick();
      await drive(h);
      const due = async () =>
        (
          (await (await op(h as Harness, "GET", `/v1/releases/${r1}`)).json()) as {
            drill_due: unknown;
          }
        ).drill_due;
      expect(await due()).not.toBeNull();

      const weights = h.cp.weights(MODEL);
      const calls = h.cp.calls.length;
      const dispatched = h.dispatcher.accepted.length;
      const releases = (await h.store.listReleases({ limit: 50 })).map((r) => r.id);
      const res = await rehearse();
      expect(res.status).toBe(201);
      const body = (await res.json()) as Rehearsal;

      // Every control-plane call of the rehearsal is a marker write on a drill lane: out, then back.
      const made = h.cp.calls.slice(calls);
      expect(
        made.map((c) =>
          c.op.op === "set_marker" ? `${c.method} ${c.op.lane} ${c.op.present}` : c.op.op,
        ),
      ).toEqual([`apply ${IDS[1]} true`, `apply ${IDS[1]} false`]);
      for (const c of made) expect(c.result).toMatchObject({ outcome: "ok" });
      // The other lanes got no write; their weights, and the drill lane's, are as before.
      expect(h.cp.weights(MODEL)).toEqual(weights);
      expect(h.cp.lane(IDS[1] as string)?.excluded).toBe(false);
      // The evacuation read back: the drill lane out of routing, the others unchanged.
      expect(body.evacuated.find((l) => l.lane === IDS[1])?.excluded).toBe(true);
      expect(body.evacuated.filter((l) => l.lane !== IDS[1])).toEqual(
        body.before.filter((l) => l.lane !== IDS[1]),
      );
      expect(body.returned).toEqual(body.before);
      // No runner step was dispatched and no release was written.
      expect(h.dispatcher.accepted.length).toBe(dispatched);
      expect((await h.store.listReleases({ limit: 50 })).map((r) => r.id)).toEqual(releases);

      // The drill: passed, RTO from the decision to the verified evacuation (one write), no state.
      expect(body.lanes).toEqual([IDS[1]]);
      expect(body.release).toBe(r1);
      expect(body.drill).toMatchObject({
        passed: true,
        rto_ms: WRITE_MS,
        rpo_ms: 0,
        rows_lost: 0,
        restored: true,
        verified: true,
        release: r1,
        by: "operator:dana",
        reason: "quarterly rehearsal",
        problems: [],
      });
      const listed = (await (await op(h, "GET", `/v1/models/${MODEL}/drills`)).json()) as {
        drills: { drill: string }[];
        drill_lanes: { release: string; lanes: string[] };
      };
      expect(listed.drills.map((d) => d.drill)).toEqual([body.drill.drill]);
      // The last known good is still r1, with its drill lanes.
      expect(listed.drill_lanes).toEqual({ release: r1, lanes: [IDS[1]] });

      // The schedule's next look clears the due drill.
      h.clock.advance(INTERVAL);
      await h.engine.tick();
      await drive(h);
      expect(await due()).toBeNull();
      const history = (await h.store.getHistory(r1, { limit: 1000 })).map((e) => e.kind);
      expect(history).toContain("drill_due_cleared");
    },
  );

  it.skipIf(skip)(
    "a write out the control plane acknowledges but drops is caught by the read-back: the drill is recorded failed and the lane put back",
    async () => {
      h = await engine();
      await succeeded(h);
      const weights = h.cp.weights(MODEL);
      h.cp.faults.arm({ mode: "lie", count: 1, match: ":out" });
      const res = await rehearse();
      expect(res.status).toBe(201);
      const body = (await res.json()) as Rehearsal;
      expect(body.drill).toMatchObject({
        passed: false,
        verified: false,
        rto_ms: null,
        restored: true,
        rpo_ms: 0,
        rows_lost: 0,
      });
      expect(body.drill.problems).toEqual([
        `after the drill lanes were taken out: drill lane ${IDS[1]} is in routing, not out of it`,
      ]);
      expect(body.recovered_at).toBeNull();
      // The put-back was still sent; the lanes are as before.
      expect(h.cp.lane(IDS[1] as string)?.excluded).toBe(false);
      expect(h.cp.weights(MODEL)).toEqual(weights);
      // A failed drill does not count as a passed one.
      const listed = (await (await op(h, "GET", `/v1/models/${MODEL}/drills`)).json()) as {
        drills: { passed: boolean }[];
      };
      expect(listed.drills.map((d) => d.passed)).toEqual([false]);
    },
  );

  it.skipIf(skip)(
    "one rehearsal of a model at a time: refused while another holds its lease, which each gives back",
    async () => {
      h = await engine();
      await createRelease(h, marking([1]));
      await drive(h);
      const lease = { name: rehearsalLease(MODEL), owner: "other-engine" };
      expect(
        await h.store.takeLease({ ...lease, until: h.clock.now() + 60_000, now: h.clock.now() }),
      ).toBe(true);
      const writes = h.cp.calls.length;
      let res = await rehearse();
      expect(res.status).toBe(409);
      expect(await res.text()).toContain(`another rehearsal of ${MODEL} is under way`);
      expect(h.cp.calls.length).toBe(writes);
      await h.store.takeLease({ ...lease, until: 0, now: h.clock.now() });
      // Each rehearsal gives its lease back: two in a row both run.
      for (let i = 0; i < 2; i++) {
        res = await rehearse();
        expect(res.status).toBe(201);
        expect(((await res.json()) as Rehearsal).drill.passed).toBe(true);
      }
    },
  );

  it.skipIf(skip)(
    "refused: no reason, no drill lanes (with the fix), a release in flight, no other lane with traffic",
    async () => {
      h = await engine();
      const calls = () => h?.cp.calls.filter((c) => c.method === "apply").length;

      // No reason: 400 naming the field; a blank one too.
      for (const b of [{ actor: "dana" }, { reason: "  ", actor: "dana" }]) {
        const res = await rehearse(b);
        expect(res.status).toBe(400);
        expect(await res.text()).toContain("reason");
      }

      // No succeeded release: no drill lanes.
      let res = await rehearse();
      expect(res.status).toBe(409);
      expect(await res.text()).toContain(`${MODEL} has no succeeded release`);

      // A last known good without marks: the drill_lanes_fix wording.
      const r1 = await createRelease(h, marking([]));
      await drive(h);
      res = await rehearse();
      expect(res.status).toBe(409);
      expect(await res.text()).toContain(
        `no lane of ${MODEL}'s last known good release ${r1} is marked for drills`,
      );

      // A release of the model in flight.
      const r2 = await createRelease(h, marking([1]));
      res = await rehearse();
      expect(res.status).toBe(409);
      expect(await res.text()).toContain(`release ${r2} of ${MODEL} is`);
      await drive(h);
      expect((await h.store.getRelease(r2))?.state).toBe("succeeded");

      // Every lane with traffic marked: nothing would take their share.
      const weights = h.cp.weights(MODEL);
      const r3 = await createRelease(
        h,
        marking(IDS.map((_, i) => i).filter((i) => (weights[IDS[i] as string] ?? 0) > 0)),
      );
      await drive(h);
      expect((await h.store.getRelease(r3))?.state).toBe("succeeded");
      const writes = calls();
      res = await rehearse();
      expect(res.status).toBe(409);
      expect(await res.text()).toContain("would leave the model with none");
      // No refusal wrote anything at the control plane.
      expect(calls()).toBe(writes);
      expect((await (await op(h, "GET", `/v1/models/${MODEL}/drills`)).json()).drills).toEqual([]);
    },
  );

  it.skipIf(skip)(
    "a rehearsal and a posted drill are written in the timeline of an open incident that names the model, once each, and not in another's",
    async () => {
      h = await engine();
      const r1 = await succeeded(h);
      const declare = (models: string[]) =>
        op(h as Harness, "POST", "/v1/incidents", {
          severity: "sev2",
          summary: "answers truncated",
          models,
          commander: "maria",
          actor: "maria",
        });
      const mine = await declare([MODEL]);
      expect(mine.status, await mine.clone().text()).toBe(201);
      const other = await declare(["another-model"]);
      expect(other.status, await other.clone().text()).toBe(201);
      const idOf = async (r: Response) =>
        ((await r.json()) as { incident: { id: string } }).incident.id;
      const rehearsed = await rehearse();
      expect(rehearsed.status).toBe(201);
      const { drill } = (await rehearsed.json()) as Rehearsal;
      const posted = {
        drill: "d1",
        passed: false,
        rto_ms: null,
        rpo_ms: null,
        rows_lost: null,
        restored: false,
        verified: false,
        problems: ["the restore tool exited 3"],
        actor: "lee",
      };
      expect((await op(h, "POST", `/v1/models/${MODEL}/drills`, posted)).status).toBe(201);
      // The same drill sent again (a retry) is not a second timeline line.
      expect((await op(h, "POST", `/v1/models/${MODEL}/drills`, posted)).status).toBe(201);
      const timeline = async (id: string) =>
        (
          (await (await op(h as Harness, "GET", `/v1/incidents/${id}`)).json()) as {
            timeline: { kind: string; actor: string | null; text: string }[];
          }
        ).timeline.filter((e) => e.kind === "recovery");
      expect((await timeline(await idOf(mine))).map((e) => [e.actor, e.text])).toEqual([
        [
          "operator:dana",
          `rehearsal ${drill.drill} of ${MODEL} passed: RTO ${WRITE_MS} ms, RPO 0 ms, rows lost 0 (release ${r1}); reason: quarterly rehearsal`,
        ],
        [
          "operator:lee",
          `drill d1 of ${MODEL} FAILED: RTO not measured, RPO not measured, rows lost not counted; first problem: the restore tool exited 3`,
        ],
      ]);
      expect(await timeline(await idOf(other))).toEqual([]);
    },
  );
});
