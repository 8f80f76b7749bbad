/**
 * The Node entry (`startNodeServer`) on a real socket on 127.0.0.1: configuration from the
 * environment, a release created and driven to `succeeded` by signed preflights and callbacks
 * over HTTP (F12's exact bytes travel over the wire), then a clean shutdown.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import { startNodeServer } from "../../engine/src/main-node.ts";
import { signBody } from "../../engine/src/protocol/credential.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { onFreshPort, PortTaken, saysPortTaken } from "../support/ports.ts";
import { OPERATOR, preflightBody, recipe, SECRET, seedControlPlane } from "./service-harness.ts";

let dir: string;
let base: string;
let stop: () => Promise<void>;
const dispatcher = new MemoryDispatcher();
const cp = new MemoryControlPlane({ model: "summarizer-v7" });
const saved = { ...process.env };

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "baton-http-"));
  Object.assign(process.env, {
    BATON_DATA_DIR: dir,
    BATON_CALLBACK_SECRETS: SECRET,
    BATON_OPERATOR_TOKEN: OPERATOR,
    BATON_ADMISSION: "off",
    BATON_TICK_MS: "50",
  });
  delete process.env.DATABASE_URL;
  seedControlPlane(cp, recipe(2));
  // The entry binds the PORT it is configured with: a proposed one, another if it was taken.
  const { engine, server, port } = await onFreshPort("the Node entry", async (p) => {
    process.env.PORT = String(p);
    try {
      const started = await startNodeServer(
        { dispatcher, controlPlane: cp, log: { info() {}, warn() {}, error() {} } },
        "127.0.0.1",
      );
      return { ...started, port: p };
    } catch (e) {
      if (saysPortTaken(String((e as Error).message))) throw new PortTaken(p, String(e));
      throw e;
    }
  });
  base = `http://127.0.0.1:${port}`;
  stop = async () => {
    await new Promise<void>((r) => server.close(() => r()));
    await engine.close();
  };
});

afterAll(async () => {
  await stop?.();
  process.env = saved;
  rmSync(dir, { recursive: true, force: true });
});

async function signed(url: string, body: string) {
  return fetch(`${base}${url}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...signBody(SECRET, body) },
    body,
  });
}

describe("Node server on 127.0.0.1", () => {
  it("serves healthz, creates a release and drives it to succeeded over real HTTP", async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const created = await fetch(`${base}/v1/releases`, {
      method: "POST",
      headers: { authorization: `Bearer ${OPERATOR}`, "content-type": "application/json" },
      body: JSON.stringify(recipe(2)),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    let handled = 0;
    let state = "";
    // The server's own reconciler (eager + 50 ms interval) performs effects; bounded wait.
    for (let i = 0; i < 400 && state !== "succeeded"; i++) {
      for (const p of dispatcher.accepted.slice(handled) as DispatchPayload[]) {
        handled++;
        const run = { run_id: String(7000 + handled), run_attempt: 1 };
        expect(
          (await signed(`/v1/releases/step-runs/${p.step_run_id}/preflight`, preflightBody(p, run)))
            .status,
        ).toBe(200);
        // F12 over the wire: spaces after colons and an escaped é, verified as sent.
        const cb = `{"step_run_id": "${p.step_run_id}", "run_id": "${run.run_id}", "run_attempt": 1, "status": "succeeded", "overall": "pass", "checks": [], "log": "caf\\u00e9"}`;
        expect((await signed(`/v1/releases/step-runs/${p.step_run_id}/callback`, cb)).status).toBe(
          200,
        );
      }
      const rec = await fetch(`${base}/v1/releases/${id}`, {
        headers: { authorization: `Bearer ${OPERATOR}` },
      });
      state = ((await rec.json()) as { state: string }).state;
      if (state !== "succeeded") await new Promise((r) => setTimeout(r, 25));
    }
    expect(state).toBe("succeeded");
    const rec = (await (
      await fetch(`${base}/v1/releases/${id}`, { headers: { authorization: `Bearer ${OPERATOR}` } })
    ).json()) as { attempt_results: { log: string }[] };
    expect(rec.attempt_results.every((a) => a.log === "café")).toBe(true);
  });
});
