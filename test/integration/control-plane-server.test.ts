/**
 * The reference control-plane server over raw HTTP: bad input is a 400 naming the field (never a
 * 500), unknown lanes are 404 with a clear message, history and ledger are readable, fault
 * injection is off by default, and state, ledger and generations survive a restart on the same
 * SQLite file.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type ControlPlaneHandle,
  startControlPlane,
} from "../../engine/src/control-plane/server.ts";

// biome-ignore lint/suspicious/noExplicitAny: test reads JSON answers of many shapes
type Answer = { status: number; body: any };

function client(url: string, token: string) {
  return async function call(
    method: string,
    path: string,
    body?: unknown,
    identity: Record<string, string> | null = { key: "k1", release: "r17", generation: "1" },
  ): Promise<Answer> {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      authorization: `Bearer ${token}`,
    };
    if (identity?.key !== undefined) headers["Idempotency-Key"] = identity.key;
    if (identity?.release !== undefined) headers["Baton-Release-Id"] = identity.release;
    if (identity?.generation !== undefined) headers["Baton-Generation"] = identity.generation;
    const res = await fetch(`${url}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
}

describe("reference control-plane server: HTTP edge", () => {
  let server: ControlPlaneHandle;
  let call: ReturnType<typeof client>;
  beforeEach(async () => {
    server = await startControlPlane();
    call = client(server.url, server.writeToken);
  });
  afterEach(() => server.close());

  const expectBad = (r: Answer, path: string, message: RegExp) => {
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.error.code).toBe("bad_request");
    expect(r.body.error.message).toMatch(/^\[control-plane\] /);
    const problem = r.body.error.problems.find((p: { path: string }) => p.path === path);
    expect(problem, JSON.stringify(r.body.error.problems)).toBeDefined();
    expect(problem.message).toMatch(message);
    expect(problem.fix).toEqual(expect.any(String));
  };

  it("names the field of every bad body, header and path, and applies nothing", async () => {
    const t = "/v1/models/default/traffic";
    expectBad(await call("PUT", t, { weights: { a: 60, b: 30 } }), "body.weights", /sum to 100/);
    expectBad(await call("PUT", t, { weights: { a: "50", b: 50 } }), "body.weights.a", /number/);
    expectBad(
      await call("PUT", t, { weights: { a: 100 }, extra: 1 }),
      "body",
      /unknown field\(s\): extra/,
    );
    expectBad(await call("PUT", t, { weights: [100] }), "body.weights", /object/);
    expectBad(await call("PUT", t, "{not json"), "body", /not valid JSON/);
    expectBad(await call("PUT", t, ""), "body", /empty/);
    expectBad(await call("PUT", t, null), "body", /./);
    expectBad(
      await call("PUT", "/v1/lanes/a/markers/excluded", { present: "yes" }),
      "body.present",
      /true or false/,
    );
    expectBad(
      await call("PUT", "/v1/lanes/a/markers/drained", { present: true }),
      "path.marker",
      /excluded/,
    );
    expectBad(
      await call("PUT", "/v1/lanes/a/capabilities", { capabilities: "chat", advertised: true }),
      "body.capabilities",
      /array/,
    );
    expectBad(await call("PUT", "/v1/lanes/a/weight", { weight: 101 }), "body.weight", /<= 100/);
    expectBad(
      await call("PUT", "/v1/lanes/-a/weight", { weight: 1 }),
      "path.lane",
      /lane id is invalid/,
    );
    expectBad(
      await call("PUT", "/v1/lanes/a/weight", { weight: 1 }, { release: "r17", generation: "1" }),
      "header.operation_key",
      /Idempotency-Key is required/,
    );
    expectBad(
      await call("PUT", "/v1/lanes/a/weight", { weight: 1 }, { key: "k", generation: "1" }),
      "header.release_id",
      /Baton-Release-Id is required/,
    );
    expectBad(
      await call(
        "PUT",
        "/v1/lanes/a/weight",
        { weight: 1 },
        { key: "k", release: "r1", generation: "-1" },
      ),
      "header.generation",
      /non-negative integer/,
    );
    expectBad(
      await call(
        "PUT",
        "/v1/lanes/a/weight",
        { weight: 1 },
        { key: "k", release: "r1", generation: "1.5" },
      ),
      "header.generation",
      /non-negative integer/,
    );
    expectBad(await call("POST", "/v1/route", { requests: -1 }), "body.requests", />= 0/);
    expectBad(await call("POST", "/v1/route", { requests: 1.5 }), "body.requests", /integer/);
    expectBad(await call("GET", "/v1/history?limit=zero"), "query.limit", /./);
    expect((await call("GET", "/v1/history")).body.history).toEqual([]);
    expect((await call("GET", "/v1/lanes")).body.lanes).toEqual([]);
  });

  it("refuses every write without the bearer token (401, nothing applied); reads and routing stay open", async () => {
    const t = "/v1/models/default/traffic";
    const body = JSON.stringify({ weights: { a: 100 } });
    const identity = {
      "content-type": "application/json",
      "Idempotency-Key": "k-auth",
      "Baton-Release-Id": "r17",
      "Baton-Generation": "1",
    };
    const cases: [Record<string, string>, RegExp][] = [
      [{}, /writes need Authorization: Bearer <token>.*BATON_CONTROL_PLANE_TOKEN/],
      [{ authorization: "Bearer wrong-token-0123456789" }, /not this control plane's write token/],
      [{ authorization: `Basic ${server.writeToken}` }, /not `Bearer <token>`|Bearer/],
    ];
    for (const [auth, message] of cases) {
      const res = await fetch(`${server.url}${t}`, {
        method: "PUT",
        headers: { ...identity, ...auth },
        body,
      });
      expect([400, 401]).toContain(res.status);
      const j = (await res.json()) as { error: { code: string; message: string } };
      expect(j.error.code).toBe("unauthorized");
      expect(j.error.message).toMatch(message);
    }
    const admin = await fetch(`${server.url}/v1/admin/faults`, { method: "DELETE" });
    expect(admin.status).toBe(401);
    // Nothing was applied: the model has no traffic, the ledger is empty.
    expect((await call("GET", t)).status).toBe(404);
    expect((await call("GET", "/v1/ledger")).body).toMatchObject({ ledger: [] });
    const routed = await fetch(`${server.url}/v1/route`, { method: "POST", body: "{}" });
    expect(routed.status).not.toBe(401);
    // With the token, the same write applies (to a declared lane: a write never creates one).
    server.core.seed([{ id: "a", model: "default", weight: 0 }]);
    const ok = await fetch(`${server.url}${t}`, {
      method: "PUT",
      headers: { ...identity, authorization: `Bearer ${server.writeToken}` },
      body,
    });
    expect(ok.status).toBe(200);
    expect((await call("GET", t)).body).toMatchObject({ weights: { a: 100 } });
  });

  it("refuses an oversized body with 413", async () => {
    const weights: Record<string, number> = { a: 100 };
    for (let i = 0; i < 30_000; i++) weights[`lane-${i}`] = 0;
    const r = await call("PUT", "/v1/models/default/traffic", { weights });
    expect(r.status).toBe(413);
    expect(r.body.error.message).toMatch(/^\[control-plane\]/);
  });

  it("answers 404 with a clear message for unknown lanes, models and routes", async () => {
    const lane = await call("GET", "/v1/lanes/lane-x");
    expect(lane.status).toBe(404);
    expect(lane.body.error.message).toBe(
      "[control-plane] lane lane-x is unknown; declare it with PUT /v1/lanes/lane-x (a write never creates a lane)",
    );
    const write = await call(
      "PUT",
      "/v1/lanes/lane-x/markers/excluded",
      { present: true },
      { key: "x1", release: "r1", generation: "1" },
    );
    expect(write.status).toBe(404);
    expect(write.body.error.code).toBe("unknown_lane");
    expect(write.body.error.message).toContain("a write never creates a lane");
    expect((await call("GET", "/v1/lanes/lane-x")).status).toBe(404);
    const model = await call("GET", "/v1/models/llama/traffic");
    expect(model.status).toBe(404);
    expect(model.body.error.message).toMatch(/no lane serves model llama/);
    expect((await call("POST", "/v1/route", { requests: 10, model: "llama" })).status).toBe(404);
    expect((await call("GET", "/v1/nothing")).status).toBe(404);
  });

  it("declares lanes per model and refuses a traffic write naming another model's lane (409)", async () => {
    expect(
      (
        await call(
          "PUT",
          "/v1/lanes/gpu-1",
          { model: "llama" },
          { key: "d1", release: "r1", generation: "1" },
        )
      ).status,
    ).toBe(200);
    const got = await call("GET", "/v1/lanes/gpu-1");
    expect(got.body).toMatchObject({ id: "gpu-1", model: "llama", weight: 0, excluded: false });
    const r = await call(
      "PUT",
      "/v1/models/default/traffic",
      { weights: { "gpu-1": 100 } },
      { key: "t1", release: "r1", generation: "1" },
    );
    expect(r.status).toBe(409);
    expect(r.body.error.code).toBe("lane_model_conflict");
    const ok = await call(
      "PUT",
      "/v1/models/llama/traffic",
      { weights: { "gpu-1": 100 } },
      { key: "t2", release: "r1", generation: "1" },
    );
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({
      applied: true,
      replayed: false,
      kind: "set_traffic",
      state: { "gpu-1": 100 },
    });
    expect((await call("POST", "/v1/route", { requests: 3, model: "llama" })).body.counts).toEqual({
      "gpu-1": 3,
    });
  });

  it("records history (before/after, key, release, generation) and the ledger; replays add nothing", async () => {
    const id = { key: "r17:3:fwd:include=lane-a", release: "r17", generation: "2" };
    server.core.seed([{ id: "lane-a", model: "default", weight: 100 }]);
    const first = await call("PUT", "/v1/lanes/lane-a/markers/excluded", { present: false }, id);
    const replay = await call("PUT", "/v1/lanes/lane-a/markers/excluded", { present: false }, id);
    expect(first.body.replayed).toBe(false);
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual({ ...first.body, replayed: true });
    const history = (await call("GET", "/v1/history?release_id=r17")).body.history;
    expect(history).toHaveLength(1);
    expect(history[0]).toMatchObject({
      id: 1,
      operation_key: id.key,
      release_id: "r17",
      generation: 2,
      kind: "set_marker",
      lane: "lane-a",
      before: { id: "lane-a", excluded: false },
      after: { id: "lane-a", excluded: false },
    });
    expect(history[0].at).toEqual(expect.any(Number));
    const ledger = (await call("GET", "/v1/ledger")).body.ledger;
    expect(ledger).toHaveLength(1);
    expect(ledger[0]).toMatchObject({ operation_key: id.key, release_id: "r17", generation: 2 });
    expect(ledger[0].request_hash).toMatch(/^[0-9a-f]{64}$/);
    expect((await call("GET", "/v1/history?lane=lane-b")).body.history).toEqual([]);
    expect((await call("GET", "/v1/history?after=1")).body.history).toEqual([]);
  });

  it("keeps fault injection off unless enabled", async () => {
    const r = await call("POST", "/v1/admin/faults", { mode: "error" });
    expect(r.status).toBe(404);
    expect(r.body.error.message).toMatch(/fault injection is disabled/);
    expect(server.faults).toBeNull();
  });

  it("validates fault rules when enabled", async () => {
    const faulty = await startControlPlane({ faults: true });
    try {
      const c = client(faulty.url, faulty.writeToken);
      const bad = await c("POST", "/v1/admin/faults", { mode: "explode" });
      expect(bad.status).toBe(400);
      expect(bad.body.error.problems[0]).toMatchObject({ path: "body.mode" });
      faulty.core.seed([{ id: "a", model: "default", weight: 100 }]);
      expect((await c("POST", "/v1/admin/faults", { mode: "error", count: 2 })).status).toBe(201);
      expect((await c("GET", "/v1/admin/faults")).body.armed).toMatchObject([
        { mode: "error", count: 2 },
      ]);
      const w = await c("PUT", "/v1/lanes/a/weight", { weight: 5 });
      expect(w.status).toBe(500);
      expect((await c("DELETE", "/v1/admin/faults")).status).toBe(204);
      expect((await c("PUT", "/v1/lanes/a/weight", { weight: 5 })).status).toBe(200);
    } finally {
      await faulty.close();
    }
  });
});

describe("reference control-plane server: persistence", () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-cp-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps state, ledger, generations and history across a restart on the same file", async () => {
    const file = join(dir, "control-plane.sqlite");
    const first = await startControlPlane({ dataFile: file });
    first.core.seed([
      { id: "lane-a", model: "default", weight: 50 },
      { id: "lane-b", model: "default", weight: 50 },
    ]);
    const a = client(first.url, first.writeToken);
    const key = { key: "r17:6:fwd:traffic=10", release: "r17", generation: "3" };
    const body = { weights: { "lane-a": 90, "lane-b": 10 } };
    expect((await a("PUT", "/v1/models/default/traffic", body, key)).status).toBe(200);
    expect(
      (
        await a(
          "PUT",
          "/v1/lanes/lane-b/markers/excluded",
          { present: false },
          { ...key, key: "k2" },
        )
      ).status,
    ).toBe(200);
    await first.close();

    const second = await startControlPlane({ dataFile: file });
    try {
      const b = client(second.url, second.writeToken);
      expect((await b("GET", "/v1/models/default/traffic")).body.weights).toEqual(body.weights);
      const replay = await b("PUT", "/v1/models/default/traffic", body, key);
      expect(replay.body).toMatchObject({ replayed: true, applied: true });
      expect(
        (await b("PUT", "/v1/models/default/traffic", { weights: { "lane-a": 100 } }, key)).status,
      ).toBe(422);
      const stale = await b(
        "PUT",
        "/v1/lanes/lane-a/markers/excluded",
        { present: true },
        { ...key, key: "k3", generation: "2" },
      );
      expect(stale.status).toBe(409);
      expect(
        (await b("GET", `/v1/history?operation_key=${encodeURIComponent(key.key)}`)).body.history,
      ).toHaveLength(1);
      expect((await b("GET", "/v1/history")).body.history).toHaveLength(2);
      expect((await b("POST", "/v1/route", { requests: 10_000 })).body.counts).toEqual({
        "lane-a": 9000,
        "lane-b": 1000,
      });
    } finally {
      await second.close();
    }
  });
});
