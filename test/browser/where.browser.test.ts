/**
 * Where a release is held and what runs where, on the release page's first screen, in
 * Debian's Chromium (playwright-core), against real engines (SQLite and Postgres, the embedded metrics
 * source over the reference router's traffic, a fake clock): a release held at its gate, one
 * an operator paused at its gate, one paused at an inconclusive gate, and one rolled back
 * after a failed smoke check. At 1280×800 the first screen shows the headline saying what
 * holds it (or what failed), the image names (candidate, baseline) and the actions; at
 * 390×844 nothing scrolls sideways and "Live now" is on the first screen. Screenshots go to
 * test-results/.
 */
import { existsSync, mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compensatedRelease } from "../cli/live-engine.ts";
import {
  createRelease,
  type Harness,
  makeHarness,
  OPERATOR,
  op,
  STORE_KINDS,
  type StoreKind,
  skipStore,
} from "../integration/service-harness.ts";
import { sideOverflow } from "../support/browser-checks.ts";
import { gatedRecipe, holdAtGate, type Rig, rig, run } from "../support/gate-rig.ts";

const CHROMIUM = "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];
const have = existsSync(CHROMIUM);
if (!have && process.env.CI === "true")
  throw new Error("[test] /usr/bin/chromium is missing in CI; .ci/run installs it");

interface Case {
  h: Harness;
  rig?: Rig;
  id: string;
  url: string;
  close(): Promise<void>;
}

async function served(h: Harness, id: string, g?: Rig): Promise<Case> {
  const server = serve({ fetch: h.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  return {
    h,
    id,
    ...(g ? { rig: g } : {}),
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      await new Promise<void>((resolve) => {
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      });
      g?.traffic.stop();
      await h.close();
    },
  };
}

/** A gated release (waves 20%, 50%, 100%) held at wave 1's gate, still deciding. */
async function heldAtGate(kind: StoreKind): Promise<{ g: Rig; id: string }> {
  const g = await rig(kind);
  const id = await createRelease(
    g.h,
    gatedRecipe({ min_samples: 1_000_000, max_wait_ms: 600_000, bake_ms: 60_000 }),
  );
  await holdAtGate(g, id, 2);
  return { g, id };
}

const CASES: Record<
  string,
  {
    build: (kind: StoreKind) => Promise<Case>;
    headline: RegExp;
    actions: RegExp[];
    images: RegExp[];
  }
> = {
  "held at its gate": {
    build: async (kind) => {
      const { g, id } = await heldAtGate(kind);
      return served(g.h, id, g);
    },
    headline: /^Held at wave 1 gate \(20%\): waiting for samples \([\d,]+ of 1,000,000\)/,
    actions: [/^Pause release…$/, /^Abort release…$/],
    images: [/summarizer@sha256:\w{12}… candidate/, /summarizer@sha256:\w{12}… baseline/],
  },
  "paused by an operator at its gate": {
    build: async (kind) => {
      const { g, id } = await heldAtGate(kind);
      const res = await op(g.h, "POST", `/v1/releases/${id}/pause`, {
        reason: "checking GPU memory",
        actor: "maria",
      });
      expect(res.status).toBe(200);
      return served(g.h, id, g);
    },
    headline: /^Paused at wave 1 gate \(20%\) by (operator:)?maria: checking GPU memory/,
    actions: [/^Resume release…$/, /^Abort release…$/],
    images: [/summarizer@sha256:\w{12}… candidate/, /summarizer@sha256:\w{12}… baseline/],
  },
  "paused at an inconclusive gate": {
    build: async (kind) => {
      const g = await rig(kind);
      const id = await createRelease(
        g.h,
        gatedRecipe({ min_samples: 1_000_000, max_wait_ms: 30_000, bake_ms: 10_000 }),
      );
      await run(g);
      return served(g.h, id, g);
    },
    headline:
      /^Paused at wave 1 gate \(20%\): inconclusive after [\d ms]+: promote to accept the risk, or abort/,
    actions: [/^Promote past the inconclusive gate…$/, /^Abort release…$/],
    images: [/summarizer@sha256:\w{12}… candidate/, /summarizer@sha256:\w{12}… baseline/],
  },
  "rolled back": {
    build: async (kind) => {
      const h = await makeHarness({ kind });
      return served(h, await compensatedRelease(h));
    },
    headline: /^Rolled back after a failure at step \d+ \(wave 1\)/,
    actions: [/^Roll forward \(CLI\)…$/],
    images: [/summarizer@sha256:\w{12}… baseline/],
  },
};

describe.skipIf(!have).each(STORE_KINDS)(
  "where a release is held, on its first screen, in Chromium, on %s",
  (kind) => {
    const skip = skipStore(kind);
    let browser: Browser;
    const cases = new Map<string, Case>();

    beforeAll(async () => {
      if (skip) return;
      mkdirSync("test-results", { recursive: true });
      for (const [name, c] of Object.entries(CASES)) cases.set(name, await c.build(kind));
      browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS, headless: true });
    }, 240_000);
    afterAll(async () => {
      await browser?.close();
      for (const c of cases.values()) await c.close();
    });

    const open = (width: number, height: number) =>
      browser.newPage({
        viewport: { width, height },
        extraHTTPHeaders: { authorization: `Bearer ${OPERATOR}` },
      });

    /** The bottom of `selector`'s first element, in page px (null: not there). */
    async function bottom(page: Page, selector: string): Promise<number | null> {
      const box = await page.locator(selector).first().boundingBox();
      return box ? box.y + box.height : null;
    }

    for (const [name, want] of Object.entries(CASES)) {
      it.skipIf(skip)(
        `${name}: the hold, the images and the actions on the first screen; a phone's first screen has Live now`,
        async () => {
          const c = cases.get(name) as Case;
          const slug = `${kind}-${name.replaceAll(" ", "-")}`;
          const page = await open(1280, 800);
          await page.goto(`${c.url}/releases/${c.id}`);
          const headline = ((await page.locator("#headline").textContent()) ?? "").trim();
          expect(headline).toMatch(want.headline);
          expect(await bottom(page, "#headline")).toBeLessThanOrEqual(800);
          // The actions the engine accepts, each visible on the first screen.
          const offers = page.locator("#offers li");
          const labels = (await offers.locator("a, code").allTextContents()).map((t) => t.trim());
          for (const a of want.actions)
            expect(
              labels.some((l) => a.test(l)),
              `${a}`,
            ).toBe(true);
          expect(await bottom(page, "#offers")).toBeLessThanOrEqual(800);
          // Every lane named with its image and whether it is the candidate or the baseline.
          const live = (await page.locator("#live-now-part table").textContent()) ?? "";
          for (const i of want.images) expect(live).toMatch(i);
          expect(await bottom(page, "#live-now-part table tbody tr")).toBeLessThanOrEqual(800);
          expect(await sideOverflow(page)).toBe(0);
          await page.screenshot({ path: `test-results/where-${slug}-1280.png` });
          await page.close();

          const phone = await open(390, 844);
          await phone.goto(`${c.url}/releases/${c.id}`);
          expect(await sideOverflow(phone)).toBe(0);
          expect(await bottom(phone, "#headline")).toBeLessThanOrEqual(844);
          expect(await bottom(phone, "#live-now")).toBeLessThanOrEqual(844);
          // No word broken in the middle to fit: every text box fits its container without
          // break-anywhere rules (a long token still wraps, short words never do).
          const broken = await phone.evaluate(() =>
            Array.from(document.querySelectorAll<HTMLElement>("#first-screen *"))
              .filter((el) => getComputedStyle(el).wordBreak === "break-all")
              .map((el) => el.id || el.className || el.tagName),
          );
          expect(broken).toEqual([]);
          await phone.screenshot({ path: `test-results/where-${slug}-390.png` });
          await phone.close();
        },
      );
    }
  },
);
