/**
 * Lanes marked for drills (docs/recovery-actions.md "Lanes marked for drills"), on both stores:
 * `GET /v1/models/:model/drills` answers the lanes of the model's last known good release (its
 * newest succeeded one) whose recipe marks them `drill: true`, and, when there are none (no
 * succeeded release, or none of its lanes marked), what to do about it; a release that did not
 * succeed does not change them.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import {
  createRelease,
  drive,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const MODEL = String(recipe().model);

/** The test recipe with the lanes at `marked` (indexes) marked for drills. */
const marking = (...marked: number[]): RecipeInput => {
  const r = recipe(3);
  return {
    ...r,
    lanes: (r.lanes ?? []).map((l, i) => (marked.includes(i) ? { ...l, drill: true } : l)),
  };
};

type Body = {
  drill_lanes: { release: string; lanes: string[] } | null;
  drill_lanes_fix?: string;
};

describe.each(STORE_KINDS)("lanes marked for drills on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });
  const lanes = async () => {
    const res = await op(h as Harness, "GET", `/v1/models/${MODEL}/drills`);
    expect(res.status).toBe(200);
    return (await res.json()) as Body;
  };

  it.skipIf(skip)(
    "the drill lanes are those the last known good release marks; none is answered with the fix",
    async () => {
      h = await makeHarness({ kind, seed: recipe(3) });
      // No succeeded release: no last known good to rehearse a recovery to.
      expect(await lanes()).toMatchObject({
        drill_lanes: null,
        drill_lanes_fix: expect.stringContaining(`${MODEL} has no succeeded release`),
      });

      const r1 = await createRelease(h, marking());
      await drive(h);
      expect((await h.store.getRelease(r1))?.state).toBe("succeeded");
      const none = await lanes();
      expect(none.drill_lanes).toEqual({ release: r1, lanes: [] });
      expect(none.drill_lanes_fix).toBe(
        `no lane of ${MODEL}'s last known good release ${r1} is marked for drills; mark the lanes a drill may use with \`drill: true\` in the recipe's lanes (docs/recovery-actions.md "Lanes marked for drills") and release it`,
      );

      const r2 = await createRelease(h, marking(1, 2));
      await drive(h);
      expect((await h.store.getRelease(r2))?.state).toBe("succeeded");
      const ids = (recipe(3).lanes ?? []).map((l) => l.id);
      const marked = await lanes();
      expect(marked.drill_lanes).toEqual({ release: r2, lanes: [ids[1], ids[2]] });
      expect(marked.drill_lanes_fix).toBeUndefined();

      // A release that rolls back is not the last known good: the marks stay r2's.
      const r3 = await createRelease(h, { ...marking(0), policy: { rerun_window_minutes: 0 } });
      // Its first runner step fails forward; compensation's steps pass.
      const bad = (await h.store.getRelease(r3))?.manifest.steps.find(
        (x) => x.kind === "runner",
      )?.index;
      await drive(h, (p) => (p.step_run_id.endsWith(`_${bad}_f`) ? "fail" : "pass"));
      expect((await h.store.getRelease(r3))?.state).toBe("rolled_back");
      expect((await lanes()).drill_lanes).toEqual({ release: r2, lanes: [ids[1], ids[2]] });
    },
  );
});
