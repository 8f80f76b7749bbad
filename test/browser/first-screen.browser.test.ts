/**
 * The 2am first screen in Chromium: for a failed (undoing), a rolled-back, an
 * operator-aborted, a paused and a needs-operator release, the headline, why, failing step and
 * check, and the accepted actions are inside the first 1280×800 screen; at 390×844 the page
 * does not scroll sideways; axe-core finds no serious or critical violation at either width.
 * Keyboard: Tab reaches every link, button and filter in document order, each with a visible
 * focus indicator; an action opens its confirmation page with Enter, and the confirmation
 * page submits with Enter (from its reason field, or on its button), reaching the engine.
 * Screenshots go to test-results/ (first-screen-<kind>-<width>.png).
 */
import { existsSync, mkdirSync } from "node:fs";
import { serve } from "@hono/node-server";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import type { ReleaseRecord } from "../../engine/src/service/api.ts";
import { axeSerious, focusVisible, keyboardWalk, sideOverflow } from "../support/browser-checks.ts";
import { compensatedRecord, fakeApi, pausedRecord } from "../support/dashboard-fixtures.ts";

const CHROMIUM = "/usr/bin/chromium";
/** The operator token; every page is read with it as a Bearer header. */
const OP = "first-screen-operator-token-0123456789";
const have = existsSync(CHROMIUM);
if (!have && process.env.CI === "true")
  throw new Error("[test] /usr/bin/chromium is missing in CI; .ci/run installs it");

function withId(rec: ReleaseRecord, n: number): ReleaseRecord {
  const r = structuredClone(rec);
  const old = r.release.id;
  const re = new RegExp(`\\b(sr_)${old.slice(1)}_`, "g");
  const text = JSON.stringify(r).replace(re, `$1${n}_`).replaceAll(`"${old}"`, `"r${n}"`);
  return JSON.parse(text) as ReleaseRecord;
}

/** The five releases an on-call engineer meets. */
function records(): Record<string, ReleaseRecord> {
  const rolled = compensatedRecord(); // r3: step 3's smoke check failed, undone
  const failed = withId(compensatedRecord(), 11);
  failed.release.state = "compensating";
  failed.release.cursor = 1;
  failed.release.step_runs = failed.release.step_runs.filter(
    (s) => !(s.direction === "bwd" && s.step_index === 0),
  );
  const sr1b = failed.release.step_runs.find((s) => s.step_index === 1 && s.direction === "bwd")!;
  sr1b.state = "running";
  const aborted = withId(compensatedRecord(), 12);
  aborted.release.reason = "aborted by alice: wrong image digest";
  for (const s of aborted.release.step_runs)
    if (s.direction === "fwd" && s.state === "failed") {
      s.state = "failed";
      s.last_error = "cancelled by abort before a runner started it";
    }
  aborted.history.push({
    release_id: "r12",
    at: aborted.release.updated_at - 300_000,
    kind: "abort",
    step_run_id: null,
    outcome: "accepted",
    message:
      "[engine] release r12 compensating from step 3 (generation 2): aborted by alice: wrong image digest",
    data: { actor: "alice", reason: "wrong image digest" },
  });
  const stuck = withId(compensatedRecord(), 13);
  stuck.release.state = "needs_operator";
  stuck.release.cursor = 1;
  stuck.release.reason =
    "step 2 restore_queue_lane, backward (step run sr_13_1_b) ended failed: ssh: connect timed out; fix the lane by hand, then retry the step run";
  stuck.release.step_runs = stuck.release.step_runs.filter(
    (s) => !(s.direction === "bwd" && s.step_index === 0),
  );
  const b = stuck.release.step_runs.find((s) => s.step_index === 1 && s.direction === "bwd")!;
  b.state = "failed";
  b.last_error = "ssh: connect timed out";
  return {
    failed,
    "rolled-back": rolled,
    aborted,
    paused: pausedRecord(),
    "needs-operator": stuck,
  };
}

describe.skipIf(!have)("first screen in Chromium", () => {
  const recs = records();
  const api = fakeApi(Object.values(recs));
  let browser: Browser;
  let url = "";
  let close = () => {};

  beforeAll(async () => {
    mkdirSync("test-results", { recursive: true });
    const app = dashboardApp({
      api,
      tokens: { operator: OP },
      publicUrl: "http://127.0.0.1",
      now: () => Date.UTC(2026, 10, 29, 9, 0, 0),
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

  const open = (width: number, height: number) =>
    browser.newPage({
      viewport: { width, height },
      extraHTTPHeaders: { authorization: `Bearer ${OP}` },
    });

  /** The element's box is entirely inside the first screen (no scrolling). */
  async function onFirstScreen(page: Page, selector: string): Promise<void> {
    const box = await page.locator(selector).first().boundingBox();
    expect(box, selector).not.toBeNull();
    expect(box!.y + box!.height, `${selector} bottom`).toBeLessThanOrEqual(800);
    expect(box!.x + box!.width, `${selector} right`).toBeLessThanOrEqual(1280);
  }

  for (const kind of ["failed", "rolled-back", "aborted", "paused", "needs-operator"]) {
    it(`${kind}: why, failing step and check, actions on the first screen; phone; axe`, async () => {
      const rec = recs[kind]!;
      const page = await open(1280, 800);
      await page.goto(`${url}/releases/${rec.release.id}`);
      const headline = (await page.locator("#headline").textContent()) ?? "";
      await onFirstScreen(page, "#headline");
      await onFirstScreen(page, "#offers");
      if (kind === "aborted") {
        expect(headline).toContain("Rolled back after an operator abort by alice");
        expect(headline).toContain("operator abort");
      } else {
        await onFirstScreen(page, "#failed h2");
        await onFirstScreen(page, "#failed");
      }
      if (kind === "rolled-back" || kind === "failed") {
        expect(headline).toMatch(/after a failure at step 3 \(wave 1\)/);
        const failed = (await page.locator("#failed").textContent()) ?? "";
        expect(failed).toContain("health_endpoint");
        expect(failed).toContain("exit code 7");
        expect(failed).toContain("GET /health answered 503");
      }
      if (kind === "paused") {
        await onFirstScreen(page, "#why");
        await expect(
          page.getByRole("link", { name: /^Retry step 2 \(wave 1\)/ }).count(),
        ).resolves.toBe(1);
        await expect(page.getByRole("link", { name: "Abort release…" }).count()).resolves.toBe(1);
      }
      if (kind === "needs-operator") {
        expect(headline).toContain(
          "Needs an operator: undoing step 2 (wave 1) failed on lane lane-1",
        );
        await onFirstScreen(page, "#undo-part");
        await expect(page.locator("#undo-part").textContent()).resolves.toContain(
          "Fix lane lane-1 by hand",
        );
      }
      if (kind === "rolled-back" || kind === "aborted") {
        // A closed release accepts only the lifecycle verb roll forward (a new release).
        await expect(page.locator("#offers").textContent()).resolves.toContain(
          "Roll forward (CLI)…",
        );
      }
      await page.screenshot({ path: `test-results/first-screen-${kind}-1280.png` });

      // axe-core: no serious or critical violation.
      expect(await axeSerious(page)).toEqual([]);

      // Keyboard: Tab from the top reaches every focusable element in document order (the
      // actions and the history filters among them), each with a visible focus indicator.
      const walk = await keyboardWalk(page);
      expect(walk.expected).toBeGreaterThan(3);
      expect(walk.stops.map((s) => s.index)).toEqual([...Array(walk.expected).keys()]);
      expect(walk.stops.filter((s) => !focusVisible(s)).map((s) => `${s.tag} ${s.text}`)).toEqual(
        [],
      );
      const reached = new Set(walk.stops.map((s) => s.href).filter(Boolean));
      const actions = await page
        .locator("#offers a")
        .evaluateAll((els) => els.map((e) => e.getAttribute("href")));
      const filters = await page
        .getByRole("navigation", { name: "History filter" })
        .locator("a")
        .evaluateAll((els) => els.map((e) => e.getAttribute("href")));
      expect(filters.length).toBeGreaterThanOrEqual(4);
      for (const h of [...actions, ...filters]) expect(reached, String(h)).toContain(h);
      // The actions come before the history filters in the Tab order.
      if (actions.length > 0) {
        const at = (h: string | null) => walk.stops.findIndex((s) => s.href === h);
        expect(at(actions.at(-1)!)).toBeLessThan(at(filters[0]!));
      }

      // Phone: no sideways scrolling, headline and actions still there, no serious violation.
      await page.setViewportSize({ width: 390, height: 844 });
      await page.goto(`${url}/releases/${rec.release.id}`);
      expect(await sideOverflow(page)).toBe(0);
      await expect(page.locator("#headline").isVisible()).resolves.toBe(true);
      await expect(page.locator("#offers").isVisible()).resolves.toBe(true);
      expect(await axeSerious(page)).toEqual([]);
      await page.screenshot({ path: `test-results/first-screen-${kind}-390.png`, fullPage: true });
      await page.close();
    }, 240_000);
  }

  /** Presses Tab (at most `max` times) until the focused element matches; returns its text. */
  async function tabTo(page: Page, selector: string, max = 200): Promise<string> {
    for (let i = 0; i < max; i++) {
      await page.keyboard.press("Tab");
      if (await page.evaluate((sel) => document.activeElement?.matches(sel) ?? false, selector))
        return page.evaluate(() => document.activeElement?.textContent?.trim() ?? "");
    }
    throw new Error(`[test] Tab never reached ${selector} in ${max} presses`);
  }

  it("keyboard only: the releases filter; an action opens its confirmation with Enter, which submits with Enter", async () => {
    const page = await open(1280, 800);
    // The releases list: every control in order with a focus ring; the state filter is
    // operated by keyboard (type to pick the state, Enter on Filter).
    await page.goto(`${url}/releases`);
    const walk = await keyboardWalk(page);
    expect(walk.stops.map((s) => s.index)).toEqual([...Array(walk.expected).keys()]);
    expect(walk.stops.filter((s) => !focusVisible(s)).map((s) => `${s.tag} ${s.text}`)).toEqual([]);
    await page.goto(`${url}/releases`);
    await tabTo(page, "select#state");
    await page.keyboard.type("paused");
    await tabTo(page, 'main form button[type="submit"]', 3);
    await page.keyboard.press("Enter");
    await page.waitForURL(`${url}/releases?state=paused`);
    await expect(page.locator("tbody tr td:first-child a").allTextContents()).resolves.toEqual([
      "r5",
    ]);

    // Paused r5: Abort… → the confirmation page → Enter in its reason field submits it.
    await page.goto(`${url}/releases/r5`);
    await tabTo(page, '#offers a[href$="/abort"]');
    await page.keyboard.press("Enter");
    await page.waitForURL(`${url}/releases/r5/abort`);
    await expect(page.locator("h1").textContent()).resolves.toBe("Abort r5");
    await tabTo(page, "input#reason");
    // The reason is the operator's: the field starts empty and is required, so Enter on it
    // empty submits nothing (the browser asks for it) and the engine is not asked.
    await expect(page.locator("input#reason").inputValue()).resolves.toBe("");
    await expect(
      page.locator("input#reason").evaluate((el) => (el as HTMLInputElement).validity.valueMissing),
    ).resolves.toBe(true);
    await page.keyboard.press("Enter");
    await expect(page.locator("h1").textContent()).resolves.toBe("Abort r5");
    expect(page.url()).toBe(`${url}/releases/r5/abort`);
    expect(api.calls.filter((c) => c.method === "abort")).toHaveLength(0);
    await page.keyboard.type("wrong image (by keyboard)");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() =>
      / (accepted|refused)$/.test(document.querySelector("h1")?.textContent ?? ""),
    );
    await expect(page.locator("h1").textContent()).resolves.toContain("abort accepted");
    expect(api.calls.filter((c) => c.method === "abort" && c.target === "r5")).toHaveLength(1);
    await page.screenshot({ path: "test-results/confirm-abort-result-1280.png" });

    // Needs-operator r13: Retry … → the confirmation page → Enter on its button.
    await page.goto(`${url}/releases/r13`);
    const label = await tabTo(page, '#offers a[href$="/retry"]');
    expect(label).toMatch(/^Retry /);
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/step-runs\/sr_13_\d+_b\/retry$/);
    await page.screenshot({ path: "test-results/confirm-retry-1280.png" });
    const button = await tabTo(page, 'main form button[type="submit"]');
    expect(button).toMatch(/^Yes, retry sr_13_\d+_b$/);
    await page.keyboard.press("Enter");
    await page.waitForFunction(() =>
      / (accepted|refused)$/.test(document.querySelector("h1")?.textContent ?? ""),
    );
    await expect(page.locator("h1").textContent()).resolves.toContain("retry accepted");
    expect(api.calls.filter((c) => c.method === "retry")).toHaveLength(1);
    await page.close();
  }, 240_000);
});
