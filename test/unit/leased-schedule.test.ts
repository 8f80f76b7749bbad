/**
 * The jobs on the drift schedule that one engine at a time runs (engine/src/service/
 * leased-schedule.ts: the mutable-dependency probes, the drill schedule): once per interval of
 * the engine clock, only by the lease's holder, a failed run one warn line and tried again next
 * interval, the lease given back at stop so another engine takes over at once.
 */
import { describe, expect, it } from "vitest";
import type { Store } from "../../engine/src/ports/store.ts";
import { LeasedSchedule } from "../../engine/src/service/leased-schedule.ts";

/** Store leases as the contract suite specifies them: held until `until`, by one owner. */
function leaseStore(): Store {
  const held = new Map<string, { owner: string; until: number }>();
  return {
    takeLease: async (l: { name: string; owner: string; until: number; now: number }) => {
      const h = held.get(l.name);
      if (h && h.owner !== l.owner && h.until > l.now) return false;
      held.set(l.name, { owner: l.owner, until: l.until });
      return true;
    },
  } as unknown as Store;
}

const MINUTE = 60_000;

describe("LeasedSchedule", () => {
  it("runs once per interval, only on the engine holding the lease; stop hands the lease to the other", async () => {
    const store = leaseStore();
    const clock = { now: () => t };
    let t = 1_000_000;
    const runs: string[] = [];
    const make = (name: string) =>
      new LeasedSchedule({
        store,
        clock,
        policy: { intervalMs: MINUTE },
        log: { warn: () => {} },
        lease: "job",
        run: async () => {
          runs.push(name);
        },
        failed: (m) => m,
      });
    const a = make("a");
    const b = make("b");
    await a.maybeRun();
    await b.maybeRun();
    await a.maybeRun(); // same interval: nothing
    expect(runs).toEqual(["a"]);
    t += MINUTE;
    await b.maybeRun();
    await a.maybeRun();
    expect(runs).toEqual(["a", "a"]);
    await a.stop();
    t += MINUTE;
    await a.maybeRun(); // stopped: never again
    await b.maybeRun();
    expect(runs).toEqual(["a", "a", "b"]);
  });

  it("a run that throws is one warn line; the next interval runs again", async () => {
    let t = 0;
    const warnings: string[] = [];
    let fail = true;
    let ran = 0;
    const s = new LeasedSchedule({
      store: leaseStore(),
      clock: { now: () => t },
      policy: { intervalMs: MINUTE },
      log: { warn: (m) => warnings.push(m) },
      lease: "job",
      run: async () => {
        ran++;
        if (fail) throw new Error("store unreachable");
      },
      failed: (m) => `[job] not run: ${m}; next in ${MINUTE} ms`,
    });
    await s.maybeRun();
    expect(warnings).toEqual(["[job] not run: store unreachable; next in 60000 ms"]);
    fail = false;
    await s.maybeRun(); // same interval
    expect(ran).toBe(1);
    t += MINUTE;
    await s.maybeRun();
    expect(ran).toBe(2);
    expect(warnings).toHaveLength(1);
  });
});
