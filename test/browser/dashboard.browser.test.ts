/**
 * The dashboard in Debian's Chromium (playwright-core), against a real engine on real
 * releases: the list, a compensated release (failing check in the step run's table), the
 * refused late callback in the timeline, retry refused with the viewer token and accepted
 * with the operator token, the retry model's controls, and a live update without reload.
 * Screenshots of the list and the release page go to test-results/.
 */
import { existsSync, mkdirSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LiveEngine, OPERATOR, startLiveEngine, VIEWER } from "../cli/live-engine.ts";
import {
  createRelease,
  preflightBody,
  preflightUrl,
  pumpOnce,
  recipe,
  signedPost,
} from "../integration/service-harness.ts";

// These tests stack releases of one recipe on one lane set; the one-release-per-lane rule
// is tested in test/integration/lane-claims.test.ts.
process.env.BATON_EXCLUSIVE_LANES = "off";

const CHROMIUM = "/usr/bin/chromium";
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const have = existsSync(CHROMIUM);
if (!have && process.env.CI === "true")
  throw new Error("[test] /usr/bin/chromium is missing in CI; .ci/run installs it");

describe.skipIf(!have)("dashboard in Chromium", () => {
  let live: LiveEngine;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    mkdirSync("test-results", { recursive: true });
    live = await startLiveEngine();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
    page = await browser.newPage({ viewport: { width: 1366, height: 800 } });
  });
  afterAll(async () => {
    await browser?.close();
    await live?.close();
  });

  async function signIn(token: string) {
    await page.goto(`${live.url}/login?next=/releases`);
    await page.getByLabel("Operator or viewer token").fill(token);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${live.url}/releases`);
  }

  it("sends a reader without a token to sign in", async () => {
    await page.goto(`${live.url}/releases`);
    expect(new URL(page.url()).pathname).toBe("/login");
    await expect(page.getByRole("heading", { name: "Sign in" }).isVisible()).resolves.toBe(true);
  });

  it("lists releases newest first and filters by state", async () => {
    await signIn(VIEWER);
    const ids = await page.locator("tbody tr td:first-child a").allTextContents();
    expect(ids).toEqual([live.ids.paused, live.ids.late, live.ids.compensated]);
    await expect(page.locator("text=signed in as viewer").count()).resolves.toBe(1);
    await page.screenshot({ path: "test-results/dashboard-releases.png", fullPage: true });
    await page.getByLabel("Filter by state").selectOption("paused");
    await page.getByRole("button", { name: "Filter" }).click();
    await expect(page.locator("tbody tr td:first-child a").allTextContents()).resolves.toEqual([
      live.ids.paused,
    ]);
  });

  it("shows the compensated release: backward rows, high-water mark, and the failing check", async () => {
    await page.goto(`${live.url}/releases`);
    await page.getByRole("link", { name: live.ids.compensated, exact: true }).click();
    await page.waitForURL(`${live.url}/releases/${live.ids.compensated}`);
    await expect(page.locator("h1").textContent()).resolves.toContain("rolled back");
    const backward = page.locator("#part-steps tr.bwd");
    expect(await backward.count()).toBeGreaterThan(0);
    await expect(page.locator("#part-steps tr.hwm").textContent()).resolves.toContain(
      // drain_wave is step 1 of the wave: the failed smoke check is step 4 (index 3).
      "high-water mark: step 4",
    );
    await page.screenshot({ path: "test-results/dashboard-release.png", fullPage: true });
    await page.screenshot({ path: "test-results/dashboard-release-top.png" });

    const failed = page.locator("#part-steps tr", { hasText: "assert smoke passed" }).first();
    await expect(failed.textContent()).resolves.toContain("failed");
    await failed.getByRole("link", { name: /^sr_\d+_3_f$/ }).click();
    const firstCheck = page
      .locator("table")
      .filter({ hasText: "checks.json" })
      .locator("tbody tr")
      .first();
    await expect(firstCheck.textContent()).resolves.toMatch(/health.*failed/);
    await expect(
      page.getByRole("link", { name: "Download the full stored log" }).count(),
    ).resolves.toBe(1);
    await expect(page.getByRole("heading", { name: "Raw callback" }).count()).resolves.toBe(1);
    await expect(page.getByRole("heading", { name: "Preflight record" }).count()).resolves.toBe(1);
    await page.screenshot({ path: "test-results/dashboard-step-run.png", fullPage: true });
  });

  it("shows the refused late callback in the timeline", async () => {
    await page.goto(`${live.url}/releases/${live.ids.late}`);
    // The engine's own housekeeping (a late callback changed nothing): hidden by default (noise
    // at 2am), never styled as a failure; the filter shows it in plain words.
    await expect(page.locator("#part-history tr.housekeeping").count()).resolves.toBe(0);
    await page.getByRole("link", { name: "Refused only" }).click();
    const row = page
      .locator("#part-history tr.housekeeping", { hasText: "callback" })
      .filter({ hasText: "is late" });
    await expect(row.count()).resolves.toBe(1);
    await expect(row.textContent()).resolves.toContain("refused: late");
    await expect(row.textContent()).resolves.toMatch(/late callback from attempt \d+/);
    await expect(row.locator(".st-failed").count()).resolves.toBe(0);
  });

  it("refuses retry with the viewer token and accepts it with the operator token", async () => {
    const rec = await (
      await fetch(`${live.url}/v1/releases/${live.ids.paused}`, {
        headers: { authorization: `Bearer ${VIEWER}` },
      })
    ).json();
    const waiting = (rec as { step_runs: { id: string; state: string }[] }).step_runs.find(
      (s) => s.state === "unknown",
    );
    expect(waiting).toBeDefined();

    await page.goto(`${live.url}/step-runs/${waiting!.id}`);
    await page.getByRole("link", { name: `Retry ${waiting!.id}…` }).click();
    await page.getByRole("button", { name: `Yes, retry ${waiting!.id}` }).click();
    await expect(page.locator(".notice").first().textContent()).resolves.toContain(
      "the viewer token only reads",
    );
    await expect(page.locator("h1").textContent()).resolves.toContain("retry refused");

    await page.getByRole("button", { name: "Sign out" }).click();
    await signIn(OPERATOR);
    await page.goto(`${live.url}/step-runs/${waiting!.id}/retry`);
    await page.getByRole("button", { name: `Yes, retry ${waiting!.id}` }).click();
    await expect(page.locator("h1").textContent()).resolves.toContain("retry accepted");
    await expect(page.locator("main").textContent()).resolves.toContain(
      `Release ${live.ids.paused} is now running`,
    );
  });

  it("runs the retry model: set p and q, Step, Play, Pause, Reset", async () => {
    await page.goto(`${live.url}/releases/${live.ids.compensated}`);
    // Folded by default (it is not a 2am question); one click opens it.
    await page.getByText("Retry model: the chance each step completes").click();
    const out = page.locator("#mk-out-t");
    await page.getByLabel("p, P(0→1) per attempt").fill("0.25");
    await page.getByLabel("q, P(1→0)").fill("0");
    const step = page.getByRole("button", { name: "Step: advance one attempt" });
    await step.click();
    await expect(out.textContent()).resolves.toBe("P(completed after 1 steps) = 0.25");
    await step.click();
    await step.click();
    await expect(out.textContent()).resolves.toBe("P(completed after 3 steps) = 0.578125");
    await page.getByLabel("p, P(0→1) per attempt").fill("1");
    await page.getByLabel("q, P(1→0)").fill("1");
    await expect(out.textContent()).resolves.toBe("P(completed after 3 steps) = 1");
    await expect(page.locator("#mk-out-b").textContent()).resolves.toContain("Alternating forever");
    await page.getByRole("button", { name: "Play: two steps a second" }).click();
    await page.waitForFunction(
      () => Number((document.getElementById("mk-t") as HTMLInputElement).value) >= 5,
      null,
      { timeout: 10_000 },
    );
    await page.getByRole("button", { name: "Pause playback" }).click();
    const paused = await page.inputValue("#mk-t");
    await page.waitForTimeout(1200);
    expect(await page.inputValue("#mk-t")).toBe(paused);
    await page.getByRole("button", { name: "Reset: default p and q, time 0" }).click();
    await expect(page.inputValue("#mk-t")).resolves.toBe("0");
    await expect(page.inputValue("#mk-q")).resolves.toBe("0");
    await expect(out.textContent()).resolves.toBe("P(completed after 0 steps) = 0");
  });

  it("updates a running release's page without a reload", async () => {
    const h = live.h;
    const id = await createRelease(h, recipe(2));
    let first: Parameters<Parameters<typeof pumpOnce>[1] & object>[0] | undefined;
    for (let i = 0; i < 20 && !first; i++) {
      await pumpOnce(h, (p) => {
        if (p.release.id === id && p.tool === "attach-queue-lane") {
          first = p;
          return "skip";
        }
        return "pass";
      });
    }
    expect(first).toBeDefined();
    await page.goto(`${live.url}/releases/${id}`);
    await page.evaluate(() => {
      (window as unknown as { marker: number }).marker = 1;
    });
    const res = await signedPost(
      h,
      preflightUrl(first!.step_run_id),
      preflightBody(first!, { run_id: "777001", run_attempt: 1 }),
    );
    expect(res.status).toBe(200);
    await page.waitForFunction(
      () => document.getElementById("part-steps")?.textContent?.includes("run 777001"),
      null,
      {
        timeout: 15_000,
      },
    );
    // Same document: the marker set before the update survived, so the page was not reloaded.
    await expect(
      page.evaluate(() => (window as unknown as { marker?: number }).marker),
    ).resolves.toBe(1);
  });
});
