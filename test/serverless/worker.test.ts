/**
 * The Cloudflare Workers entry on the real runtime: the bundle scripts/build-worker.mjs makes,
 * run by workerd through miniflare 3, against a real Postgres over TCP sockets (pg +
 * pg-cloudflare), the GitHub stand-in and the reference control plane over HTTP. A release is
 * driven only by requests (operator, signed preflights and callbacks) and Cron Trigger events
 * (`scheduled`); no engine process lives between them. Asserted on the control plane's state,
 * not only on the engine's record.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  buildWorkerBundle,
  driveRelease,
  MODEL,
  type Send,
  type ServerlessWorld,
  serverlessRecipe,
  startServerlessWorld,
  startWorkerd,
  type Workerd,
  workerdRuntime,
} from "../support/serverless-world.ts";

const PG = process.env.BATON_TEST_DATABASE_URL;
const PUBLIC_URL = "https://baton.example.workers.dev";

describe.skipIf(!PG && process.env.CI !== "true")("Workers entry in workerd", () => {
  let dir: string;
  let bundle: string;
  let world: ServerlessWorld;
  let workerd: Workerd;
  let send: Send;
  let tick: () => Promise<void>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "baton-worker-"));
    bundle = buildWorkerBundle(dir);
    world = await startServerlessWorld(PUBLIC_URL);
    workerd = await startWorkerd(bundle, world.env, PUBLIC_URL);
    send = workerd.send;
    tick = workerd.tick;
  }, 120_000);

  afterAll(async () => {
    await workerd?.dispose();
    await world?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers /healthz 200 and a misconfigured worker 503 naming the variable", async () => {
    expect((await send("GET", "/healthz")).status).toBe(200);
    const bad = workerdRuntime(bundle, { ...world.env, DATABASE_URL: "mysql://nope" });
    try {
      const res = await bad.dispatchFetch(`${PUBLIC_URL}/healthz`);
      expect(res.status).toBe(503);
      expect(await res.text()).toContain("DATABASE_URL");
    } finally {
      await bad.dispose();
    }
  });

  it("answers a dashboard page with where the dashboard is: a redirect to BATON_DASHBOARD_URL, else a 404 naming the dashboard Worker", async () => {
    for (const path of ["/", "/releases", "/login", "/fleet", "/releases/r1?history=all"]) {
      const res = await send("GET", path);
      expect(res.status, path).toBe(404);
      const body = JSON.parse(res.body) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("dashboard_elsewhere");
      expect(body.error.message).toContain("the dashboard is a second Worker");
      expect(body.error.message).toContain("BATON_DASHBOARD_URL");
    }
    // The API's own unknown paths stay the API's 404.
    const api = await send("GET", "/v1/nothing-here");
    expect(api.status).toBe(404);
    expect(api.body).toContain("not_found");
    const dashboardUrl = "https://dash.example.workers.dev";
    const pointed = workerdRuntime(bundle, { ...world.env, BATON_DASHBOARD_URL: dashboardUrl });
    try {
      const res = await pointed.dispatchFetch(`${PUBLIC_URL}/releases/r1?history=all`, {
        redirect: "manual",
      });
      expect(res.status).toBe(302);
      expect(res.headers.get("location")).toBe(`${dashboardUrl}/releases/r1?history=all`);
      await res.text();
    } finally {
      await pointed.dispose();
    }
  });

  it("checks a recipe's PromQL templates inside workerd (the parser built at the first parse), refusing an invalid one by field", async () => {
    const recipe = {
      ...serverlessRecipe(),
      analysis: {
        metrics: [
          {
            name: "error-rate",
            kind: "ratio",
            better: "lower",
            margin: { absolute: 0.01 },
            query: {
              numerator: 'sum(increase(errors{model="$model",$arm_selector}[$window])',
              denominator: 'sum(increase(requests{model="$model",$arm_selector}[$window])) )',
            },
          },
        ],
      },
    };
    const auth = {
      authorization: `Bearer ${world.operatorToken}`,
      "content-type": "application/json",
    };
    const res = await send("POST", "/v1/releases", JSON.stringify(recipe), auth);
    expect(res.status).toBe(422);
    expect(res.body).toContain("analysis.metrics.0.query.numerator");
    expect(res.body).toMatch(
      /metric `error-rate`, numerator: query is not valid PromQL once its variables are filled: the query ends too early/,
    );
    expect(res.body).toContain("analysis.metrics.0.query.denominator");
    expect(res.body).toMatch(
      /denominator: query is not valid PromQL .*unexpected `\)` at character \d+/,
    );
  });

  it("a release driven by requests and scheduled ticks succeeds; traffic is on the candidate lanes' plan", async () => {
    const r = await driveRelease(world, send, tick);
    expect(r.state).toBe("succeeded");
    // Every runner step run was dispatched through GitHub and answered once.
    expect(new Set(r.answered).size).toBe(r.answered.length);
    // The control plane holds the last wave's plan, each keyed write applied once.
    const lanes = world.cp.core.lanes(MODEL);
    expect(lanes.map((l) => [l.id, l.weight, l.excluded])).toEqual([
      ["sl-0", 50, false],
      ["sl-1", 50, false],
    ]);
    const counts = world.cp.core.applicationCounts();
    expect(
      Object.keys(counts).filter((k) => k.startsWith(`${r.id}:`) && k.endsWith("fwd:traffic=100")),
    ).toHaveLength(1);
    expect(Object.values(counts).every((n) => n === 1)).toBe(true);
    expect(r.ticks).toBeGreaterThan(0);
  }, 180_000);

  it("a release whose second wave fails its runner step is rolled back to the observed baseline", async () => {
    const weightsNow = () =>
      Object.fromEntries(world.cp.core.lanes(MODEL).map((l) => [l.id, l.weight]));
    const before = weightsNow();
    const r = await driveRelease(world, send, tick, { failWave: 1 });
    expect(r.state).toBe("rolled_back");
    expect(r.answered.some((id) => id.endsWith("_b"))).toBe(true);
    expect(weightsNow()).toEqual(before);
    const counts = world.cp.core.applicationCounts();
    expect(Object.keys(counts).some((k) => k.startsWith(`${r.id}:`) && k.includes(":bwd:"))).toBe(
      true,
    );
    expect(Object.values(counts).every((n) => n === 1)).toBe(true);
  }, 180_000);

  it("the dashboard Worker signs in and lists the releases the engine Worker drove, from the same store; it serves no API and no runner protocol", async () => {
    const dashboardUrl = "https://dash.example.workers.dev";
    const dash = workerdRuntime(buildWorkerBundle(dir, "dashboard"), world.env);
    try {
      const login = await dash.dispatchFetch(`${dashboardUrl}/login`, {
        method: "POST",
        body: new URLSearchParams({ token: world.operatorToken, next: "/releases" }),
        headers: { origin: dashboardUrl },
        redirect: "manual",
      });
      expect(login.status).toBe(303);
      const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
      expect(cookie).toMatch(/=/);
      await login.text();
      const page = await dash.dispatchFetch(`${dashboardUrl}/releases`, {
        headers: { cookie },
        redirect: "manual",
      });
      const html = await page.text();
      expect(page.status).toBe(200);
      const listed = await send("GET", "/v1/releases", undefined, {
        authorization: `Bearer ${world.operatorToken}`,
      });
      const ids = (JSON.parse(listed.body) as { releases: { id: string }[] }).releases.map(
        (r) => r.id,
      );
      expect(ids.length).toBeGreaterThan(0);
      for (const id of ids) expect(html).toContain(id);
      for (const path of ["/healthz", "/v1/releases", "/v1/releases/step-runs/x_a/preflight"]) {
        const res = await dash.dispatchFetch(`${dashboardUrl}${path}`, {
          method: path.endsWith("preflight") ? "POST" : "GET",
          redirect: "manual",
        });
        expect(res.status, path).toBe(404);
        await res.text();
      }
    } finally {
      await dash.dispose();
    }
  }, 120_000);
});
