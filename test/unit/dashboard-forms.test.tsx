/**
 * The dashboard's forms never answer 500: `/login` and every action, posted a body that is not
 * the form they expect (a multipart body with a bad or no boundary, urlencoded garbage, no
 * content type, JSON, binary), answer 400 with the form or a page naming what to send.
 * Hono's `parseBody` threw "Failed to parse body as FormData" on `boundary=zz` with body `x`:
 * 500 for anyone.
 */
import { describe, expect, it } from "vitest";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import { fakeApi } from "../support/dashboard-fixtures.ts";

const OP = "op-secret-token";
const BASE = "http://127.0.0.1:8787";

const BAD: [string, Record<string, string>, BodyInit][] = [
  ["multipart, boundary=zz, body x", { "content-type": "multipart/form-data; boundary=zz" }, "x"],
  ["multipart without a boundary", { "content-type": "multipart/form-data" }, "x"],
  [
    "multipart cut short",
    { "content-type": "multipart/form-data; boundary=B" },
    '--B\r\nContent-Disposition: form-data; name="token"\r\n\r\nabc',
  ],
  ["JSON", { "content-type": "application/json" }, '{"token": "x"}'],
  ["binary", { "content-type": "application/octet-stream" }, new Uint8Array([0xff, 0, 0xc3])],
  ["no content type, a body", {}, "token=x"],
  ["a garbage type", { "content-type": "a/b; ;; boundary=" }, "x"],
  [
    "too many fields",
    { "content-type": "application/x-www-form-urlencoded" },
    "a=1&".repeat(2_000),
  ],
];

function app() {
  return dashboardApp({
    api: fakeApi(),
    tokens: { operator: OP, viewer: "view-secret-token" },
    publicUrl: BASE,
  });
}

describe("forms never 500", () => {
  it.each(BAD)("/login, %s: 400 with the sign-in form and what to send", async (_, h, body) => {
    const res = await app().request(`${BASE}/login`, { method: "POST", headers: h, body });
    expect(res.status).toBe(400);
    const html = await res.text();
    expect(html).toMatch(/name="token"/);
    expect(html).toMatch(/sign-in refused: .*(urlencoded|multipart)/);
  });

  it("urlencoded garbage is read leniently: the wrong token gets the ordinary 401 form", async () => {
    const res = await app().request(`${BASE}/login`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "%%%&&==%ZZ&\u0000=\uffff",
    });
    expect(res.status).toBe(401);
  });

  const actions = [
    "/releases/r1/abort",
    "/releases/r1/resume",
    "/releases/r1/abandon",
    "/releases/r1/pause",
    "/releases/r1/release",
    "/releases/r1/promote",
    "/releases/r1/confirm-restore",
    "/releases/r1/rollback",
    "/step-runs/sr_1_0_f/retry",
    "/step-runs/sr_1_0_f/resolve",
  ];
  it.each(actions)("%s: 400 naming the form to send, for every bad body", async (path) => {
    const a = app();
    for (const [what, h, body] of BAD) {
      const res = await a.request(`${BASE}${path}`, {
        method: "POST",
        headers: { ...h, authorization: `Bearer ${OP}` },
        body,
      });
      expect(res.status, what).toBe(400);
      expect(await res.text(), what).toMatch(/refused: .*(urlencoded|multipart)/);
    }
  });
});
