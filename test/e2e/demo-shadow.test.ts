/**
 * `npm run demo -- --recipe recipes/shadow.yaml --record FILE` (one child process, real parts,
 * SQLite in a temp dir): the shadow phase deploys the candidate with no exposure, the router
 * mirrors a capped share of requests to it, the shadow gate passes on the mirrored requests, the
 * release ends `succeeded` (exit 0), and the record names the `shadow` phase and what was mirrored.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { demoToEnd } from "../support/demo-process.ts";
import { recordSchemaErrors } from "../support/record-schema.ts";

/** Runs the demo through the npm script's command; resolves with exit code and output. */
const demo = (args: string[]) => demoToEnd(args, 300_000);

describe("npm run demo -- --recipe recipes/shadow.yaml", () => {
  it("runs the shadow phase before any exposure, gates it on mirrored requests, ends succeeded (exit 0); the record names the shadow phase and its counts", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-demo-shadow-"));
    const file = join(dir, "record.json");
    try {
      const { code, out } = await demo(["--recipe", "recipes/shadow.yaml", "--record", file]);
      expect(code, out).toBe(0);
      expect(out).toMatch(/release r1 ended succeeded in [\d.]+ s/);
      expect(out).toMatch(/\[demo\] gate wave 1 \(shadow, 0%\): pass after \d+ evaluations/);
      const rec = JSON.parse(readFileSync(file, "utf8"));
      expect(recordSchemaErrors(rec)).toBeNull();
      expect(rec.release).toMatchObject({ state: "succeeded", closed: true });
      expect(rec.intended.rollout_policy.waves[0]).toMatchObject({
        traffic: 0,
        phase: "shadow",
        shadow: { share: 20, rate_per_s: 200 },
      });
      expect(rec.intended.rollout_policy.waves[1].phase).toBeUndefined();
      const [phase, ...more] = rec.evidence.shadow;
      expect(more).toEqual([]);
      expect(phase).toMatchObject({
        phase: "shadow",
        wave: 0,
        lanes: ["lane-a"],
        decision: "pass",
      });
      // Paired: every mirrored request the candidate answered was answered by the baseline too.
      expect(phase.mirrored).toBeGreaterThanOrEqual(500);
      expect(phase.baseline).toBe(phase.mirrored);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
