import { describe, expect, it } from "vitest";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import { safeNext } from "../../engine/src/http/dashboard/safe-next.ts";
import { fakeApi } from "../support/dashboard-fixtures.ts";

const BASE = "http://127.0.0.1:8787";
const VIEW = "view-secret-token";

const HOSTILE = [
  "/\\127.0.0.1:18790/pwned",
  "\\\\evil.example",
  "//evil.example",
  "///evil.example",
  "https://evil.example/",
  "javascript:alert(1)",
  "evil.example/releases",
  "/\t/evil.example",
  "/\n/evil.example",
  "/%2f/evil.example",
  "/%5C/evil.example",
  "/releases\u0000x",
  " /releases",
  "",
];

describe("sign-in redirect (next)", () => {
  it.each(HOSTILE)("refuses %j and falls back to /releases", (next) => {
    expect(safeNext(next)).toBe("/releases");
  });

  it("keeps same-site paths with their query", () => {
    expect(safeNext("/releases/r3")).toBe("/releases/r3");
    expect(safeNext("/releases?state=running&before=r9")).toBe("/releases?state=running&before=r9");
    expect(safeNext(undefined)).toBe("/releases");
  });

  it("POST /login never answers a Location off the site", async () => {
    const app = dashboardApp({
      api: fakeApi(),
      tokens: { operator: "op-secret-token", viewer: VIEW },
      publicUrl: BASE,
      repository: "acme/models",
    });
    for (const next of HOSTILE) {
      const res = await app.request(`${BASE}/login`, {
        method: "POST",
        body: new URLSearchParams({ token: VIEW, next }),
        headers: { "content-type": "application/x-www-form-urlencoded" },
      });
      expect(res.status).toBe(303);
      const location = res.headers.get("location") ?? "";
      expect(location).toBe("/releases");
      expect(new URL(location, BASE).origin).toBe(BASE);
    }
  });
});
