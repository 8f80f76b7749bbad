/**
 * The store contract (test/contract/store.contract.ts) run inside workerd, the Workers
 * runtime, against a real Postgres over TCP sockets (pg + pg-cloudflare): the store the
 * Workers entry uses, checked where it runs. test/workerd/contract-worker.ts is bundled the
 * way the entry is (scripts/build-worker.mjs), with `vitest` replaced by mini-vitest.ts
 * (vitest's own `expect` on chai); each contract test runs in one request.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildWorker } from "../../scripts/build-worker.mjs";

const PG = process.env.BATON_TEST_DATABASE_URL;

describe.skipIf(!PG && process.env.CI !== "true")("store contract inside workerd", () => {
  let dir: string;
  let mf: Miniflare;
  const get = async (path: string) => {
    for (let i = 0; ; i++) {
      try {
        const res = await mf.dispatchFetch(`http://contract.test${path}`);
        return (await res.json()) as unknown;
      } catch (err) {
        // miniflare's client may reuse a keep-alive socket workerd has just closed: the request
        // never reached the worker; send it again (bounded).
        const socket = (err as { cause?: { code?: string } }).cause?.code === "UND_ERR_SOCKET";
        if (!socket || i >= 2) throw err;
      }
    }
  };

  beforeAll(async () => {
    if (!PG) throw new Error("[test] BATON_TEST_DATABASE_URL is not set (required when CI=true)");
    dir = mkdtempSync(join(tmpdir(), "baton-contract-workerd-"));
    const out = join(dir, "worker.mjs");
    await buildWorker(out, {
      entry: "test/workerd/contract-worker.ts",
      alias: { vitest: resolve("test/workerd/mini-vitest.ts") },
    });
    mf = new Miniflare({
      modules: [{ type: "ESModule", path: "worker.mjs", contents: readFileSync(out, "utf8") }],
      compatibilityDate: "2024-09-23",
      compatibilityFlags: ["nodejs_compat"],
      bindings: { DATABASE_URL: PG },
    });
  }, 120_000);

  afterAll(async () => {
    await mf?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("assertions inside workerd fail when they should", async () => {
    expect(await get("/selfcheck")).toEqual({
      toBe: true,
      toEqual: true,
      rejects: true,
      passes: true,
    });
  });

  it("every store contract test passes on Postgres from inside workerd", async () => {
    const names = (await get("/list")) as string[];
    // The whole contract, not a subset (it grows; this is its size when this test was written).
    expect(names.length).toBeGreaterThanOrEqual(39);
    const failed: string[] = [];
    for (let i = 0; i < names.length; i++) {
      const r = (await get(`/run?i=${i}`)) as { name: string; ok: boolean; error?: string };
      if (!r.ok) failed.push(`${r.name}: ${r.error}`);
    }
    expect(failed).toEqual([]);
  }, 600_000);
});
