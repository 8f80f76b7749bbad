/**
 * The HTTP adapter's classification against the reference server with injected faults:
 * 500 and a hang are `unknown` and apply nothing; apply-then-hang is `unknown`, then `observe`
 * finds the target state and a re-send of the same key is a replay (one application); 4xx is
 * `failed` with the server's message; a closed port is `unknown`. docs/state-machine.md rule 5.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { HttpControlPlane } from "../../engine/src/adapters/http-control-plane/index.ts";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import {
  type ControlPlaneHandle,
  startControlPlane,
} from "../../engine/src/control-plane/server.ts";
import type { ControlPlaneOp } from "../../engine/src/domain/types.ts";

const op: ControlPlaneOp = {
  op: "set_traffic",
  weights: { "lane-a": 90, "lane-b": 10 },
  percent: 10,
};
const ctx = {
  operation_key: "r17:6:fwd:traffic=10",
  release_id: "r17",
  generation: 1,
  model: "default",
};
/** Short timeout, only for calls the server is told to hang on; everything else gets 10 s. */
const TIMEOUT_MS = 300;

describe("HTTP control-plane adapter: classification", () => {
  let server: ControlPlaneHandle;
  let cp: HttpControlPlane;
  let short: HttpControlPlane;
  const applications = (key: string) => server.core.history({ operation_key: key }).length;

  beforeEach(async () => {
    server = await startControlPlane({ faults: true });
    server.core.seed([
      { id: "lane-a", model: "default", weight: 100 },
      { id: "lane-b", model: "default", weight: 0 },
    ]);
    cp = new HttpControlPlane({ baseUrl: server.url, token: server.writeToken, timeoutMs: 10_000 });
    short = new HttpControlPlane({
      baseUrl: server.url,
      token: server.writeToken,
      timeoutMs: TIMEOUT_MS,
    });
  });
  afterEach(() => server.close());

  it("2xx is ok, with replayed from the server", async () => {
    expect(await cp.apply(op, ctx)).toEqual({ outcome: "ok", replayed: false });
    expect(await cp.apply(op, ctx)).toEqual({ outcome: "ok", replayed: true });
  });

  it("500 is unknown and applies nothing; observe says it does not match", async () => {
    server.faults!.arm({ mode: "error" });
    const r = await cp.apply(op, ctx);
    expect(r).toMatchObject({ outcome: "unknown" });
    expect(r.outcome === "unknown" && r.message).toMatch(/HTTP 500/);
    expect(applications(ctx.operation_key)).toBe(0);
    expect(await cp.observe(op, ctx)).toMatchObject({ ok: true, matches: false });
    // The identical keyed re-send then applies once.
    expect(await cp.apply(op, ctx)).toEqual({ outcome: "ok", replayed: false });
    expect(applications(ctx.operation_key)).toBe(1);
  });

  it("a hang past the timeout is unknown and applies nothing", async () => {
    server.faults!.arm({ mode: "hang", hang_ms: 5000 });
    const r = await short.apply(op, ctx);
    expect(r).toMatchObject({ outcome: "unknown" });
    expect(r.outcome === "unknown" && r.message).toMatch(/timed out after 300 ms/);
    expect(applications(ctx.operation_key)).toBe(0);
    expect(await cp.observe(op, ctx)).toMatchObject({ ok: true, matches: false });
  });

  it("apply-then-timeout is unknown; observe matches; the re-send is a replay (one application)", async () => {
    server.faults!.arm({ mode: "apply_then_hang", hang_ms: 5000 });
    expect(await short.apply(op, ctx)).toMatchObject({ outcome: "unknown" });
    expect(await cp.observe(op, ctx)).toEqual({
      ok: true,
      matches: true,
      observed: { "lane-a": 90, "lane-b": 10 },
    });
    expect(await cp.apply(op, ctx)).toEqual({ outcome: "ok", replayed: true });
    expect(applications(ctx.operation_key)).toBe(1);
    const routed = await fetch(`${server.url}/v1/route`, {
      method: "POST",
      body: '{"requests":10000}',
    });
    expect(((await routed.json()) as { counts: Record<string, number> }).counts["lane-b"]).toBe(
      1000,
    );
  });

  it("faults match by operation key and are spent after count", async () => {
    server.faults!.arm({ mode: "error", count: 2, match: ":traffic=50" });
    const other = { ...ctx, operation_key: "r17:6:fwd:traffic=10" };
    expect((await cp.apply(op, other)).outcome).toBe("ok");
    const fifty = { ...ctx, operation_key: "r17:9:fwd:traffic=50" };
    const op50: ControlPlaneOp = {
      op: "set_traffic",
      weights: { "lane-a": 50, "lane-b": 50 },
      percent: 50,
    };
    expect((await cp.apply(op50, fifty)).outcome).toBe("unknown");
    expect((await cp.apply(op50, fifty)).outcome).toBe("unknown");
    expect((await cp.apply(op50, fifty)).outcome).toBe("ok");
    expect(server.faults!.armed()).toEqual([]);
  });

  it("4xx is failed with the server's message", async () => {
    await cp.apply(op, ctx);
    const reused = await cp.apply({ ...op, weights: { "lane-a": 80, "lane-b": 20 } }, ctx);
    expect(reused).toMatchObject({ outcome: "failed", status: 422 });
    expect(reused.outcome === "failed" && reused.message).toMatch(
      /HTTP 422: \[control-plane\] operation key r17:6:fwd:traffic=10 was already used/,
    );
    const stale = await cp.apply(
      { op: "set_marker", lane: "lane-a", marker: "excluded", present: true },
      { ...ctx, operation_key: "k2", generation: 0 },
    );
    expect(stale).toMatchObject({ outcome: "failed", status: 409 });
  });

  it("a failed read is ok:false, not a mismatch", async () => {
    server.faults!.arm({ mode: "error", on: "read" });
    expect(await cp.observe(op, ctx)).toMatchObject({ ok: false });
    server.faults!.arm({ mode: "hang", on: "read", match: "/v1/lanes/lane-a", hang_ms: 5000 });
    const marker: ControlPlaneOp = {
      op: "set_marker",
      lane: "lane-a",
      marker: "excluded",
      present: false,
    };
    const r = await short.observe(marker, ctx);
    expect(r).toMatchObject({ ok: false });
    expect(!r.ok && r.message).toMatch(/timed out/);
    // assert_traffic's read failing is unknown, never failed.
    server.faults!.arm({ mode: "error", on: "read" });
    expect(
      (await cp.apply({ op: "assert_traffic", weights: op.weights, percent: 10 }, ctx)).outcome,
    ).toBe("unknown");
  });

  it("a closed port is unknown", async () => {
    const url = server.url;
    await server.close();
    const r = await new HttpControlPlane({ baseUrl: url, timeoutMs: TIMEOUT_MS }).apply(op, ctx);
    expect(r).toMatchObject({ outcome: "unknown" });
    expect(r.outcome === "unknown" && r.message).toMatch(/network|timed out/);
    server = await startControlPlane(); // afterEach closes this one
  });
});

describe("HTTP control-plane adapter: answers that are not the reference server's", () => {
  it("classifies a non-JSON 502 as unknown and a bare 404 on a write as failed", async () => {
    let status = 502;
    const stand = createServer((_req, res) => {
      res.writeHead(status, { "content-type": "text/html" }).end("<html>bad gateway</html>");
    });
    await new Promise<void>((r) => stand.listen(0, "127.0.0.1", r));
    try {
      const url = `http://127.0.0.1:${(stand.address() as AddressInfo).port}`;
      const cp = new HttpControlPlane({ baseUrl: url, timeoutMs: 10_000 });
      const r = await cp.apply(op, ctx);
      expect(r).toMatchObject({ outcome: "unknown" });
      expect(r.outcome === "unknown" && r.message).toMatch(/HTTP 502: <html>bad gateway/);
      status = 404;
      expect(await cp.apply(op, ctx)).toMatchObject({ outcome: "failed", status: 404 });
    } finally {
      await new Promise<void>((r) => stand.close(() => r()));
    }
  });
});

describe("memory double: faults and call records", () => {
  it("records every call and counts applications, not replays", async () => {
    const cp = new MemoryControlPlane();
    cp.seed([
      { id: "lane-a", weight: 100 },
      { id: "lane-b", weight: 0 },
    ]);
    cp.faults.arm({ mode: "error" });
    expect((await cp.apply(op, ctx)).outcome).toBe("unknown");
    expect(cp.applications(ctx.operation_key)).toBe(0);
    cp.faults.arm({ mode: "apply_then_hang" });
    expect((await cp.apply(op, ctx)).outcome).toBe("unknown");
    expect(await cp.observe(op, ctx)).toMatchObject({ ok: true, matches: true });
    expect(await cp.apply(op, ctx)).toEqual({ outcome: "ok", replayed: true });
    expect(cp.applications(ctx.operation_key)).toBe(1);
    expect(
      cp.calls.map((c) => `${c.method}:${c.method === "apply" ? c.result.outcome : c.result.ok}`),
    ).toEqual(["apply:unknown", "apply:unknown", "observe:true", "apply:ok"]);
    expect(cp.route(10_000).counts).toEqual({ "lane-a": 9000, "lane-b": 1000 });
  });
});
