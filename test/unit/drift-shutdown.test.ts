/**
 * Drift observation ends before the store closes: stop() waits for the observation in flight,
 * a store closed under it during shutdown is not logged as a failure, and nothing starts after.
 */
import { describe, expect, it } from "vitest";
import type { ControlPlane } from "../../engine/src/ports/control-plane.ts";
import type { Store } from "../../engine/src/ports/store.ts";
import { DriftObserver } from "../../engine/src/service/drift.ts";

describe("drift observation at shutdown", () => {
  it("stop() waits for the observation in flight and a closed store is not a logged failure", async () => {
    let failList: (e: Error) => void = () => {};
    let leases = 0;
    const readFleet = () =>
      new Promise<never>((_, reject) => {
        failList = reject;
      });
    const store = {
      takeLease: async () => {
        leases++;
        return true;
      },
    } as unknown as Store;
    const cp = { lanes: async () => ({ ok: true, lanes: [] }) } as unknown as ControlPlane;
    const warnings: string[] = [];
    const log = {
      info: () => {},
      warn: (m: string) => warnings.push(m),
      error: (m: string) => warnings.push(m),
    };
    const drift = new DriftObserver({
      store,
      controlPlane: cp,
      clock: { now: () => 1_000_000 },
      policy: { intervalMs: 60_000 },
      log,
      readFleet,
    });
    const observing = drift.maybeRun();
    await new Promise((r) => setTimeout(r, 10));
    expect(leases).toBe(1);
    let stopped = false;
    const stopping = drift.stop().then(() => {
      stopped = true;
    });
    await new Promise((r) => setTimeout(r, 10));
    expect(stopped).toBe(false); // still waiting for the observation in flight
    failList(new Error("[store] the store is closed; open a new one with openStore()"));
    await observing;
    await stopping;
    expect(warnings.filter((w) => w.startsWith("[drift]"))).toEqual([]);
    const after = leases; // stop() gave the lease back
    await drift.maybeRun();
    expect(leases).toBe(after); // nothing starts after stop()
  });
});
