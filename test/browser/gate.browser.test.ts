/**
 * The release page's gates in Debian's Chromium (playwright-core), against a real engine on
 * real gated releases (SQLite, the embedded metrics source over the reference router's traffic
 * generator, a fake clock): a good candidate whose gates pass, and one whose error rate is
 * well above the margin, which rolls back. Asserts per gated wave the decision and its reason,
 * the counts per arm, the SRM check and one server-rendered SVG per metric with the bounds
 * band, the estimate and the margin line. Screenshots go to test-results/.
 */
import { existsSync, mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATOR } from "../integration/service-harness.ts";
import { gatedRecipe, type Rig, rig, run, start } from "../support/gate-rig.ts";

const CHROMIUM = "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];
const have = existsSync(CHROMIUM);
if (!have && process.env.CI === "true")
  throw new Error("[test] /usr/bin/chromium is missing in CI; .ci/run installs it");

interface Served {
  g: Rig;
  id: string;
  url: string;
  close(): Promise<void>;
}

async function served(errorRate: number): Promise<Served> {
  const g = await rig("sqlite", errorRate);
  const id = await start(g.h, gatedRecipe());
  await run(g);
  const server = serve({ fetch: g.h.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    g,
    id,
    url: `http://127.0.0.1:${port}`,
    async close() {
      await new Promise<void>((resolve) => {
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      });
      g.traffic.stop();
      await g.h.close();
    },
  };
}

describe.skipIf(!have)("the release page's gates in Chromium", () => {
  let good: Served;
  let bad: Served;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    mkdirSync("test-results", { recursive: true });
    good = await served(0.01);
    bad = await served(0.2);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
    page = await browser.newPage({ viewport: { width: 1366, height: 900 } });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await good?.close();
    await bad?.close();
  });

  async function open(s: Served) {
    await page.goto(`${s.url}/login?next=/releases/${s.id}`);
    await page.getByLabel("Operator or viewer token").fill(OPERATOR);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${s.url}/releases/${s.id}`);
  }

  it("shows each passed gate: decision, reason, counts per arm, SRM and the bounds chart", async () => {
    await open(good);
    await expect(page.getByRole("heading", { name: "Gates" }).isVisible()).resolves.toBe(true);
    const gates = page.locator("#part-gates .gate");
    await expect(gates.count()).resolves.toBe(2);
    const first = gates.first();
    await expect(first.getAttribute("data-decision")).resolves.toBe("pass");
    await expect(first.locator("h3").textContent()).resolves.toMatch(/Wave 1 \(20%\) gate: pass/);
    await expect(first.locator(".gate-reason").isVisible()).resolves.toBe(true);
    await expect(first.locator(".gate-arms").textContent()).resolves.toMatch(
      /candidate [\d,]+ \/ control [\d,]+ units \(planned 20\.0% candidate, observed 1\d\.\d%|candidate [\d,]+ \/ control [\d,]+ units \(planned 20\.0% candidate, observed 2\d\.\d%/,
    );
    await expect(first.locator(".gate-srm").textContent()).resolves.toMatch(/^SRM: ok/);
    // One SVG per metric, drawn by the server: the band, the estimate, the margin −δ.
    const chart = first.locator('svg.gate-chart[data-metric="error-rate"]');
    await expect(chart.isVisible()).resolves.toBe(true);
    await expect(chart.locator('[data-series="bounds"]').count()).resolves.toBe(1);
    await expect(chart.locator('[data-series="margin"]').count()).resolves.toBe(1);
    await expect(chart.getAttribute("aria-label")).resolves.toMatch(
      /^error-rate: after \d+ s, Δ between .* and .*; the margin −δ is −3\.00 pp$/,
    );
    await expect(
      first.locator('svg.gate-chart[data-metric="slow-requests"]').count(),
    ).resolves.toBe(1);
    const box = await chart.boundingBox();
    expect(box?.width).toBeGreaterThan(200);
    await first.screenshot({ path: "test-results/dashboard-gate.png" });

    // The history filtered to the gate's decisions alone: every row a gate evaluation, and
    // fewer events than the unfiltered history holds.
    const total = (text: string | null) => Number(/of (\d+)/.exec(text ?? "")?.[1] ?? Number.NaN);
    const caption = page.locator("#part-history table.history caption");
    const before = total(await caption.textContent());
    await page
      .getByRole("navigation", { name: "History filter" })
      .getByRole("link", { name: "Gate decisions" })
      .click();
    await page.waitForURL(/[?&]only=gates/);
    await expect(
      page
        .getByRole("navigation", { name: "History filter" })
        .locator('[aria-current="true"]')
        .textContent(),
    ).resolves.toBe("Gate decisions");
    const gatesOnly = total(await caption.textContent());
    expect(gatesOnly).toBeGreaterThanOrEqual(2);
    expect(gatesOnly).toBeLessThan(before);
    const kinds = await page.locator("#part-history tbody tr td:nth-child(2)").allTextContents();
    expect(new Set(kinds)).toEqual(new Set(["gate"]));
    const messages = await page.locator("#part-history tbody tr td:last-child").allTextContents();
    expect(messages.join("\n")).toMatch(/gate of wave 1 \(20%\) passed \(evaluation \d+/);
    expect(messages.join("\n")).toMatch(/gate of wave 1 \(20%\) evaluation 1: wait: /);
  });

  it("shows a failed gate with the metric, its bound and the margin in the reason", async () => {
    await open(bad);
    const gates = page.locator("#part-gates .gate");
    await expect(gates.count()).resolves.toBe(1);
    await expect(gates.first().getAttribute("data-decision")).resolves.toBe("fail");
    await expect(gates.first().locator(".gate-reason").textContent()).resolves.toMatch(
      /error-rate: candidate \d+\.\d+% vs control \d+\.\d+%, allowed \+3\.0 points: worse/,
    );
    const verdicts = await gates.first().locator("tbody tr td:last-child").allTextContents();
    expect(verdicts[0]).toBe("inferior");
    await expect(
      gates
        .first()
        .locator('svg.gate-chart[data-metric="error-rate"] [data-series="bounds"]')
        .count(),
    ).resolves.toBe(1);
    await page
      .locator("#part-gates")
      .screenshot({ path: "test-results/dashboard-gate-failed.png" });
  });
});
