/**
 * The fleet page in Chromium: per lane, desired against observed with differences
 * and mixed versions marked; it follows the control plane live (a traffic write shows without
 * a reload); no sideways overflow at 390×844, and no serious or critical axe-core violation at
 * 1280 and at 390 px, for the fleet page and the releases list.
 * Screenshots: test-results/fleet-1280.png, fleet-390.png (scripts/docs-screenshots.mjs copies
 * them into docs/images).
 */
import { existsSync, mkdirSync } from "node:fs";
import { serve } from "@hono/node-server";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import type { ReleaseRecord } from "../../engine/src/service/api.ts";
import { axeSerious, sideOverflow } from "../support/browser-checks.ts";
import { fakeApi, succeededRecord } from "../support/dashboard-fixtures.ts";

const CHROMIUM = "/usr/bin/chromium";
const have = existsSync(CHROMIUM);
if (!have && process.env.CI === "true")
  throw new Error("[test] /usr/bin/chromium is missing in CI; .ci/run installs it");

/** r2 succeeded on lane-1; its deploy's result carries the image the target reported. */
function succeeded(): ReleaseRecord {
  const rec = succeededRecord();
  const deploy = rec.release.step_runs.find(
    (s) => rec.release.manifest.steps[s.step_index]!.name === "attach_queue_lane",
  )!;
  rec.attempt_results.push({
    step_run_id: deploy.id,
    attempt: 1,
    release_id: rec.release.id,
    received_at: deploy.finished_at!,
    status: "succeeded",
    overall: "pass",
    checks: [{ phase: "start", status: "ok", exit_code: 0, image: rec.release.manifest.image }],
    log: "",
    log_truncated: false,
    raw_callback: "{}",
    preflight: {},
  });
  return rec;
}

describe.skipIf(!have)("fleet page in Chromium", () => {
  let browser: Browser;
  let url = "";
  let close = () => {};
  const cp = new MemoryControlPlane({ model: "chat-model" });
  const rec = succeeded();

  beforeAll(async () => {
    mkdirSync("test-results", { recursive: true });
    cp.seed([
      { id: "lane-1", weight: 90, excluded: false, capabilities: ["chat"], advertised: true },
      { id: "lane-2", weight: 10, excluded: false, image: rec.release.manifest.previous_image },
    ]);
    const app = dashboardApp({
      api: fakeApi([rec]),
      tokens: {},
      publicUrl: "http://127.0.0.1",
      controlPlane: cp,
    });
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
    await new Promise((r) => s.once("listening", r));
    url = `http://127.0.0.1:${(s.address() as { port: number }).port}`;
    close = () => s.close();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
      headless: true,
    });
  });
  afterAll(async () => {
    await browser?.close();
    close();
  });

  it("desired vs observed, marked; live; phone; axe", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${url}/releases`);
    await page.getByRole("link", { name: "Fleet" }).click();
    await page.waitForURL(`${url}/fleet`);
    const section = page.locator('section[data-model="chat-model"]');
    await expect(section.locator("h2").textContent()).resolves.toContain("mixed versions");
    const row1 = section.locator("tbody tr", { has: page.locator("th", { hasText: "lane-1" }) });
    const row2 = section.locator("tbody tr", { has: page.locator("th", { hasText: "lane-2" }) });
    const t1 = (await row1.textContent()) ?? "";
    expect(t1).toContain("want 100%");
    expect(t1).toContain("now 90%");
    // The image is named and marked: r2's candidate, as desired and as the target reported it.
    expect(t1).toMatch(/want model@sha256:b{12}… \(candidate\)/);
    expect(t1).toMatch(/now model@sha256:b{12}… \(candidate, target, r2 step \d+ \(wave 1\)\)/);
    await expect(row1.locator("td.differs").count()).resolves.toBe(1);
    const t2 = (await row2.textContent()) ?? "";
    expect(t2).toContain("want 0%");
    expect(t2).toContain("now 10%");
    // lane-2 still runs the baseline, as the control plane reports it.
    expect(t2).toMatch(/now model@sha256:c{12}… \(baseline, control plane\)/);
    const box = await section.locator("h2").boundingBox();
    expect(box!.y + box!.height).toBeLessThanOrEqual(800);
    await page.screenshot({ path: "test-results/fleet-1280.png" });
    expect(await axeSerious(page)).toEqual([]);

    // Live: the control plane moves traffic back; the open page shows it without a reload.
    const marker = await page.evaluate(() => {
      (window as unknown as { marker: number }).marker = 42;
      return 42;
    });
    const applied = await cp.apply(
      { op: "set_traffic", weights: { "lane-1": 100, "lane-2": 0 }, percent: 100 },
      { operation_key: "test:fleet:1", release_id: "r2", generation: 1, model: "chat-model" },
    );
    expect(applied.outcome).toBe("ok");
    await row2.getByText("now 0%").waitFor({ timeout: 20_000 });
    await expect(section.locator("h2").textContent()).resolves.not.toContain("mixed versions");
    await expect(
      page.evaluate(() => (window as unknown as { marker?: number }).marker),
    ).resolves.toBe(marker);

    // Phone (390×844): nothing scrolls sideways, no serious or critical axe violation.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${url}/fleet?model=chat-model`);
    expect(await sideOverflow(page)).toBe(0);
    await page.screenshot({ path: "test-results/fleet-390.png", fullPage: true });
    expect(await axeSerious(page)).toEqual([]);
    // The releases list too (it overflowed by 46 px before its table scrolled in its box).
    await page.goto(`${url}/releases`);
    expect(await sideOverflow(page)).toBe(0);
    expect(await axeSerious(page)).toEqual([]);
    await page.screenshot({ path: "test-results/releases-390.png" });
    // And at 1280 the releases list has no serious violation either.
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`${url}/releases`);
    expect(await axeSerious(page)).toEqual([]);
    await page.close();
  }, 240_000);
});
