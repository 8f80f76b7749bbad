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
  callbackBody,
  callbackUrl,
  createRelease,
  getRecord,
  type Harness,
  makeHarness,
  preflightBody,
  preflightUrl,
  pumpOnce,
  recipe,
  STORE_KINDS,
  signedPost,
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
    let n = 5000;
    for (let i = 0; i < 400; i++) {
      const { t, fresh } = await pumpOnce(h, () => "skip");
      for (const p of fresh) {
        const run = { run_id: String(n++), run_attempt: 1 };
        await signedPost(h, preflightUrl(p.step_run_id), preflightBody(p, run));
        const image = imageOf(p);
        const checks = [
          { name: "connect", status: "ok" },
          { name: "health", status: "ok", ...(image ? { image } : {}) },
        ];
        await signedPost(
          h,
          callbackUrl(p.step_run_id),
          callbackBody(p.step_run_id, run, "pass", { checks }),
        );
      }
      if (t.performed === 0 && fresh.length === 0) {
        const due = (await h.store.pendingOutbox(id))
          .filter((r) => r.effect.type !== "deadline")
          .map((r) => r.due_at)
          .sort((a, b) => a - b)[0];
        if (due === undefined) break;
        h.clock.t = Math.max(h.clock.t, due);
      }
    }
    return { h, id, rec: await getRecord(h, id) };
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
