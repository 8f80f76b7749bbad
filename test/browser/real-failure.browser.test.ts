/**
 * A real runner failure, end to end: the embedded default (engine on SQLite, the
 * local runner running the bundled action, the tools over SSH to the embedded target's
 * deploy.sh) with lane-a's health URL answering 503 "model not loaded: CUDA OOM". Once the
 * release has rolled back, its reason still names the failing check and its evidence: in the
 * API record, in `baton status` (CLI child process) and in the release page's header, on the
 * first 1280×800 screen in Chromium. Screenshot: test-results/real-failure-rolled-back.png.
 */
import { existsSync, mkdirSync } from "node:fs";
import { chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stepLabel } from "../../engine/src/demo/progress.ts";
import { DEMO_HEALTH_BODY, loadRecipe } from "../../engine/src/demo/stack.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { baton } from "../cli/run-baton.ts";
import { type InProcess, type RecordJson, startInProcess } from "../support/e2e-harness.ts";

const CHROMIUM = "/usr/bin/chromium";
const have = existsSync(CHROMIUM);
if (!have && process.env.CI === "true")
  throw new Error("[test] /usr/bin/chromium is missing in CI; .ci/run installs it");

/** The example recipe cut to two lanes, no re-run window (a failed step compensates at once). */
function recipe(): RecipeInput {
  const r = loadRecipe();
  const lanes = (r.lanes ?? []).slice(0, 2);
  return {
    ...r,
    lanes,
    rollout: {
      waves: [
        { lanes: [lanes[0]!.id], traffic: 50 },
        { lanes: [lanes[1]!.id], traffic: 100 },
      ],
    },
    policy: { ...r.policy, rerun_window_minutes: 0 },
  };
}

describe.skipIf(!have)("a real health-check failure names its cause after rollback", () => {
  let e: InProcess;
  let id = "";
  let rec: RecordJson;
  let lane = "";

  beforeAll(async () => {
    e = await startInProcess("sqlite", { recipe: recipe() });
    const failing = e.manifest.steps.find(
      (s) => s.kind === "runner" && s.lane && stepLabel(s).startsWith("attach_queue_lane:"),
    );
    if (!failing) throw new Error("[test] no attach_queue_lane step in the recipe");
    lane = failing.lane!;
    e.stack.failHealthAt(failing.index);
    id = await e.startRelease();
    rec = await e.waitFor(
      id,
      (r) => ["succeeded", "rolled_back", "needs_operator", "aborted"].includes(r.state),
      "the release to end",
      180_000,
    );
  }, 240_000);
  afterAll(async () => {
    await e?.close();
  });

  const cause = () => new RegExp(`health check on ${lane} answered 503: ${DEMO_HEALTH_BODY}`);

  it("the record: rolled back, the reason kept, the step run's error names the check", () => {
    expect(rec.state).toBe("rolled_back");
    expect(rec.reason ?? "").toMatch(cause());
    expect(rec.reason ?? "").toMatch(/\(exit code \d+\)/);
    const failed = rec.step_runs.find((s) => s.direction === "fwd" && s.state === "failed");
    expect(failed?.last_error ?? "").toMatch(cause());
  });

  it("baton status prints the cause", async () => {
    const r = await baton(["status", id], {
      BATON_ENGINE_URL: e.url(),
      BATON_TOKEN: e.operatorToken,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(cause());
    expect(r.stdout).not.toContain("the runner reported status");
  });

  it("the release page's header shows it on the first screen", async () => {
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
      headless: true,
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      await page.goto(`${e.url()}/login?next=/releases/${id}`);
      await page.locator("#token").fill(e.operatorToken);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL(`${e.url()}/releases/${id}`);
      const head = (await page.locator("#headline").textContent()) ?? "";
      expect(head).toMatch(/Rolled back after a failure at step \d+ \(wave 1\)/);
      // The headline names the cause (the why under it would only repeat it).
      expect(head).toMatch(cause());
      const box = await page.locator("#headline").boundingBox();
      expect(box).not.toBeNull();
      expect(box!.y + box!.height).toBeLessThanOrEqual(800);
      mkdirSync("test-results", { recursive: true });
      await page.screenshot({ path: "test-results/real-failure-rolled-back.png" });
    } finally {
      await browser.close();
    }
  });
});
