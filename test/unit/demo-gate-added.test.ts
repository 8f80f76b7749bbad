/**
 * What the demo says about the gate it adds to a recipe without `analysis:` (and how to change
 * it), and its `--port` option: listed by `--help`, checked before anything starts.
 */
import { describe, expect, it, vi } from "vitest";
import { runCli } from "../../engine/src/cli/program.ts";
import { addedGateLines, DEMO_ANALYSIS, runDemo } from "../../engine/src/demo/main.ts";
import { Analysis } from "../../engine/src/domain/gate/analysis.ts";
import { decideGate } from "../../engine/src/domain/gate/decide.ts";

describe("the demo's added gate", () => {
  it("names every metric with its margin, the samples, the bake and where the recipe is", () => {
    const lines = addedGateLines("/d/recipe.yaml");
    expect(lines[0]).toMatch(/^\[demo\] gate added {5}the recipe has no analysis: section/);
    for (const m of DEMO_ANALYSIS.metrics) expect(lines[0]).toContain(m.name);
    expect(lines[0]).toContain(
      "error-rate at most 50% (at least 0.5 points) worse than the baseline",
    );
    expect(lines[0]).toContain(
      "slow-requests (over 1000 ms) at most 5.0 points worse than the baseline, a guardrail",
    );
    expect(lines[0]).toContain(
      "latency-p99 (the p99 latency) at most 100 ms worse than the baseline, a guardrail",
    );
    expect(lines[0]).toContain("at least 1,000 requests per arm, 2 s of bake");
    expect(lines[1]).toContain("analysis: section of its own");
    expect(lines[1]).toContain("/d/recipe.yaml");
  });
});

describe("the demo's added gate decides", () => {
  const errorRate = DEMO_ANALYSIS.metrics.find((m) => m.name === "error-rate");
  const analysis = Analysis.parse({ ...DEMO_ANALYSIS, metrics: [errorRate] });
  /** The wave-1 split (10%) after `units` units at the given error rates. */
  const decide = (units: number, candidate: number, control = 0.01) => {
    const nc = Math.round(units * 0.1);
    const nb = units - nc;
    return decideGate(
      { analysis, plannedCandidateShare: 0.1, elapsedMs: 5_000, phase: "gate" },
      {
        assignments: { candidate: nc, control: nb },
        metrics: {
          "error-rate": {
            candidate: {
              kind: "ratio",
              counts: { numerator: Math.round(nc * candidate), denominator: nc },
            },
            control: {
              kind: "ratio",
              counts: { numerator: Math.round(nb * control), denominator: nb },
            },
          },
        },
      },
    );
  };
  it("fails a candidate at twice the baseline's error rate (1% → 2%), passes an equal one", () => {
    const worse = decide(200_000, 0.02);
    expect(worse.decision, worse.reason).toBe("fail");
    expect(worse.reason).toMatch(/candidate 2\.00% vs control 1\.00%, allowed \+0\.50 points/);
    expect(decide(60_000, 0.01).decision).toBe("pass");
  });
});

describe("demo --port", () => {
  it("--help lists --port (baton demo --help and the demo itself)", async () => {
    let out = "";
    const log = vi.spyOn(console, "log").mockImplementation((s: string) => {
      out += `${s}\n`;
    });
    try {
      expect(await runCli(["demo", "--help"])).toBe(0);
    } finally {
      log.mockRestore();
    }
    expect(out).toMatch(/--port <port>\s+the engine's port \(API and dashboard\) on 127\.0\.0\.1/);
  });

  it("a port that is not 1..65535 is refused before anything starts (exit 2)", async () => {
    let err = "";
    const spy = vi.spyOn(console, "error").mockImplementation((s: string) => {
      err += `${s}\n`;
    });
    try {
      expect(await runDemo(["--port", "99999"])).toBe(2);
    } finally {
      spy.mockRestore();
    }
    expect(err).toContain("--port must be a port number 1..65535");
  });
});
