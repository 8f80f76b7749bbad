/**
 * Read-back after every control-plane write (docs/state-machine.md "Control-plane steps"), on
 * both stores: the reference control-plane server, reached through the real HTTP adapter, is
 * told to `lie` (answer 200 to a write it drops). Forward, the step run fails on its read-back
 * and the release compensates to the observed baseline; backward, the write is retried within
 * its budget and then `needs_operator` names the lane state observed vs expected. Assertions
 * read the control plane's own lanes and history, not only the engine's records.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { HttpControlPlane } from "../../engine/src/adapters/http-control-plane/index.ts";
import type { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { startEmbeddedControlPlane } from "../../engine/src/control-plane/embedded.ts";
import type { ControlPlaneHandle } from "../../engine/src/control-plane/server.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  createRelease,
  drive,
  getRecord,
  type Harness,
  makeHarness,
  recipe,
  STORE_KINDS,
  type StoreKind,
  skipStore,
} from "../integration/service-harness.ts";

const MODEL = "summarizer-v7";
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
});

async function world(kind: StoreKind): Promise<{ h: Harness; cp: ControlPlaneHandle }> {
  const dir = mkdtempSync(join(tmpdir(), "baton-readback-"));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  const { handle } = await startEmbeddedControlPlane({ dataDir: join(dir, "cp"), faults: true });
  cleanups.push(() => handle.close());
  handle.core.seed(
    recipe(2).lanes!.map((l, i) => ({
      id: String(l.id),
      model: MODEL,
      weight: 50,
      capabilities: [...((l.capabilities as string[]) ?? [])].sort(),
      advertised: false,
    })),
  );
  const controlPlane = new HttpControlPlane({
    baseUrl: handle.url,
    token: handle.writeToken,
    timeoutMs: 2_000,
  });
  const h = await makeHarness({ kind, dir, cp: controlPlane as unknown as MemoryControlPlane });
  cleanups.push(() => h.close());
  return { h, cp: handle };
}

/** Every lane of the model as the control plane holds it (weight, marker, capabilities). */
const lanesOf = (cp: ControlPlaneHandle) =>
  cp.core.lanes(MODEL).map((l) => [l.id, l.weight, l.excluded, l.capabilities, l.advertised]);

/** Fails the smoke check of the last lane, so the release compensates after traffic moved. */
async function failLastSmoke(h: Harness, id: string) {
  const rec = await getRecord(h, id);
  const steps = (rec as unknown as { manifest: { steps: { name: string; lane: string }[] } })
    .manifest.steps;
  const idx = steps.findLastIndex((s) => s.name === "assert_smoke_passed");
  const target = `sr_${id.slice(1)}_${idx}_f`;
  return (p: DispatchPayload) => (p.step_run_id === target ? "fail" : "pass");
}

describe.each(STORE_KINDS)("read-back after every write on %s", (kind) => {
  const skip = skipStore(kind);

  it.skipIf(skip)(
    "forward: a write answered 200 but dropped fails its step; the release compensates to the baseline",
    async () => {
      const { h, cp } = await world(kind);
      const before = lanesOf(cp);
      // Every forward set_traffic write is acknowledged and dropped.
      cp.faults!.arm({ mode: "lie", match: ":fwd:traffic=", count: 1000 });
      const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 0 } }));
      await drive(h);
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("rolled_back");
      const failed = rec.step_runs.find((s) => s.direction === "fwd" && s.state === "failed")!;
      expect(failed.last_error).toMatch(
        /answered 2xx but the read-back shows traffic \{.*\}, expected traffic \{.*\}/,
      );
      // The environment: the dropped write never reached the control plane's history, and every
      // lane is back at the state it had before the release.
      const applied = cp.core.history({ release_id: id }).map((c) => c.operation_key);
      expect(applied.some((k) => k.includes(":fwd:traffic="))).toBe(false);
      expect(lanesOf(cp)).toEqual(before);
    },
  );

  it.skipIf(skip)(
    "backward: one dropped write is retried within the budget and the release rolls back",
    async () => {
      const { h, cp } = await world(kind);
      const before = lanesOf(cp);
      const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 0 } }));
      cp.faults!.arm({ mode: "lie", match: ":bwd:traffic=", count: 1 });
      await drive(h, await failLastSmoke(h, id));
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("rolled_back");
      const retried = rec.history.find((e) => /retry 1 of 2 with the same/.test(e.message));
      expect(retried?.message).toMatch(/read-back shows traffic/);
      expect(lanesOf(cp)).toEqual(before);
    },
  );

  it.skipIf(skip)(
    "backward: a write that never takes ends needs_operator naming the lanes, observed vs expected",
    async () => {
      const { h, cp } = await world(kind);
      const id = await createRelease(h, recipe(2, { policy: { rerun_window_minutes: 0 } }));
      cp.faults!.arm({ mode: "lie", match: ":bwd:traffic=", count: 1000 });
      await drive(h, await failLastSmoke(h, id));
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("needs_operator");
      const reason = (rec as unknown as { reason: string }).reason;
      expect(reason).toMatch(
        /read-back shows traffic \{"lane-a":\d+,"lane-b":\d+\}, expected traffic \{"lane-a":\d+,"lane-b":\d+\}/,
      );
      expect(reason).toContain("fix the lane by hand");
      // The truth at the router: not the baseline (the engine did not claim a rollback).
      expect(cp.core.traffic(MODEL).weights).not.toEqual({ "lane-a": 50, "lane-b": 50 });
    },
  );
});
