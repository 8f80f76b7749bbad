/** @jsxImportSource hono/jsx */
/**
 * The dashboard's gate table shows a quantile metric in its own unit: each arm's p99 bucket, its
 * anytime-valid bounds in ms and the margin in ms, not shares in percentage points.
 */
import { describe, expect, it } from "vitest";
import { Analysis } from "../../../engine/src/domain/gate/analysis.ts";
import { decideGate } from "../../../engine/src/domain/gate/decide.ts";
import { toEvidence } from "../../../engine/src/domain/gate/evidence.ts";
import type { Bucket } from "../../../engine/src/domain/gate/observations.ts";
import type { Release } from "../../../engine/src/domain/types.ts";
import { GatePanel } from "../../../engine/src/http/dashboard/gate-panel.tsx";

/** Cumulative counts: `shares` of n at or below 100, 300, 400, 600, 800 ms. */
const hist = (n: number, shares: number[]): Bucket[] => [
  ...[100, 300, 400, 600, 800].map((le, i) => ({ le, count: Math.round(n * (shares[i] ?? 1)) })),
  { le: Number.POSITIVE_INFINITY, count: n },
];

describe("gate panel: quantile metric", () => {
  it("shows p99 buckets, bounds in ms and the margin in ms", async () => {
    const analysis = Analysis.parse({
      metrics: [{ name: "latency-p99", kind: "quantile", quantile: 0.99, margin: { ms: 100 } }],
    });
    const e = decideGate(
      { analysis, plannedCandidateShare: 0.2, elapsedMs: 5_000, phase: "gate" },
      {
        assignments: { candidate: 4000, control: 16_000 },
        metrics: {
          "latency-p99": {
            candidate: {
              kind: "latency",
              buckets: hist(4000, [0.1, 0.6, 0.8, 0.97, 0.995]),
            },
            control: { kind: "latency", buckets: hist(16_000, [0.5, 0.986, 0.9963, 0.9995, 1]) },
          },
        },
      },
    );
    expect(e.decision).toBe("fail");
    const evidence = toEvidence(
      { release_id: "r1", generation: 1, manifest_digest: "d", wave: 0 },
      1,
      0,
      e,
    );
    const release = {
      id: "r1",
      generation: 1,
      manifest: { waves: [{ traffic: 10 }] },
    } as unknown as Release;
    const html = String(await (<GatePanel release={release} evidence={[evidence]} history={[]} />));
    expect(html).toContain("p99 600–800 ms (4,000)");
    expect(html).toContain("p99 300–400 ms (16,000)");
    expect(html).toContain("candidate (600, 800] ms, control (300, 400] ms");
    expect(html).toContain("<td>+100 ms</td>");
  });
});
