/**
 * Signing in as a person, in Debian's Chromium (playwright-core), against a real engine on
 * SQLite and on Postgres: maria signs in on /login with her own token (BATON_OPERATORS), the
 * header names her, she pauses a running release from its confirmation page with a reason,
 * and the release page's history says `paused by operator:maria: <reason>`, not
 * `dashboard (operator token)`.
 */
import { existsSync, mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { chromium } from "playwright-core";
import { afterEach, describe, expect, it } from "vitest";
import {
  createRelease,
  type Harness,
  makeHarness,
  pumpOnce,
  recipe,
  STORE_KINDS,
  skipStore,
} from "../integration/service-harness.ts";

const CHROMIUM = "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];
const have = existsSync(CHROMIUM);
if (!have && process.env.CI === "true")
  throw new Error("[test] /usr/bin/chromium is missing in CI; .ci/run installs it");

const MARIA = "maria-token-0123456789abcdef";

describe.skipIf(!have).each(STORE_KINDS)("signing in as a person on %s, in Chromium", (kind) => {
  let h: Harness | null = null;
  let stop: (() => Promise<void>) | null = null;
  afterEach(async () => {
    await stop?.();
    await h?.close();
    h = null;
    stop = null;
  });

  it.skipIf(skipStore(kind))(
    "maria signs in with her own token; her pause is recorded as hers in the history",
    async () => {
      mkdirSync("test-results", { recursive: true });
      h = await makeHarness({ kind, config: { operators: [{ name: "maria", token: MARIA }] } });
      const id = await createRelease(h, recipe(2));
      for (let i = 0; i < 5; i++) await pumpOnce(h, () => "skip");
      const server = serve({ fetch: h.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
      await new Promise<void>((resolve) => server.once("listening", () => resolve()));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
      stop = async () => {
        await browser.close();
        await new Promise<void>((resolve) => {
          (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
          server.close(() => resolve());
        });
      };
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
      await page.goto(`${url}/login?next=/releases/${id}`);
      await page.getByLabel("Your own token").fill(MARIA);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL(`${url}/releases/${id}`);
      expect(await page.locator("header .who").textContent()).toContain(
        "signed in as maria (operator)",
      );

      await page.goto(`${url}/releases/${id}/pause`);
      await page.getByLabel(/^Reason/).fill("checking GPU memory");
      await page.getByRole("button", { name: `Yes, pause ${id}` }).click();
      await expect(page.locator("body").textContent()).resolves.toContain(
        `pause of ${id} accepted`,
      );

      await page.goto(`${url}/releases/${id}`);
      const history = (await page.locator("#history").locator("..").textContent()) ?? "";
      expect(history).toContain(`paused by operator:maria`);
      expect(history).toContain("checking GPU memory");
      expect(history).not.toContain("dashboard (operator token)");
      await page.screenshot({ path: `test-results/sign-in-${kind}.png` });
    },
    120_000,
  );
});
