/**
 * A paused engine must not perform an effect whose outbox claim lapsed while it was paused
 * (several engines, one database: a SIGSTOPped instance resumed after its lease).
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
  STORE_KINDS,
  seedControlPlane,
  skipStore,
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

describe.each(STORE_KINDS)("outbox lease renewal on %s", (kind) => {
  const skip = skipStore(kind);
  it.skipIf(skip)(
    "an effect slower than the lease keeps its claim while performed: not taken over, applied once, its outcome kept",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "baton-lease-"));
      const clock = new FakeClock();
      const cp = new MemoryControlPlane({ model: "summarizer-v7", now: () => clock.now() });
      seedControlPlane(cp, recipe(2));
      const store = await openTestStore(kind, dir);
      if (!store) throw new Error("no store");
      // A lease of 300 ms (engine clock), renewed every 100 ms of real time.
      const h = await makeHarness({ dir, store, clock, cp, leaseMs: 300 });
      open.push(h);
      await createRelease(h, recipe(2));
      let slowRow: number | null = null;
      let takenByOther: number[] | null = null;
      const apply = cp.apply.bind(cp);
      cp.apply = async (op, ctx) => {
        if (slowRow === null) {
          const held = (await store.pendingOutbox()).find(
            (r) => r.claim_token !== null && r.effect.type === "control_plane",
          );
          slowRow = held?.id ?? -1;
          // The write takes longer than the lease: the engine clock moves past it.
          clock.advance(500);
          // Wait (bounded) until the holder has renewed its claim past the new now.
          for (let i = 0; i < 200; i++) {
            const row = (await store.pendingOutbox()).find((r) => r.id === slowRow);
            if ((row?.claimed_until ?? 0) > clock.now()) break;
            await new Promise((r) => setTimeout(r, 50));
          }
          // Another engine claims what is due now: the row being performed is not among them.
          const other = await store.claimDue({
            now: clock.now(),
            limit: 50,
            leaseMs: 1,
            owner: "other",
          });
          takenByOther = other.map((r) => r.id);
          for (const r of other) await store.releaseClaim(r.id, r.claim_token!, clock.now());
        }
        return apply(op, ctx);
      };
      await h.engine.reconciler.runOnce();
      expect(slowRow).toBeGreaterThan(0);
      expect(takenByOther).not.toContain(slowRow);
      // Its outcome was committed by its holder (the row is done), and applied once.
      expect((await store.pendingOutbox()).map((r) => r.id)).not.toContain(slowRow);
      for (const [key, n] of Object.entries(cp.applicationCounts())) expect(n, key).toBe(1);
    },
    60_000,
  );
});
