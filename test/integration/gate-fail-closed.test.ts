/**
 * The gate fails closed (docs/gate.md), on both stores, with the embedded metrics source over
 * the reference router's traffic generator and a fake clock: an analysis of guardrails alone is
 * refused at start, naming the field and the fix; a guardrail without data never passes, in the
 * gate nor in a later wave's watch (the release ends paused for an operator, the next wave never
 * begun); a dry-run metric without data never blocks, and the pass reason names it and why; a
 * failing deterministic check blocks the wave's promotion whatever the statistics say, and a
 * passing one lets the release go on. Asserted on the control plane's weights and the lanes
 * the runner was sent to, not only on the engine's records.
 */
import { expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  compensationReason,
  gatedRecipe,
  MODEL,
  type Rig,
  run,
  start,
} from "../support/gate-rig.ts";
import { drive, op } from "./service-harness.ts";
import { describeEachRig } from "./store-suites.ts";

const WAVE1 = { "lane-a": 20, "lane-b": 40, "lane-c": 40 };
const BASELINE = { "lane-a": 34, "lane-b": 33, "lane-c": 33 };
/** A guardrail whose query the embedded source cannot read: it never has data. */
const BLIND_GUARDRAIL = {
  name: "gpu-errors",
  kind: "ratio",
  better: "lower",
  margin: { absolute: 0.01 },
  required: false,
  query: {
    numerator: 'sum(increase(gpu_errors_total{model="$model",$arm_selector}[$window]))',
    denominator: 'sum(increase(gpu_requests_total{model="$model",$arm_selector}[$window]))',
  },
};
const ERROR_RATE = {
  name: "error-rate",
  kind: "ratio",
  better: "lower",
  margin: { absolute: 0.03 },
};

/** Lanes the runner was asked to touch. */
const lanesTouched = (g: Rig) =>
  new Set(
    g.h.dispatcher.accepted
      .map((p) => (p.args as { lane?: { id?: string } }).lane?.id)
      .filter((l): l is string => typeof l === "string"),
  );

describeEachRig("the gate fails closed on %s", ({ skip, open }) => {
  it.skipIf(skip)(
    "an analysis of guardrails alone is refused at start, naming the field and the fix",
    async () => {
      const g = await open();
      const r = gatedRecipe({ metrics: [{ ...ERROR_RATE, required: false }] });
      const res = await op(g.h, "POST", "/v1/releases", r);
      expect(res.status).toBe(422);
      const body = (await res.json()) as {
        error: { message: string; problems: { path: string; message: string; fix: string }[] };
      };
      const p = body.error.problems.find((x) => x.path === "analysis.metrics");
      expect(p?.message).toMatch(/^the analysis has no required metric/);
      expect(p?.fix).toMatch(/Mark at least one metric `required: true`/);
      expect(await g.h.store.listReleases({ limit: 10 })).toEqual([]);
      expect(g.h.cp.weights(MODEL)).toEqual(BASELINE);
    },
  );

  it.skipIf(skip)(
    "a guardrail without data never passes the gate: paused at max wait, the next wave not begun",
    async () => {
      const g = await open();
      const id = await start(g.h, gatedRecipe({ metrics: [ERROR_RATE, BLIND_GUARDRAIL] }));
      await run(g);
      const release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("paused");
      expect(release?.gate?.decision).toBe("inconclusive");
      // A read that fails every time: inconclusive at consecutive_error_limit (4), long
      // before max_wait_ms (120 s).
      expect(release?.reason).toMatch(
        /inconclusive: 4 evaluations in a row could not read their data \(consecutive_error_limit 4\): missing evidence: gpu-errors \(a PromQL query needs the Prometheus metrics source\)/,
      );
      const evidence = await g.h.store.listEvidence(id);
      // The first look may come before any unit was served (no units yet: not a read error).
      expect(evidence.slice(-4).map((e) => [e.decision, e.read_error])).toEqual([
        ["wait", true],
        ["wait", true],
        ["wait", true],
        ["inconclusive", true],
      ]);
      expect(evidence.slice(0, -4).every((e) => e.decision === "wait" && !e.read_error)).toBe(true);
      expect(evidence.at(-1)?.elapsed_ms).toBeLessThan(120_000);
      // The primary alone would have passed: its data was there all along.
      const last = evidence.at(-1);
      expect(last?.metrics.find((m) => m.name === "error-rate")?.verdict).toBe("non_inferior");
      expect(g.h.cp.weights(MODEL)).toEqual(WAVE1);
      expect([...lanesTouched(g)]).toEqual(["lane-a"]);
    },
  );

  it.skipIf(skip)("a guardrail without data never passes a later wave's watch", async () => {
    const g = await open();
    const r = gatedRecipe();
    const waves = r.rollout.waves as unknown as Record<string, unknown>[];
    // Wave 2 is a watch of the recipe's guardrail (slow-requests) for its bake.
    waves[1] = { ...waves[1], analysis: false };
    const id = await start(g.h, r);
    const at = async () => (await g.h.store.getRelease(id))?.gate?.phase;
    await run(g, { until: async () => (await at()) === "watch" });
    expect(await at()).toBe("watch");
    // From the watch on the router serves nothing: the guardrail has no data.
    await run(g, { send: false });
    const release = await g.h.store.getRelease(id);
    const evidence = await g.h.store.listEvidence(id);
    expect(evidence.find((e) => e.wave === 0 && e.decision === "pass")).toBeDefined();
    const watch = evidence.filter((e) => e.wave === 1);
    expect(watch.length).toBeGreaterThan(1);
    expect(watch.every((e) => e.phase === "watch" && e.decision !== "pass")).toBe(true);
    expect(watch.at(-1)?.elapsed_ms).toBeGreaterThan(20_000); // past its bake: no pass anyway
    expect(release?.state).toBe("paused");
    expect(release?.reason).toMatch(
      /gate of wave 2 \(50%\) is inconclusive: inconclusive after 1\d\d s \(max_wait_ms 120,000\): (insufficient data|missing evidence: slow-requests)/,
    );
    // The last wave never began: lane-c untouched, wave 2's weights in place.
    expect(lanesTouched(g).has("lane-c")).toBe(false);
    expect(g.h.cp.weights(MODEL)).toEqual({ "lane-a": 25, "lane-b": 25, "lane-c": 50 });
  });

  it.skipIf(skip)(
    "a dry-run metric without data never blocks; the pass reason names it and why",
    async () => {
      const g = await open();
      const id = await start(
        g.h,
        gatedRecipe({ metrics: [ERROR_RATE, { ...BLIND_GUARDRAIL, dry_run: true }] }),
      );
      await run(g);
      expect((await g.h.store.getRelease(id))?.state).toBe("succeeded");
      const pass = (await g.h.store.listEvidence(id)).find((e) => e.decision === "pass");
      expect(pass?.reason).toMatch(
        /; no data for dry-run gpu-errors \(a PromQL query needs the Prometheus metrics source\)$/,
      );
      expect(pass?.metrics.find((m) => m.name === "gpu-errors")).toMatchObject({
        dry_run: true,
        verdict: "missing",
      });
    },
  );

  it.skipIf(skip)(
    "a failing deterministic check blocks promotion whatever the statistics say",
    async () => {
      const g = await open();
      const r = {
        ...gatedRecipe({
          metrics: [ERROR_RATE],
          checks: [{ name: "task-set", tool: "run-smoke", args: { suite: "golden-20" } }],
        }),
        policy: { steps: { assert_check_passed: { rerun_window_minutes: 0 } } },
      } as RecipeInput;
      const id = await start(g.h, r);
      const checks: DispatchPayload[] = [];
      await drive(
        g.h,
        (p) => {
          const lane = (p.args as { lane?: { id?: string } }).lane?.id;
          if (lane && p.tool === "attach-queue-lane") g.traffic.setLaneImage(lane, r.image);
          if (lane && p.tool === "restore-queue-lane")
            g.traffic.setLaneImage(lane, r.previous_image);
          const check = (p.args as { check?: { name?: string } }).check;
          if (check) {
            checks.push(p);
            return "fail";
          }
          return "pass";
        },
        600,
        () => g.traffic.send(1000),
      );
      const release = await g.h.store.getRelease(id);
      expect(release?.state).toBe("rolled_back");
      // The check ran on the candidate lane through the runner protocol, with its arguments.
      expect(checks).toHaveLength(1);
      expect(checks[0]).toMatchObject({
        tool: "run-smoke",
        args: { lane: { id: "lane-a" }, check: { name: "task-set", args: { suite: "golden-20" } } },
      });
      expect(await compensationReason(g.h, id)).toMatch(/assert_check_passed/);
      // No gate evaluation ever ran, so none could pass; the next wave never began.
      expect(await g.h.store.listEvidence(id)).toEqual([]);
      expect(lanesTouched(g).has("lane-b")).toBe(false);
      expect(g.h.cp.weights(MODEL)).toEqual(BASELINE);
    },
  );

  it.skipIf(skip)("passing checks run before each gate and the release succeeds", async () => {
    const g = await open();
    const id = await start(
      g.h,
      gatedRecipe({ metrics: [ERROR_RATE], checks: [{ name: "schema-probe", tool: "run-smoke" }] }),
    );
    await run(g);
    const release = await g.h.store.getRelease(id);
    expect(release?.state).toBe("succeeded");
    const checked = g.h.dispatcher.accepted.filter(
      (p) => (p.args as { check?: unknown }).check !== undefined,
    );
    expect(checked.map((p) => (p.args as { lane: { id: string } }).lane.id)).toEqual([
      "lane-a",
      "lane-b",
    ]);
  });
});
