/**
 * Rollback prerequisites (docs/lifecycle.md), end to end on the embedded stack on both stores:
 * two releases succeed (v1 then v2), then v2 is rolled back. The engine asks each lane's
 * machine over SSH (`deploy.sh inspect`) whether v1's image is still there, the deploy user
 * can work and there is room, before anything is written:
 * - with v1's image removed from the machine (`docker rmi` on the target), the rollback is
 *   refused 422 naming each lane, the `image_present` check and the fix; no release was
 *   created and the lanes still serve v2;
 * - with the image loaded again, the rollback is admitted: every prerequisite is a passing
 *   evidence row on the new release (and in its history), it succeeds, and the lanes' health
 *   URLs answer from containers running v1's image again.
 */
import { expect, it } from "vitest";
import {
  askRollback,
  type PrerequisiteCheck as Check,
  describeInProcess,
  dockerOnTarget,
  servedImage,
  twoLaneRecipe,
  twoReleases,
  V2_IMAGE as V2,
} from "../support/e2e-harness.ts";

const T = 300_000;

describeInProcess(
  (kind) => `rollback prerequisites on ${kind}`,
  (start) => {
    it(
      "a rollback whose prerequisite fails (the previous image was removed from a lane) is refused naming lane, check and fix; with the image back it passes and the lanes serve it again",
      async () => {
        const e = await start({ recipe: twoLaneRecipe() });
        const { v1, r2, lanes } = await twoReleases(e, T);

        // Someone cleans up the machine: v1's image is gone.
        await dockerOnTarget(e, "rmi", v1.image as string);
        const before = ((await (await e.api("/v1/releases")).json()) as { releases: unknown[] })
          .releases.length;
        const refused = await askRollback(e, r2);
        const body = (await refused.json()) as {
          error: {
            code: string;
            message: string;
            problems: { path: string; message: string; fix: string }[];
          };
        };
        expect(refused.status, JSON.stringify(body)).toBe(422);
        expect(body.error.code).toBe("prerequisite_failed");
        for (const l of lanes) {
          const p = body.error.problems.find((x) => x.path === `lanes.${l}.image_present`);
          expect(p, JSON.stringify(body.error.problems)).toBeDefined();
          expect(p?.message).toContain(`image ${v1.image} is not on this machine`);
          expect(p?.fix).toContain(`docker pull ${v1.image}`);
          expect(body.error.message).toContain(`lane ${l} image_present`);
        }
        // Only the image check failed: access and capacity answered.
        expect(body.error.problems.map((p) => p.path.split(".").pop())).toEqual(
          lanes.map(() => "image_present"),
        );
        // Nothing was written and nothing changed on the machines.
        const after = ((await (await e.api("/v1/releases")).json()) as { releases: unknown[] })
          .releases.length;
        expect(after).toBe(before);
        for (const l of lanes) expect(await servedImage(e, l)).toBe(V2);

        // The image is loaded again: the rollback is admitted with every prerequisite passed.
        await dockerOnTarget(e, "pull", v1.image as string);
        const ok = await askRollback(e, r2);
        const started = (await ok.json()) as {
          id: string;
          prerequisites: { ok: boolean; image: string; checks: Check[] };
        };
        expect(ok.status, JSON.stringify(started)).toBe(201);
        expect(started.prerequisites.ok).toBe(true);
        expect(started.prerequisites.image).toBe(v1.image);
        // The release's own row first: the recipe's recovery class (reversible) allows it.
        expect(started.prerequisites.checks[0]).toMatchObject({
          check: "recovery_class",
          lane: null,
          outcome: "pass",
        });
        for (const l of lanes) {
          const rows = started.prerequisites.checks.filter((c) => c.lane === l);
          expect(rows.map((c) => [c.check, c.outcome])).toEqual([
            ["lane_credentials", "pass"],
            ["image_present", "pass"],
            ["lane_capacity", "pass"],
          ]);
        }
        const r3 = await e.waitFor(
          started.id,
          (r) => r.state === "succeeded",
          `${started.id} succeeded`,
          T,
        );
        const hist = (r3 as unknown as { history: { kind: string; message: string }[] }).history;
        expect(hist.find((h) => h.kind === "prerequisites")?.message).toContain(
          `${lanes.length * 3 + 1} passed, 0 failed`,
        );
        for (const l of lanes) expect(await servedImage(e, l)).toBe(v1.image);
      },
      4 * T,
    );
  },
);
