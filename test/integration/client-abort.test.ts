/**
 * A client that closes its connection before its request body arrived is
 * logged as one quiet line (info, no stack), not as an error, and is not mistaken for a store
 * outage (the driver-like `ECONNRESET` of the aborted body read is the client's, not the
 * database's).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { type AddressInfo, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import { createEngine, type Engine } from "../../engine/src/engine.ts";
import { config, OPERATOR } from "./service-harness.ts";

const lines: { level: string; msg: string; err?: unknown }[] = [];
let engine: Engine;
let server: ReturnType<typeof serve>;
let port = 0;
let dir = "";

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "baton-abort-"));
  engine = await createEngine(config(dir), {
    dispatcher: new MemoryDispatcher(),
    controlPlane: new MemoryControlPlane(),
    log: {
      info: (msg) => lines.push({ level: "info", msg }),
      warn: (msg) => lines.push({ level: "warn", msg }),
      error: (msg, err) => lines.push({ level: "error", msg, err }),
    },
  });
  server = serve({ fetch: engine.app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise((r) => server.once("listening", r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Sends the head and a part of a body, then closes the socket. */
async function abortMidBody(path: string): Promise<void> {
  const s = connect(port, "127.0.0.1");
  s.on("error", () => {});
  await new Promise((r) => s.once("connect", r));
  s.write(
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${OPERATOR}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 50000\r\n\r\n{"name":',
  );
  // Let the handler start reading the body, then go away.
  await new Promise((r) => setTimeout(r, 100));
  s.destroy();
}

describe("client-aborted requests", () => {
  it("are one info line each, with no error and no stack on the console", async () => {
    const consoleError = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const paths = ["/v1/releases", "/v1/releases/step-runs/sr_1_1_f/callback"];
      for (const p of paths) await abortMidBody(p);
      // Bounded wait for the engine to notice both (2 s at most).
      for (let i = 0; i < 40 && lines.filter((l) => /closed/.test(l.msg)).length < 2; i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
      const aborted = lines.filter((l) => /client closed the connection/.test(l.msg));
      expect(aborted.map((l) => l.level)).toEqual(["info", "info"]);
      expect(aborted[0]?.msg).toMatch(/^\[engine\] POST \/v1\/releases: the client closed/);
      expect(aborted.every((l) => !l.msg.includes("\n"))).toBe(true);
      expect(lines.filter((l) => l.level === "error")).toEqual([]);
      expect(consoleError).not.toHaveBeenCalled();
    } finally {
      consoleError.mockRestore();
    }
    // The engine still answers on a new connection.
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(res.status).toBe(200);
  });
});
