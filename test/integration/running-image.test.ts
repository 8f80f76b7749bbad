/**
 * A runner step that deploys ends with the target's report of the running image (checks.json
 * `image`, as deploy.sh reads it from the container runtime); the engine compares it with the
 * image the step was to leave running. On both stores: a deploy whose report names another
 * digest fails with a reason naming the lane and both digests, and the release compensates; a
 * matching report passes; a report-less result is not judged.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { IMAGE, NEW_DIGEST, OLD_DIGEST, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import {
  createRelease,
  driveReportingChecks,
  type Harness,
  makeHarness,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

describe.each(STORE_KINDS)("running image report on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  /**
   * Drives the release; every runner step passes, reporting `imageOf(p)` as the running image
   * of its last phase (undefined: no image in checks.json).
   */
  async function run(imageOf: (p: DispatchPayload) => string | undefined) {
    h = await makeHarness({ kind });
    const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 0 } }));
    const rec = await driveReportingChecks(h, id, (p) => {
      const image = imageOf(p);
      return [
        { name: "connect", status: "ok" },
        { name: "health", status: "ok", ...(image ? { image } : {}) },
      ];
    });
    return { h, id, rec };
  }

  it.skipIf(skip)(
    "a deploy that leaves another digest running fails, naming lane and digests",
    async () => {
      // The target keeps running the previous image after attach-queue-lane "passed".
      const { rec } = await run((p) =>
        p.tool === "attach-queue-lane" ? PREVIOUS_IMAGE : String(p.args.image),
      );
      expect(rec.state).toBe("rolled_back");
      const failed = rec.step_runs.find((s) => s.direction === "fwd" && s.state === "failed")!;
      expect(rec.manifest.steps[failed.step_index]?.name).toBe("attach_queue_lane");
      expect(failed.attempts.map((a) => a.state)).toEqual(["failed"]);
      expect(failed.last_error).toBe(
        `the target reports lane lane-a running sha256:${OLD_DIGEST}, expected sha256:${NEW_DIGEST}: the deploy did not leave the manifest's image running`,
      );
      expect(
        rec.history.some((e) =>
          e.message.includes("reported succeeded (pass), but the target reports lane lane-a"),
        ),
      ).toBe(true);
    },
  );

  it.skipIf(skip)("matching reports, or none, let the release succeed", async () => {
    const { rec } = await run((p) =>
      p.tool === "attach-queue-lane" ? IMAGE.replace("ghcr.io", "mirror.local") : undefined,
    );
    expect(rec.state).toBe("succeeded");
    for (const sr of rec.step_runs.filter((s) => s.attempts.length > 0))
      expect(sr.attempts.map((a) => a.state)).toEqual(["succeeded"]);
  });
});
