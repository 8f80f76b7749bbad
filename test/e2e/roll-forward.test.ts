/**
 * Recovery class `roll_forward_only` and the `roll forward` verb end to end on the embedded
 * stack (engine with admission enforcing the demo's trust policy, reference control plane, SSH
 * target running deploy.sh, local runner), on both stores (docs/lifecycle.md "Recovery
 * classes", "Roll forward"). A two-lane release whose `unsafe_after` is lane-a's
 * `attach_queue_lane` fails lane-b's health check (wave 2, past the unsafe point):
 * - it is held `paused` with `roll_forward_hold`, offers `roll_forward`, and compensates
 *   nothing: no backward step run, the control plane keeps what it held at the failure and
 *   lane-a's container keeps running the candidate;
 * - `roll-forward` with a fixed recipe (signed as the demo signs) ends the held release
 *   `aborted` with nothing undone and starts the fix as a new release whose `lineage` names it;
 *   the fix succeeds: every lane's health URL answers from the fixed image and the control
 *   plane holds the fix's final weights. Roll forward from that succeeded release is refused
 *   409 naming why;
 * - `abort` of a held release ends it `aborted` without compensating: the target keeps the
 *   candidate and the control plane its weights.
 */
import { expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import {
  cpHistory,
  cpTraffic,
  describeInProcess,
  ended,
  type InProcess,
  postJson as post,
  type RecordJson,
  readJson,
  reconcilerRounds,
  refused,
  servedImage,
  settled,
  summarize,
  twoLaneRecipe,
  waitUntil,
} from "../support/e2e-harness.ts";
import { recordSchemaErrors } from "../support/record-schema.ts";

const T = 300_000;
const FIXED = `ghcr.io/acme/summarizer:v8-fix@sha256:${"f0".repeat(32)}`;

type Full = RecordJson & {
  roll_forward_hold: { unsafe_after: number; why: string } | null;
  lifecycle_actions: { action: string; command: string }[];
  available_actions: { action: string; effect: string }[];
  lineage: { verb: string; of: string } | null;
};

const full = (e: InProcess, id: string) => readJson<Full>(e, `/v1/releases/${id}`);

/** Two lanes, roll_forward_only past lane-a's deploy; no re-run window (a failure holds at once). */
function rollForwardOnly(): RecipeInput {
  const r = twoLaneRecipe({ rerun_window_minutes: 0 });
  const a = r.lanes?.[0]?.id ?? "lane-a";
  return {
    ...r,
    recovery_class: "roll_forward_only",
    unsafe_after: { step: "attach_queue_lane", lane: a },
  } as RecipeInput;
}

/** Starts the held release: lane-b's health check fails (wave 2), past the unsafe point. */
async function heldRelease(e: InProcess): Promise<{ id: string; held: Full }> {
  const m = e.manifest;
  const b = m.lanes[1]?.id;
  const failing = m.steps.find((s) => s.name === "attach_queue_lane" && s.lane === b);
  expect(failing).toBeDefined();
  e.stack.failHealthAt(failing?.index ?? -1);
  const id = await e.startRelease();
  await e.waitFor(
    id,
    (x) => (x.state === "paused" && settled(x)) || !["running", "pending"].includes(x.state),
    `${id} to be held for roll forward`,
    T,
  );
  const held = await full(e, id);
  expect(held.state, summarize(held)).toBe("paused");
  expect(held.roll_forward_hold, held.reason ?? "").not.toBeNull();
  expect(held.reason).toMatch(
    /not compensated: the recipe's recovery class is roll_forward_only and step \d+ attach_queue_lane on lane-a may have taken effect, after which rollback is unsafe/,
  );
  expect(held.lifecycle_actions.map((x) => x.action)).toEqual(["roll_forward"]);
  expect(held.available_actions.find((x) => x.action === "abort")?.effect).toMatch(
    /without undoing anything/,
  );
  expect(held.step_runs.filter((s) => s.direction === "bwd")).toEqual([]);
  return { id, held };
}

/** Nothing was undone: no backward step run, control plane and lane-a as at the failure. */
async function nothingUndone(
  e: InProcess,
  id: string,
  atFailure: { weights: Record<string, number>; excluded: string[] },
  writes: number,
): Promise<void> {
  const r = await e.record(id);
  expect(r.step_runs.filter((s) => s.direction === "bwd")).toEqual([]);
  expect(await cpTraffic(e, e.manifest.model)).toEqual(atFailure);
  expect((await cpHistory(e, id)).length).toBe(writes);
  expect(await servedImage(e, e.manifest.lanes[0]?.id ?? "")).toBe(e.manifest.image);
}

describeInProcess(
  (kind) => `roll forward on the embedded stack on ${kind}`,
  (start) => {
    it(
      "a roll_forward_only release failing past its unsafe step is held without compensating; roll forward ends it aborted, nothing undone, and the fix runs every lane",
      async () => {
        const e = await start({ recipe: rollForwardOnly(), admission: "sign" });
        const m = e.manifest;
        const [a, b] = m.lanes.map((l) => l.id) as [string, string];
        const { id } = await heldRelease(e);
        // The environment as the failure left it: lane-a runs the candidate with wave 1's share.
        const atFailure = await cpTraffic(e, m.model);
        expect(atFailure.weights[a]).toBeGreaterThan(0);
        expect(await servedImage(e, a)).toBe(m.image);
        const writes = (await cpHistory(e, id)).length;
        // It stays held: a few reconciler rounds later nothing was undone.
        await reconcilerRounds(e, 5);
        expect((await e.record(id)).state).toBe("paused");
        await nothingUndone(e, id, atFailure, writes);

        // The fix: a new image, lane-b (out of service since its deploy failed) first.
        const fixed: RecipeInput = {
          ...structuredClone(e.recipe),
          image: FIXED,
          previous_image: m.image,
          rollout: {
            waves: [
              { lanes: [b], traffic: 50 },
              { lanes: [a], traffic: 100 },
            ],
          },
        };
        const res = await e.api(`/v1/releases/${id}/roll-forward`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: await e.stack.startBody(fixed),
        });
        const started = (await res.json()) as { id: string; lineage: unknown };
        expect(res.status, JSON.stringify(started)).toBe(201);
        expect(started.lineage).toEqual({ verb: "roll_forward", of: id });
        // The held release ended aborted with nothing undone.
        const closed = await full(e, id);
        expect(closed.state, summarize(closed)).toBe("aborted");
        expect(closed.reason).toMatch(/nothing was undone/);
        expect(closed.step_runs.filter((s) => s.direction === "bwd")).toEqual([]);
        expect((await cpHistory(e, id)).length).toBe(writes);

        const next = await e.waitFor(started.id, ended, `${started.id} (the fix) to end`, T);
        expect(next.state, summarize(next)).toBe("succeeded");
        expect((await full(e, started.id)).lineage).toEqual({ verb: "roll_forward", of: id });
        // The lanes run the fix (bounded: a lane reports once its deploy run ends).
        const served = await waitUntil(
          () => Promise.all([a, b].map((l) => servedImage(e, l))),
          (imgs) => imgs.every((img) => img === FIXED),
          "every lane to serve the fixed image",
          60_000,
          (imgs) => JSON.stringify(imgs),
        );
        expect(served).toEqual([FIXED, FIXED]);
        // The control plane holds the fix's final weights: its last traffic write, no lane out.
        const fixWrites = await cpHistory(e, started.id);
        const lastTraffic = fixWrites.findLast((c) => c.kind === "set_traffic");
        expect(lastTraffic, JSON.stringify(fixWrites.map((c) => c.kind))).toBeDefined();
        const cp = await cpTraffic(e, m.model);
        expect(cp.excluded).toEqual([]);
        expect(cp.weights).toEqual(lastTraffic?.after);
        expect(Object.values(cp.weights).reduce((x, y) => x + y, 0)).toBe(100);

        // The held release's record: class, the hold, nothing exercised; valid against the schema.
        const rec = (await (await e.api(`/v1/releases/${id}/record`)).json()) as {
          release: { state: string };
          intended: { recovery_class: string };
          recovery: { exercised: boolean; held_for_roll_forward: unknown };
        };
        expect(recordSchemaErrors(rec)).toBeNull();
        expect(rec.release.state).toBe("aborted");
        expect(rec.intended.recovery_class).toBe("roll_forward_only");
        expect(rec.recovery.exercised).toBe(false);
        expect(rec.recovery.held_for_roll_forward).not.toBeNull();

        // Roll forward from a release neither held nor failed (the fix succeeded): refused.
        const again = await e.api(`/v1/releases/${started.id}/roll-forward`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: await e.stack.startBody({
            ...fixed,
            image: `ghcr.io/acme/summarizer:v9@sha256:${"9a".repeat(32)}`,
          }),
        });
        const refusal = await again.text();
        expect(again.status, refusal).toBe(409);
        expect(refusal).toContain(`${started.id} is succeeded`);
        expect(refusal).toMatch(/roll forward takes a rolled_back, aborted or abandoned release/);
      },
      3 * T,
    );

    it(
      "abort of a release held for roll forward ends it aborted without compensating: the target keeps the candidate",
      async () => {
        const e = await start({ recipe: rollForwardOnly(), admission: "sign" });
        const m = e.manifest;
        const { id } = await heldRelease(e);
        const atFailure = await cpTraffic(e, m.model);
        const writes = (await cpHistory(e, id)).length;
        expect(await refused(e, id, "abort", {}, 422)).toMatch(/reason is required/);
        const res = await post(e, `/v1/releases/${id}/abort`, {
          reason: "the fix needs a day",
          actor: "alice",
        });
        expect(res.status, await res.clone().text()).toBe(200);
        const r = await full(e, id);
        expect(r.state, summarize(r)).toBe("aborted");
        expect(r.reason).toMatch(
          /^aborted by operator:alice: the fix needs a day; nothing was undone: .*roll forward/,
        );
        expect(r.lifecycle_actions.map((x) => x.action)).toEqual(["roll_forward"]);
        // Nothing undone now or a few reconciler rounds later.
        await reconcilerRounds(e, 5);
        await nothingUndone(e, id, atFailure, writes);
        const rec = (await (await e.api(`/v1/releases/${id}/record`)).json()) as {
          decisions: { kind: string; by: string; why: string }[];
          recovery: { exercised: boolean; rto_ms: number | null };
        };
        expect(recordSchemaErrors(rec)).toBeNull();
        expect(rec.decisions.find((d) => d.kind === "abort")).toMatchObject({
          by: "operator:alice",
        });
        expect(rec.recovery).toMatchObject({ exercised: false, rto_ms: null });
        // Finished: a second abort is refused naming the state.
        expect(await refused(e, id, "abort", { reason: "again" })).toContain(
          `release ${id} is aborted`,
        );
      },
      3 * T,
    );
  },
);
