/**
 * A runner result is judged by its checks too: a callback whose `overall` says pass (status
 * succeeded) but whose checks.json holds a check that failed is a failure, named by that check.
 * On both stores, through the signed callback route: the step run fails, the release rolls
 * back, and the step's error and history name the failed check and say why the pass did not
 * count; so does checks.json that cannot be judged (an object). Checks that are skipped, not run
 * or a migration's running checkpoint do not fail a pass.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  createRelease,
  driveReportingChecks,
  type Harness,
  makeHarness,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

describe.each(STORE_KINDS)("a pass with a failed check on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  /** Drives the release; every runner step reports overall pass with `checksOf(p)`. Bounded. */
  async function run(checksOf: (p: DispatchPayload) => unknown) {
    h = await makeHarness({ kind });
    const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 0 } }));
    return driveReportingChecks(h, id, checksOf);
  }

  it.skipIf(skip)(
    "status succeeded and overall pass with a failed health check: the step fails, named",
    async () => {
      const rec = await run((p) => [
        { name: "connect", status: "ok" },
        p.tool === "attach-queue-lane"
          ? { name: "health", status: "FAILED", http_status: 503, body: "model not loaded" }
          : { name: "health", status: "ok" },
      ]);
      expect(rec.state).toBe("rolled_back");
      const failed = rec.step_runs.find((s) => s.direction === "fwd" && s.state === "failed")!;
      expect(rec.manifest.steps[failed.step_index]?.name).toBe("attach_queue_lane");
      expect(failed.attempts.map((a) => a.state)).toEqual(["failed"]);
      expect(failed.last_error).toBe(
        "health check on lane-a answered 503: model not loaded (the runner reported overall pass; a result with a failed check is a failure)",
      );
      expect(
        rec.history.some(
          (e) => e.message.includes("reported succeeded (pass)") && e.step_run_id === failed.id,
        ),
      ).toBe(true);
    },
  );

  it.skipIf(skip)(
    "checks.json as an object instead of an array: the step fails, saying what checks.json must be",
    async () => {
      const rec = await run((p) =>
        p.tool === "attach-queue-lane"
          ? ({ health: { status: "failed" } } as unknown as unknown[])
          : [{ name: "health", status: "ok" }],
      );
      expect(rec.state).toBe("rolled_back");
      const failed = rec.step_runs.find((s) => s.direction === "fwd" && s.state === "failed")!;
      expect(rec.manifest.steps[failed.step_index]?.name).toBe("attach_queue_lane");
      expect(failed.last_error).toContain(
        "checks.json is an object, not an array of check records",
      );
    },
  );

  it.skipIf(skip)("skipped, not_run and running checks do not fail a pass", async () => {
    const rec = await run(() => [
      { name: "connect", status: "ok" },
      { name: "warm", status: "skipped" },
      { name: "stop-old", status: "not_run" },
      { name: "backfill", kind: "checkpoint", status: "running" },
    ]);
    expect(rec.state).toBe("succeeded");
    for (const sr of rec.step_runs.filter((s) => s.attempts.length > 0))
      expect(sr.attempts.map((a) => a.state)).toEqual(["succeeded"]);
  });
});
