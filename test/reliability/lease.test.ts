/**
 * A paused engine must not perform an effect whose outbox claim lapsed while it was paused
 * (issue 6, "Several engines, one database": a SIGSTOPped instance resumed after its lease).
 * The pause is simulated between the claim and the perform: the store's `claimDue` returns the
 * rows, then the clock jumps past the lease. Without the lease check the reconciler went on
 * and sent the effect, which another engine could already have claimed and sent.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import {
  createRelease,
  FakeClock,
  type Harness,
  makeHarness,
  openTestStore,
  recipe,
  seedControlPlane,
} from "../integration/service-harness.ts";

const open: Harness[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.close().catch(() => {});
    rmSync(h.dir, { recursive: true, force: true });
  }
});

describe("outbox lease", () => {
  it("a claim that lapsed before the effect is sent is given back, not performed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-lease-"));
    const clock = new FakeClock();
    const cp = new MemoryControlPlane({ model: "summarizer-v7", now: () => clock.now() });
    seedControlPlane(cp, recipe(2));
    const store = await openTestStore("sqlite", dir);
    if (!store) throw new Error("no store");
    let pauseAfterClaim = false;
    const claimDue = store.claimDue.bind(store);
    store.claimDue = async (q) => {
      const rows = await claimDue(q);
      // The process is paused right after claiming, for longer than the lease (60 s here).
      if (pauseAfterClaim && rows.length > 0) clock.advance(61_000);
      return rows;
    };
    const h = await makeHarness({ dir, store, clock, cp });
    open.push(h);
    await createRelease(h, recipe(2));
    const writes = () => cp.calls.filter((c) => c.method === "apply").length;

    pauseAfterClaim = true;
    await h.engine.reconciler.runOnce();
    expect(writes()).toBe(0);
    const pending = await store.pendingOutbox();
    expect(pending.length).toBeGreaterThan(0);

    // The next claim (this engine's or another's) performs it, once.
    pauseAfterClaim = false;
    await h.engine.reconciler.runOnce();
    expect(writes()).toBe(1);
    for (const [key, n] of Object.entries(cp.applicationCounts())) expect(n, key).toBe(1);
  });
});
