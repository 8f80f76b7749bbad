/**
 * With the store unavailable, requests get 503 (retry later), not 500; and
 * the dashboard carries CSP and frame headers.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type Harness, makeHarness, OPERATOR, recipe } from "./service-harness.ts";

let h: Harness | null = null;
afterEach(async () => {
  await h?.close().catch(() => {});
  h = null;
});

describe("store down", () => {
  it("reads and writes answer 503 with Retry-After while the store is closed", async () => {
    h = await makeHarness({ seed: recipe(2) });
    await h.store.close();
    const auth = { authorization: `Bearer ${OPERATOR}` };
    for (const [method, url] of [
      ["GET", "/v1/releases"],
      ["GET", "/v1/releases/r1"],
      ["POST", "/v1/tick"],
      ["GET", "/healthz"],
    ] as const) {
      const res = await h.engine.app.request(url, { method, headers: auth });
      expect(res.status, url).toBe(503);
      expect(res.headers.get("retry-after"), url).toBeTruthy();
    }
  });

  it("dashboard pages answer 503 with a readable page, not 500, while the store is closed", async () => {
    h = await makeHarness({ seed: recipe(2) });
    await h.store.close();
    const auth = { authorization: `Bearer ${OPERATOR}` };
    for (const url of ["/releases", "/releases/r1", "/step-runs/sr_1_1_f", "/releases/r1/abort"]) {
      const res = await h.engine.app.request(url, { headers: auth });
      expect(res.status, url).toBe(503);
      expect(res.headers.get("retry-after"), url).toBeTruthy();
      expect(res.headers.get("content-type"), url).toMatch(/text\/html/);
      const html = await res.text();
      expect(html, url).toContain("the store does not answer");
      expect(html, url).not.toMatch(/at .*\.ts:\d+/);
    }
  });
});

describe("dashboard headers", () => {
  it("pages carry a Content-Security-Policy, frame-ancestors 'none' and X-Frame-Options DENY", async () => {
    h = await makeHarness({ seed: recipe(2) });
    const res = await h.engine.app.request("/login");
    expect(res.status).toBe(200);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toMatch(/default-src 'self'/);
    expect(csp).toMatch(/frame-ancestors 'none'/);
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  });
});
