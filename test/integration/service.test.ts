/**
 * The release service end to end through the HTTP app, on a real store (SQLite file; Postgres
 * too when BATON_TEST_DATABASE_URL is set) with the in-memory dispatcher and control plane.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  createRelease,
  drive,
  getRecord,
  type Harness,
  makeHarness,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

describe.each(STORE_KINDS)("release service on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it.skipIf(skip)("drives a release to succeeded by signed callbacks", async () => {
    h = await makeHarness({ kind });
    const r = recipe(2);
    const id = await createRelease(h, r);
    await drive(h);
    const rec = await getRecord(h, id);
    expect(rec.state).toBe("succeeded");
    const steps = rec.manifest.steps.length;
    expect(rec.high_water_mark).toBe(steps - 1);
    // Every forward step ran once; each operation key applied once at the doubles.
    expect(rec.step_runs.filter((s) => s.direction === "fwd")).toHaveLength(steps);
    expect(rec.step_runs.every((s) => s.state === "succeeded")).toBe(true);
    for (const [key, n] of h.dispatcher.acceptedByKey) expect(n, key).toBe(1);
    for (const [key, n] of Object.entries(h.cp.applicationCounts())) expect(n, key).toBe(1);
    const runnerSteps = rec.manifest.steps.filter((s) => s.kind === "runner").length;
    expect(h.dispatcher.accepted).toHaveLength(runnerSteps);
    expect(rec.attempt_results).toHaveLength(runnerSteps);
    expect(h.cp.weights()).toEqual({ "lane-a": 50, "lane-b": 50 });
    // Only deadlines that no longer apply are left (they fire later as no-ops).
    const left = await h.store.pendingOutbox(id);
    expect(left.filter((row) => row.effect.type !== "deadline")).toEqual([]);
  });
});
