/**
 * The Workers bundle's size against its budget (WORKER_BUNDLE_BUDGET_BYTES, declared in
 * scripts/build-worker.mjs): every module written, bytes as uploaded. Needs no database.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { breakdown, buildWorker, WORKER_BUNDLE_BUDGET_BYTES } from "../../scripts/build-worker.mjs";

describe("Workers bundle size", () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-worker-bundle-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("is within its budget, counting every module the build writes", async () => {
    const built = await buildWorker(join(dir, "worker.mjs"));
    const written = readdirSync(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0);
    expect(built.bytes).toBe(written);
    const largest = breakdown(built.metafile)
      .slice(0, 8)
      .map((p) => `${p.name} ${p.bytes}`)
      .join(", ");
    expect(
      built.bytes,
      `the Workers bundle is ${built.bytes} bytes, over its budget of ${WORKER_BUNDLE_BUDGET_BYTES} (largest: ${largest}; node scripts/build-worker.mjs --analyze)`,
    ).toBeLessThanOrEqual(WORKER_BUNDLE_BUDGET_BYTES);
  }, 60_000);
});
