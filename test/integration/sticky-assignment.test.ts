/**
 * Sticky assignment at the reference router proxy over HTTP (engine/src/control-plane/
 * router-proxy.ts): requests without the unit's key, the counts `GET /counts/<model>` answers,
 * and those counts in the gate's sample-ratio test, where a few heavy sessions must not read as a
 * mismatch. (Stickiness while the share widens: test/property/sticky.property.test.ts.)
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { LaneState } from "../../engine/src/control-plane/model.ts";
import {
  type AssignmentOptions,
  type RouterCounts,
  type RouterProxyHandle,
  startRouterProxy,
} from "../../engine/src/control-plane/router-proxy.ts";
import type { AssignmentUnit } from "../../engine/src/domain/gate/analysis.ts";
import { Analysis } from "../../engine/src/domain/gate/analysis.ts";
import { decideGate } from "../../engine/src/domain/gate/decide.ts";
import { srmTest } from "../../engine/src/domain/gate/srm.ts";

const lane = (id: string, weight: number): LaneState =>
  ({
    id,
    model: "m",
    weight,
    excluded: false,
    capabilities: [],
    advertised: false,
    updated_at: 0,
  }) as LaneState;

describe("sticky assignment at the router proxy", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  async function laneServer(image: string): Promise<string> {
    const server = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ image }));
    });
    await new Promise<void>((ok) => server.listen(0, "127.0.0.1", () => ok()));
    closers.push(
      () =>
        new Promise<void>((ok) => {
          server.close(() => ok());
          server.closeAllConnections();
        }),
    );
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  /** A proxy over candidate lane `c` (10%) and control lane `b` (90%), `unit` for model m. */
  async function proxy(unit: AssignmentUnit, extra: Partial<AssignmentOptions> = {}) {
    const ups: Record<string, string> = { c: await laneServer("new"), b: await laneServer("old") };
    const p: RouterProxyHandle = await startRouterProxy({
      lanes: () => [lane("c", 10), lane("b", 90)],
      upstream: (id) => ups[id] ?? null,
      assignment: {
        unit: () => unit,
        arm: (_m, id) => (id === "c" ? "candidate" : "control"),
        ...extra,
      },
    });
    closers.push(() => p.close());
    return p;
  }

  async function get(p: RouterProxyHandle, headers: Record<string, string> = {}) {
    const res = await fetch(`${p.url}/route/m/v1/x`, { headers });
    const body = (await res.json()) as { image: string };
    return {
      status: res.status,
      image: body.image,
      unit: res.headers.get("baton-unit"),
      batch: res.headers.get("baton-batch"),
    };
  }

  const counts = async (p: RouterProxyHandle) =>
    (await (await fetch(`${p.url}/counts/m`)).json()) as RouterCounts;

  it("a request without the unit's key is routed per request (the exact split) and counted as keyless, not as a unit", async () => {
    const p = await proxy("user");
    const answers = [];
    for (let i = 0; i < 100; i++) answers.push(await get(p, i % 2 ? { "baton-user": "  " } : {}));
    expect(answers.every((a) => a.status === 200 && a.unit === "none" && a.batch)).toBe(true);
    expect(answers.filter((a) => a.image === "new")).toHaveLength(10);
    const c = await counts(p);
    expect(c).toMatchObject({
      unit: "user",
      arms: {
        candidate: { requests: 10, units: 0, keyless: 10 },
        control: { requests: 90, units: 0, keyless: 90 },
      },
    });
    const keyed = await get(p, { "baton-user": "u-1" });
    expect(keyed).toMatchObject({ status: 200, unit: "user", batch: null });
    expect((await counts(p)).arms[keyed.image === "new" ? "candidate" : "control"]).toMatchObject({
      units: 1,
    });
  });

  it("request assignment: every request is a unit, routed in exact batches, no unit header", async () => {
    const p = await proxy("request");
    const answers = [];
    for (let i = 0; i < 100; i++) answers.push(await get(p, { "baton-session": "s" }));
    expect(answers.filter((a) => a.image === "new")).toHaveLength(10);
    expect(answers.every((a) => a.unit === null && a.batch)).toBe(true);
    expect((await counts(p)).arms).toEqual({
      candidate: { requests: 10, units: 10, keyless: 0 },
      control: { requests: 90, units: 90, keyless: 0 },
    });
  });

  it("reads the unit's key from the header configured for it", async () => {
    const p = await proxy("tenant", { headers: { tenant: "X-Org" } });
    const first = await get(p, { "x-org": "acme" });
    expect(first.unit).toBe("tenant");
    for (let i = 0; i < 20; i++)
      expect((await get(p, { "x-org": "acme" })).image).toBe(first.image);
    const c = await counts(p);
    expect(c.arms.candidate.units + c.arms.control.units).toBe(1);
    expect(c.arms.candidate.requests + c.arms.control.requests).toBe(21);
  });

  it("the gate's sample-ratio test reads the router's unit counts: a few heavy sessions on the candidate are no mismatch", async () => {
    const p = await proxy("session");
    const heavy: string[] = [];
    for (let i = 0; i < 200; i++) {
      const key = `s-${i}`;
      if ((await get(p, { "baton-session": key })).image === "new") heavy.push(key);
    }
    // The candidate's sessions happen to be heavy users: 40 more requests each.
    for (const key of heavy)
      for (let r = 0; r < 40; r++)
        expect((await get(p, { "baton-session": key })).image).toBe("new");
    const c = await counts(p);
    expect(c.arms.candidate.units).toBe(heavy.length);
    expect(c.arms.candidate.units + c.arms.control.units).toBe(200);
    const requests = [c.arms.candidate.requests, c.arms.control.requests];
    // Counted per request, the split is far from the planned 10%…
    expect(srmTest(requests, [0.1, 0.9], 0.05).mismatch).toBe(true);
    // …counted per session, as the gate does under `session`, it is the plan.
    const analysis = Analysis.parse({
      assignment_unit: "session",
      min_samples: 10,
      metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.05 } }],
    });
    const e = decideGate(
      { analysis, plannedCandidateShare: 0.1, elapsedMs: 120_000, phase: "gate" },
      {
        assignments: { candidate: c.arms.candidate.units, control: c.arms.control.units },
        metrics: {
          "error-rate": {
            candidate: { kind: "ratio", counts: { numerator: 0, denominator: requests[0]! } },
            control: { kind: "ratio", counts: { numerator: 0, denominator: requests[1]! } },
          },
        },
      },
    );
    expect(e.srm?.mismatch).toBe(false);
    expect(e.decision).not.toBe("fail");
  });
});
