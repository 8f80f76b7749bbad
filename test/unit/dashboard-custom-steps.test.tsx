/**
 * The dashboard's step table shows a recipe's custom steps by name, and says of an
 * irreversible one that it has no undo because it cannot be undone (not that it is a check).
 */
import { expect, it } from "vitest";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import { fakeApi, succeededRecord } from "../support/dashboard-fixtures.ts";

const BASE = "http://127.0.0.1:8787";
const OP = "op-secret-token";

it("the step table names a custom step and marks an irreversible one irreversible", async () => {
  const rec = succeededRecord();
  const step = rec.release.manifest.steps.find((s) => s.kind === "runner" && s.lane !== null)!;
  const forward = step.forward;
  if (forward.kind !== "runner") throw new Error("fixture: no runner step");
  Object.assign(step, {
    name: "load_adapter",
    forward: { ...forward, name: "load_adapter", tool: "run-smoke" },
    backward: null,
    custom: { irreversible: true },
  });
  const app = dashboardApp({
    api: fakeApi([rec]),
    tokens: { operator: OP },
    publicUrl: BASE,
    repository: "acme/models",
    now: () => Date.UTC(2026, 10, 29, 12, 0, 0),
  });
  const login = await app.request(`${BASE}/login`, {
    method: "POST",
    body: new URLSearchParams({ token: OP, next: "/releases" }),
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  const cookie = /^(baton_session=[^;]+)/.exec(login.headers.get("set-cookie") ?? "")?.[1] ?? "";
  const res = await app.request(`${BASE}/releases/${rec.release.id}`, { headers: { cookie } });
  expect(res.status).toBe(200);
  const html = await res.text();
  const row = new RegExp(`<tr[^>]*id="step-${step.index + 1}"[\\s\\S]*?</tr>`).exec(html)?.[0];
  expect(row).toContain(`load adapter · ${step.lane}`);
  expect(row).toContain("irreversible");
  expect(row).not.toContain("check only");
});
