/**
 * The headline says what holds a release, not its next step: the gate it is held at and what
 * that gate waits for, who paused it and where, the verb it waits for (views/where.ts), as the
 * release page, the releases list and `baton status` show it. And what a gate's evaluation
 * waits for is read from its figures (domain/gate-progress.ts), not from its reason text.
 */
import { describe, expect, it } from "vitest";
import type { Analysis } from "../../engine/src/domain/gate/analysis.ts";
import type { GateEvidence, MetricEvidence } from "../../engine/src/domain/gate/evidence.ts";
import { gateProgress } from "../../engine/src/domain/gate-progress.ts";
import type { GateWait, Release } from "../../engine/src/domain/types.ts";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import { whereInList } from "../../engine/src/views/list-row.ts";
import { summarize } from "../../engine/src/views/summary.ts";
import { holdHeadline } from "../../engine/src/views/where.ts";
import {
  compensatedRecord,
  fakeApi,
  pausedRecord,
  runningRecord,
} from "../support/dashboard-fixtures.ts";

/** r4 of the fixtures (two one-lane waves: 50% and 100%), running on step 2 of wave 1. */
function running(): Release {
  return runningRecord().release;
}

function gate(over: Partial<GateWait> = {}): GateWait {
  return {
    wave: 0,
    phase: "gate",
    since: 0,
    seq: 3,
    decision: "wait",
    reason: "an evaluation's own words, not read here",
    at: 20_000,
    progress: null,
    ...over,
  };
}

const headline = (r: Release) => summarize(r, [], []).headline;

describe("the headline says what holds the release", () => {
  it("a gate under way: the wave's gate and what it waits for, not the next step", () => {
    const r = running();
    r.cursor = 7; // the next wave's first step, not begun while the gate decides
    r.gate = gate({
      progress: {
        waiting_for: "bake",
        elapsed_ms: 20_000,
        bake_ms: 30_000,
        samples: null,
        metric: null,
      },
    });
    expect(headline(r)).toBe("Held at wave 1 gate (50%): baking 20 s of 30 s");
    r.gate.progress = {
      waiting_for: "samples",
      elapsed_ms: 9_000,
      bake_ms: 30_000,
      samples: { have: 1240, need: 5000 },
      metric: "error-rate",
    };
    expect(headline(r)).toBe("Held at wave 1 gate (50%): waiting for samples (1,240 of 5,000)");
    r.gate = gate({ decision: "pending", seq: 0, at: null });
    expect(headline(r)).toBe("Held at wave 1 gate (50%): waiting for its first evaluation");
    r.gate = gate({ phase: "watch", wave: 1 });
    r.gate.progress = {
      waiting_for: "bake",
      elapsed_ms: 5_000,
      bake_ms: 30_000,
      samples: null,
      metric: null,
    };
    expect(headline(r)).toBe("Held at wave 2 guardrail watch (100%): baking 5 s of 30 s");
  });

  it("an operator's pause: where (the gate, the step in flight, or before the next step) and who", () => {
    const r = running();
    r.state = "paused";
    r.hold = { kind: "pause", actor: "maria", reason: "checking GPU memory", at: 1 };
    // Step 2's run is still in flight at the cursor: it settles there.
    expect(headline(r)).toBe("Paused at step 2 (wave 1) by maria: checking GPU memory");
    r.step_runs[1]!.state = "succeeded";
    r.cursor = 2;
    expect(headline(r)).toBe("Paused before step 3 (wave 1) by maria: checking GPU memory");
    r.cursor = 7;
    r.gate = gate({ wave: 1 });
    expect(headline(r)).toBe("Paused at wave 2 gate (100%) by maria: checking GPU memory");
    r.gate.decision = "inconclusive";
    expect(headline(r)).toBe(
      "Paused at wave 2 gate (100%) by maria: checking GPU memory; its gate is inconclusive (promote or abort)",
    );
  });

  it("a hold waiting for a verb names the verb and the wave", () => {
    const r = running();
    r.state = "paused";
    r.cursor = 7;
    r.hold = { kind: "promotion", actor: "recipe", reason: "…", at: 1, wave: 1 };
    expect(headline(r)).toBe("Waiting for promote after wave 1 (50%): its promotion is manual");
    r.cursor = 3;
    r.hold = { kind: "dark", actor: "bob", reason: "…", at: 1 };
    expect(headline(r)).toBe(
      "Waiting for release before wave 1 (50%): deployed dark by bob, the candidate has 0% exposure",
    );
  });

  it("an inconclusive gate with no pause: promote or abort", () => {
    const r = running();
    r.state = "paused";
    r.gate = gate({
      decision: "inconclusive",
      progress: {
        waiting_for: "evidence",
        elapsed_ms: 120_000,
        bake_ms: 30_000,
        samples: null,
        metric: "error-rate",
      },
    });
    expect(headline(r)).toBe(
      "Paused at wave 1 gate (50%): inconclusive after 2 m 00 s: promote to accept the risk, or abort",
    );
  });

  it("a release paused on a failure keeps the failed step and its error; a step run says Running", () => {
    const paused = pausedRecord().release;
    expect(headline(paused)).toBe(
      "Paused at step 2 (wave 1): dispatch lost: no preflight before the start deadline",
    );
    expect(holdHeadline(paused)).toBeNull();
    expect(headline(running())).toMatch(/^Running step 2 \(wave 1\) of 14: /);
  });

  it("a release a failed gate rolled back says the gate failed, not an operator abort", () => {
    const r = running();
    r.state = "rolled_back";
    r.reason = "gate of wave 1 (50%) failed: error-rate is worse than allowed";
    const failedGate = {
      release_id: r.id,
      at: r.updated_at,
      kind: "gate",
      step_run_id: "sr_4_6_f",
      outcome: "accepted" as const,
      message: "[engine] gate of wave 1 (50%) failed (evaluation 4): error-rate is worse",
      data: { gate: { wave: 0, phase: "gate", seq: 4, decision: "fail", elapsed_ms: 20_000 } },
    };
    const f = summarize(r, [failedGate], []);
    expect(f.headline).toBe(
      "Rolled back after the gate of wave 1 (50%) failed: error-rate is worse than allowed",
    );
    expect(f.cause).toBe("failure");
    r.state = "compensating";
    expect(summarize(r, [failedGate], []).headline).toMatch(/^Undoing after the gate of wave 1/);
  });

  it("the releases list shows the hold of a live release it read, its progress otherwise", () => {
    const r = running();
    r.gate = gate({
      progress: {
        waiting_for: "bake",
        elapsed_ms: 1_000,
        bake_ms: 30_000,
        samples: null,
        metric: null,
      },
    });
    const row = { state: r.state, cursor: 7, step_count: 14, high_water_mark: 6 };
    expect(whereInList(row, r)).toBe("Held at wave 1 gate (50%): baking 1 s of 30 s");
    expect(whereInList(row, null)).toBe("step 8 of 14");
  });
});

describe("the releases page", () => {
  it("says what holds a live release and how far an ended one got", async () => {
    const held = runningRecord();
    held.release.cursor = 7;
    held.release.gate = gate({
      progress: {
        waiting_for: "samples",
        elapsed_ms: 9_000,
        bake_ms: 30_000,
        samples: { have: 1240, need: 5000 },
        metric: "error-rate",
      },
    });
    const app = dashboardApp({
      api: fakeApi([held, compensatedRecord()]),
      tokens: {},
      publicUrl: "http://127.0.0.1",
    });
    const html = await (await app.request("/releases")).text();
    expect(html).toContain("Held at wave 1 gate (50%): waiting for samples (1,240 of 5,000)");
    // The rolled-back release: what it undid, not where its backward cursor ended.
    expect(html).toMatch(/undone: steps? 1(–\d+)? of 7/);
    expect(html).not.toMatch(/\b0\/7\b|undoing step 0/);
  });
});

const analysis = {
  min_samples: 5000,
  bake_ms: 30_000,
  metrics: [{ name: "error-rate", required: true }],
} as Analysis;

function metric(over: Partial<MetricEvidence>): MetricEvidence {
  return {
    name: "error-rate",
    required: true,
    verdict: "undecided",
    missing: null,
    candidate: { x: 10, n: 6000 },
    control: { x: 90, n: 60_000 },
    estimate: 0,
    lower: -0.1,
    upper: 0.1,
    margin: 0.02,
    slo: null,
    ...over,
  };
}

function evidence(over: Partial<GateEvidence>): GateEvidence {
  return {
    release_id: "r1",
    generation: 1,
    manifest_digest: "d",
    wave: 0,
    seq: 1,
    at: 0,
    phase: "gate",
    decision: "wait",
    reason: "",
    alpha: 0.05,
    elapsed_ms: 12_000,
    arms: { candidate: 6000, control: 60_000 },
    srm: null,
    metrics: [metric({})],
    ...over,
  };
}

describe("gateProgress: what an evaluation waits for, from its figures", () => {
  it("asks in the gate's order: counts, metrics, samples, evidence, bake", () => {
    expect(gateProgress(evidence({ arms: null }), analysis)?.waiting_for).toBe("assignments");
    expect(
      gateProgress(
        evidence({
          metrics: [metric({ missing: "query failed", candidate: null, control: null })],
        }),
        analysis,
      ),
    ).toMatchObject({ waiting_for: "metrics", metric: "error-rate" });
    expect(
      gateProgress(
        evidence({
          metrics: [
            metric({ candidate: { x: 3, n: 1240 }, control: { x: 40, n: 11_000 } }),
            metric({ name: "slow", required: false, candidate: { x: 1, n: 5 } }),
          ],
        }),
        analysis,
      ),
    ).toMatchObject({ waiting_for: "samples", samples: { have: 1240, need: 5000 } });
    expect(gateProgress(evidence({}), analysis)?.waiting_for).toBe("evidence");
    expect(
      gateProgress(evidence({ metrics: [metric({ verdict: "non_inferior" })] }), analysis),
    ).toMatchObject({ waiting_for: "bake", elapsed_ms: 12_000, bake_ms: 30_000 });
    expect(gateProgress(evidence({ decision: "pass" }), analysis)).toBeNull();
    expect(gateProgress(evidence({ phase: "watch" }), analysis)?.waiting_for).toBe("bake");
  });
});
