/**
 * Parallel waves through the engine, on both stores: a wave with `max_unavailable`
 * runs its lanes concurrently; the control plane (what it holds, observed between reconciler
 * passes) never has more than `max_unavailable` lanes excluded, never every lane of a failure
 * domain, never fewer than `min_serving` lanes in service; a failing lane compensates every
 * lane back to the observed baseline.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  createRelease,
  drive,
  getRecord,
  type Harness,
  makeHarness,
  op,
  recipe,
  runStep,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const MODEL = "summarizer-v7";

/** Lane a alone at 10%, then lanes b..i (8) in one wave at 100%, limits as given. */
function fleet(extra: {
  max_unavailable?: number | string;
  min_serving?: string;
  rerun_window_minutes?: number;
}): RecipeInput {
  const base = recipe(9, { policy: { rerun_window_minutes: extra.rerun_window_minutes ?? 0 } });
  const lanes = (base.lanes ?? []).map((l, i) => ({
    ...l,
    failure_domain: i === 0 ? "rack-0" : i <= 2 ? "rack-1" : "rack-2",
  }));
  const rest = lanes.slice(1).map((l) => l.id);
  return {
    ...base,
    lanes,
    ...(extra.min_serving ? { min_serving: extra.min_serving } : {}),
    rollout: {
      waves: [
        { lanes: ["lane-a"], traffic: 10 },
        {
          lanes: rest,
          traffic: 100,
          ...(extra.max_unavailable ? { max_unavailable: extra.max_unavailable } : {}),
        },
      ],
    },
  };
}

describe.each(STORE_KINDS)("parallel waves on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  /** Drives the release, watching the control plane between passes. */
  async function watchDrive(
    hh: Harness,
    decide: (p: DispatchPayload) => "pass" | "fail" = () => "pass",
  ) {
    let maxOut = 0;
    let maxBusy = 0;
    let minServing = Number.POSITIVE_INFINITY;
    const domainOut: string[] = [];
    const seen = new Set<number>();
    await drive(hh, decide, 600, () => {
      const lanes = hh.cp.core.lanes(MODEL);
      const out = lanes.filter((l) => l.excluded).map((l) => l.id);
      maxOut = Math.max(maxOut, out.length);
      minServing = Math.min(minServing, lanes.length - out.length);
      if (["lane-b", "lane-c"].every((id) => out.includes(id))) domainOut.push(out.join(","));
      // Runner dispatches accepted since the last pass: answered together in the next pump.
      const n = hh.dispatcher.accepted.length;
      if (!seen.has(n)) seen.add(n);
    });
    const byPass = [...seen].sort((a, b) => a - b);
    for (let i = 1; i < byPass.length; i++)
      maxBusy = Math.max(maxBusy, (byPass[i] ?? 0) - (byPass[i - 1] ?? 0));
    return { maxOut, maxBusy, minServing, domainOut };
  }

  it.skipIf(skip)(
    "runs lanes together within max_unavailable, min_serving and domains",
    async () => {
      const r = fleet({ max_unavailable: "50%", min_serving: "60%" });
      h = await makeHarness({ kind, seed: r });
      const id = await createRelease(h, r);
      const rec0 = await getRecord(h, id);
      const m = (rec0 as unknown as { manifest: { waves: { max_unavailable?: number }[] } })
        .manifest;
      // 50% of 8 = 4, but 60% of 9 lanes = 6 stay in service: at most 3 out at once.
      expect(m.waves[1]?.max_unavailable).toBe(3);
      const seen = await watchDrive(h);
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("succeeded");
      expect(seen.maxOut).toBeGreaterThan(1);
      expect(seen.maxOut).toBeLessThanOrEqual(3);
      expect(seen.minServing).toBeGreaterThanOrEqual(6);
      expect(seen.maxBusy).toBeGreaterThan(1);
      expect(seen.domainOut).toEqual([]);
      // Every operation applied once; the control plane ends with every lane in service at 100%.
      expect(Object.values(h.cp.applicationCounts()).every((n) => n === 1)).toBe(true);
      const lanes = h.cp.core.lanes(MODEL);
      expect(lanes.every((l) => !l.excluded)).toBe(true);
      expect(lanes.reduce((a, l) => a + l.weight, 0)).toBe(100);
      // The history says which lanes the wave held out of service together.
      expect(JSON.stringify(rec.history)).toContain("every lane of wave 2 is back in service");
    },
  );

  it.skipIf(skip)("a failing lane compensates every lane to the observed baseline", async () => {
    const r = fleet({ max_unavailable: 4 });
    h = await makeHarness({ kind, seed: r });
    const before = h.cp.core.lanes(MODEL).map((l) => [l.id, l.weight, l.excluded]);
    const id = await createRelease(h, r);
    const rec0 = await getRecord(h, id);
    const failing = rec0.manifest.steps.find(
      (s) => s.name === "assert_smoke_passed" && (s as { lane?: string }).lane === "lane-f",
    );
    expect(failing).toBeDefined();
    const sr = `sr_${id.slice(1)}_${failing?.index}_f`;
    const seen = await watchDrive(h, (p) => (p.step_run_id === sr ? "fail" : "pass"));
    const rec = await getRecord(h, id);
    expect(rec.state).toBe("rolled_back");
    expect(seen.maxOut).toBeLessThanOrEqual(4);
    expect(h.cp.core.lanes(MODEL).map((l) => [l.id, l.weight, l.excluded])).toEqual(before);
    // One lane at a time, each lane's rows in reverse.
    const steps = rec.manifest.steps as { index: number; lane?: string | null }[];
    const bwd = rec.step_runs.filter((s) => s.direction === "bwd").map((s) => s.step_index);
    const lanes = bwd.flatMap((i) => steps[i]?.lane ?? []);
    const runs = lanes.filter((l, i) => l !== lanes[i - 1]);
    expect(runs).toEqual([...new Set(runs)]);
    for (const lane of runs) {
      const rows = bwd.filter((i) => steps[i]?.lane === lane);
      expect(rows).toEqual([...rows].sort((a, b) => b - a));
    }
  });

  it.skipIf(skip)(
    "a lane excluded before the start and a lane still out when compensation begins: the undo keeps max_unavailable",
    async () => {
      // Wave 2 is lane-b, lane-c, lane-d with max_unavailable 2; lane-d is excluded on the
      // control plane at start. lane-d and lane-b leave service first, lane-c when lane-d is
      // back; lane-b's smoke check fails after lane-c and lane-d are back on the new image.
      // Undone in table order, lane-d went back to excluded, then lane-c left service while
      // lane-b was still out: 3 lanes of the wave out.
      const r = recipe(4, {
        policy: { rerun_window_minutes: 0 },
        rollout: {
          waves: [
            { lanes: ["lane-a"], traffic: 10 },
            { lanes: ["lane-b", "lane-c", "lane-d"], traffic: 100, max_unavailable: 2 },
          ],
        },
      });
      const cp = new MemoryControlPlane({ model: MODEL, now: () => h?.clock.now() ?? 0 });
      const start = [
        { id: "lane-a", weight: 40, excluded: false },
        { id: "lane-b", weight: 30, excluded: false },
        { id: "lane-c", weight: 30, excluded: false },
        { id: "lane-d", weight: 0, excluded: true },
      ];
      cp.seed(start.map((l) => ({ ...l, capabilities: [], advertised: false })));
      h = await makeHarness({ kind, cp });
      const hh = h;
      const before = hh.cp.core.lanes(MODEL).map((l) => [l.id, l.weight, l.excluded]);
      const id = await createRelease(hh, r);
      const rec0 = await getRecord(hh, id);
      const stepOf = (lane: string, name: string) =>
        (rec0.manifest.steps as { index: number; lane?: string | null; name: string }[]).find(
          (s) => s.lane === lane && s.name === name,
        )?.index;
      const smokeB = `sr_${id.slice(1)}_${stepOf("lane-b", "assert_smoke_passed")}_f`;
      let held: DispatchPayload | null = null;
      await drive(hh, (p) => {
        if (p.step_run_id !== smokeB) return "pass";
        held = p;
        return "skip";
      });
      const waiting = await getRecord(hh, id);
      const fwdState = (i: number | undefined) =>
        waiting.step_runs.find((s) => s.step_index === i && s.direction === "fwd")?.state;
      expect(fwdState(stepOf("lane-c", "include_lane"))).toBe("succeeded");
      expect(fwdState(stepOf("lane-d", "include_lane"))).toBe("succeeded");
      if (!held) throw new Error("lane-b's smoke check was not dispatched");
      await runStep(hh, held, "fail");
      await drive(hh);
      const rec = await getRecord(hh, id);
      expect(rec.state).toBe("rolled_back");
      expect(hh.cp.core.lanes(MODEL).map((l) => [l.id, l.weight, l.excluded])).toEqual(before);
      // The control plane's changes replayed: each time a lane of wave 2 leaves service, at
      // most 2 of its lanes are out (lane-d counts while it is excluded).
      const out = new Set(start.filter((l) => l.excluded).map((l) => l.id));
      const wave = ["lane-b", "lane-c", "lane-d"];
      let maxOut = 0;
      for (const c of hh.cp.history()) {
        if (c.kind !== "set_marker" || c.lane === null) continue;
        const now = (c.after as { excluded: boolean }).excluded;
        const was = out.has(c.lane);
        if (now) out.add(c.lane);
        else out.delete(c.lane);
        if (now && !was && wave.includes(c.lane)) {
          const n = wave.filter((l) => out.has(l)).length;
          maxOut = Math.max(maxOut, n);
          expect(n, `after ${c.operation_key}`).toBeLessThanOrEqual(2);
        }
      }
      expect(maxOut).toBe(2);
      // lane-b first (out of service), then lane-c, then lane-d (excluded before the start).
      const steps = rec.manifest.steps as { index: number; lane?: string | null }[];
      const undone = rec.step_runs
        .filter((s) => s.direction === "bwd")
        .flatMap((s) => steps[s.step_index]?.lane ?? [])
        .filter((l) => l !== "lane-a");
      expect(undone.filter((l, i) => l !== undone[i - 1])).toEqual(["lane-b", "lane-c", "lane-d"]);
    },
  );

  it.skipIf(skip)(
    "a lane excluded before the start counts as out of service for its failure domain and the wave's limit",
    async () => {
      // rack-1 is lane-b and lane-c; lane-c is already excluded on the control plane.
      const r = fleet({ max_unavailable: 3 });
      const cp = new MemoryControlPlane({ model: MODEL, now: () => h?.clock.now() ?? 0 });
      const ids = (r.lanes ?? []).map((l) => l.id);
      cp.seed(
        ids.map((id, i) => ({
          id,
          weight: id === "lane-c" ? 0 : i === 0 ? 100 - 12 * 7 : 12,
          capabilities: [],
          advertised: false,
          excluded: id === "lane-c",
        })),
      );
      h = await makeHarness({ kind, cp });
      const id = await createRelease(h, r);
      let maxOutOfWave = 0;
      const domainOut: string[] = [];
      await drive(
        h,
        () => "pass",
        600,
        () => {
          const out = (h as Harness).cp.core
            .lanes(MODEL)
            .filter((l) => l.excluded)
            .map((l) => l.id);
          maxOutOfWave = Math.max(maxOutOfWave, out.filter((l) => l !== "lane-a").length);
          if (["lane-b", "lane-c"].every((l) => out.includes(l))) domainOut.push(out.join(","));
        },
      );
      const rec = await getRecord(h, id);
      expect(rec.state).toBe("succeeded");
      // Never every lane of rack-1 out, although lane-c was out from the start.
      expect(domainOut).toEqual([]);
      // The wave's limit counts lane-c while it is out: never more than 3 of its lanes out.
      expect(maxOutOfWave).toBeLessThanOrEqual(3);
      expect(maxOutOfWave).toBeGreaterThan(1);
      expect(h.cp.core.lanes(MODEL).every((l) => !l.excluded)).toBe(true);
    },
  );

  it.skipIf(skip)(
    "a second lane failing inside the re-run window keeps the first lane's deadline",
    async () => {
      const MINUTE = 60_000;
      const r = fleet({ max_unavailable: 3, rerun_window_minutes: 30 });
      h = await makeHarness({ kind, seed: r });
      const hh = h;
      const id = await createRelease(hh, r);
      const rec0 = await getRecord(hh, id);
      const srOf = (lane: string) => {
        const s = rec0.manifest.steps.find(
          (x) => x.name === "attach_queue_lane" && (x as { lane?: string }).lane === lane,
        );
        if (!s) throw new Error(`no attach_queue_lane step for ${lane}`);
        return `sr_${id.slice(1)}_${s.index}_f`;
      };
      const [b, c] = [srOf("lane-d"), srOf("lane-e")];
      let held: DispatchPayload | null = null;
      await drive(hh, (p) => {
        if (p.step_run_id === c) {
          held = p;
          return "skip";
        }
        return p.step_run_id === b ? "fail" : "pass";
      });
      const tB = hh.clock.now();
      const paused = await getRecord(hh, id);
      expect(paused.state).toBe("paused");
      if (!held) throw new Error("lane-e's redeploy was not dispatched while lane-d failed");
      // lane-e's runner fails 10 minutes later, inside lane-d's window.
      hh.clock.advance(10 * MINUTE);
      const tC = hh.clock.now();
      const { callback } = await runStep(hh, held, "fail");
      expect(callback?.status).toBe(200);
      const answer = (await callback?.json()) as { rerun_deadline: number; advice: string };
      // The runner of lane-e is told its own deadline.
      expect(answer.rerun_deadline).toBe(tC + 30 * MINUTE);
      const api = (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as {
        state: string;
        rerun_deadline: number;
        step_runs: { id: string; rerun_deadline?: number | null }[];
      };
      expect(api.state).toBe("paused");
      // Each failed step run keeps its own deadline; the release's is the first to close.
      expect(api.step_runs.find((s) => s.id === b)?.rerun_deadline).toBe(tB + 30 * MINUTE);
      expect(api.step_runs.find((s) => s.id === c)?.rerun_deadline).toBe(tC + 30 * MINUTE);
      expect(api.rerun_deadline).toBe(tB + 30 * MINUTE);
      // lane-d's window closes first: the release compensates then, naming lane-d's step run.
      hh.clock.t = tB + 30 * MINUTE;
      await hh.engine.tick();
      const rec = await getRecord(hh, id);
      expect(rec.state).toBe("compensating");
      expect(String((rec as unknown as { reason: string }).reason)).toContain(b);
      await drive(hh);
      expect((await getRecord(hh, id)).state).toBe("rolled_back");
    },
  );

  it.skipIf(skip)(
    "a re-run of the first failed lane leaves the release paused until the second lane's deadline",
    async () => {
      const MINUTE = 60_000;
      const r = fleet({ max_unavailable: 3, rerun_window_minutes: 30 });
      h = await makeHarness({ kind, seed: r });
      const hh = h;
      const id = await createRelease(hh, r);
      const rec0 = await getRecord(hh, id);
      const srOf = (lane: string) => {
        const s = rec0.manifest.steps.find(
          (x) => x.name === "attach_queue_lane" && (x as { lane?: string }).lane === lane,
        );
        if (!s) throw new Error(`no attach_queue_lane step for ${lane}`);
        return `sr_${id.slice(1)}_${s.index}_f`;
      };
      const [b, c] = [srOf("lane-d"), srOf("lane-e")];
      let heldB: DispatchPayload | null = null;
      let heldC: DispatchPayload | null = null;
      await drive(hh, (p) => {
        if (p.step_run_id === b) heldB = p;
        if (p.step_run_id === c) heldC = p;
        return p.step_run_id === b || p.step_run_id === c ? "skip" : "pass";
      });
      if (!heldB || !heldC) throw new Error("lanes d and e were not dispatched together");
      const runB = { run_id: "9101", run_attempt: 1 };
      expect((await runStep(hh, heldB, "fail", runB)).callback?.status).toBe(200);
      hh.clock.advance(10 * MINUTE);
      const tC = hh.clock.now();
      expect((await runStep(hh, heldC, "fail")).callback?.status).toBe(200);
      // lane-d's job is re-run (attempt 2) and passes: lane-e still waits, with its deadline.
      hh.clock.advance(5 * MINUTE);
      expect(
        (await runStep(hh, heldB, "pass", { run_id: "9101", run_attempt: 2 })).callback?.status,
      ).toBe(200);
      const api = (await (await op(hh, "GET", `/v1/releases/${id}`)).json()) as {
        state: string;
        rerun_deadline: number;
      };
      expect(api.state).toBe("paused");
      expect(api.rerun_deadline).toBe(tC + 30 * MINUTE);
      // lane-d's old deadline passes: nothing happens.
      hh.clock.t = tC + 25 * MINUTE;
      await hh.engine.tick();
      expect((await getRecord(hh, id)).state).toBe("paused");
      hh.clock.t = tC + 30 * MINUTE;
      await hh.engine.tick();
      const rec = await getRecord(hh, id);
      expect(rec.state).toBe("compensating");
      expect(String((rec as unknown as { reason: string }).reason)).toContain(c);
    },
  );
});
