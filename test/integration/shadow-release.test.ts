/**
 * A release with a shadow phase through the engine, on both stores (the gate rig: the embedded
 * metrics source reading the reference router's traffic generator over the control-plane double,
 * a fake clock): while the phase is held at its gate the candidate has answered no user request
 * and the router has mirrored copies to the shadow-safe lane; the shadow gate passes on them, the
 * release goes on and succeeds, and the record names the phase and what was mirrored.
 */
import { expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import {
  gatedRecipe,
  IMAGE_UNDER_TEST as IMAGE,
  run,
  SHADOW_SAFE,
  start,
} from "../support/gate-rig.ts";
import { describeEachRig } from "./store-suites.ts";

function shadowRecipe(): RecipeInput {
  const r = gatedRecipe();
  return {
    ...r,
    lanes: r.lanes.map((l, i) =>
      i === 0
        ? {
            ...l,
            shadow_safe: SHADOW_SAFE,
          }
        : l,
    ),
    rollout: {
      waves: [
        { lanes: ["lane-a"], traffic: 0, shadow: { share: 50, rate_per_s: 1000 } },
        { lanes: ["lane-b"], traffic: 50 },
        { lanes: ["lane-c"], traffic: 100 },
      ],
    },
  } as RecipeInput;
}

describeEachRig("shadow phase on %s", ({ skip, open }) => {
  it.skipIf(skip)(
    "mirrors to the shadow-safe lane with no user exposed, passes its gate on the copies, and records the phase",
    async () => {
      const g = await open();
      g.traffic.setShadow({ caps: { share: 50, rate_per_s: 1000 }, safe: new Set(["lane-a"]) });
      const id = await start(g.h, shadowRecipe());
      const shadowPassed = async () =>
        (await g.h.store.listEvidence(id)).some((e) => e.wave === 0 && e.decision === "pass");
      await run(g, { until: shadowPassed });
      expect(await shadowPassed()).toBe(true);
      // Held through the shadow phase: the candidate answered no user, only mirrored copies.
      const users = g.traffic.snapshot().filter((c) => c.image === IMAGE);
      expect(users.reduce((n, c) => n + c.requests, 0)).toBe(0);
      const mirrored = g.traffic.shadowCounts();
      expect(mirrored.mirrored).toBeGreaterThanOrEqual(400);
      expect(Object.keys(mirrored.lanes)).toEqual(["lane-a"]);

      await run(g);
      expect((await g.h.store.getRelease(id))?.state).toBe("succeeded");
      const rec = (await g.h.engine.service.releaseRecord(id)) as unknown as {
        intended: { rollout_policy: { waves: { phase?: string }[] } };
        evidence: {
          shadow?: { phase: string; wave: number; mirrored: number; baseline: number }[];
        };
      };
      expect(rec.intended.rollout_policy.waves.map((w) => w.phase ?? "wave")).toEqual([
        "shadow",
        "wave",
        "wave",
      ]);
      expect(rec.evidence.shadow).toHaveLength(1);
      const phase = rec.evidence.shadow?.[0];
      expect(phase).toMatchObject({ phase: "shadow", wave: 0 });
      expect(phase?.mirrored).toBeGreaterThanOrEqual(400);
      expect(phase?.baseline).toBe(phase?.mirrored);
    },
  );
});
