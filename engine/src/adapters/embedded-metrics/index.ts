/**
 * The embedded default of the metrics-source port: reads the reference router's traffic
 * generator (engine/src/control-plane/traffic.ts) in process. Counts are taken since the
 * first read of a wave (keyed by release and `sinceMs`): the counters at that read are
 * subtracted from later ones, as a rate over the wave's window would. The candidate arm is what
 * the candidate image served; the control arm is what the lanes serving at release start (the
 * observed baseline) served with any other image, or, without a baseline, the baseline image.
 * `releaseLabels` compares the requests labelled with a release at the router and at the lanes.
 */

import type { ArmCounters, TrafficGenerator } from "../../control-plane/traffic.ts";
import { LATENCY_BUCKETS_MS } from "../../control-plane/traffic.ts";
import type { GateObservations } from "../../domain/gate/decide.ts";
import type { ReleaseLabelCheck } from "../../domain/gate/evidence.ts";
import type { Bucket } from "../../domain/gate/observations.ts";
import type { GateQuery, MetricsSource } from "../../ports/metrics-source.ts";

interface Totals {
  units: number;
  requests: number;
  errors: number;
  buckets: number[];
}

function totals(rows: ArmCounters[], serves: (r: ArmCounters) => boolean): Totals {
  const t: Totals = {
    units: 0,
    requests: 0,
    errors: 0,
    buckets: new Array(LATENCY_BUCKETS_MS.length + 1).fill(0),
  };
  for (const r of rows) {
    if (!serves(r)) continue;
    t.units += r.units;
    t.requests += r.requests;
    t.errors += r.errors;
    r.buckets.forEach((v, i) => {
      t.buckets[i] = (t.buckets[i] ?? 0) + v;
    });
  }
  return t;
}

const minus = (a: Totals, b: Totals): Totals => ({
  units: a.units - b.units,
  requests: a.requests - b.requests,
  errors: a.errors - b.errors,
  buckets: a.buckets.map((v, i) => v - (b.buckets[i] ?? 0)),
});

/** See the module comment. */
export class EmbeddedMetricsSource implements MetricsSource {
  private readonly starts = new Map<string, ArmCounters[]>();

  constructor(private readonly generator: TrafficGenerator) {}

  /** The router's and the lanes' counts of requests labelled with the release. */
  async releaseLabels(q: Pick<GateQuery, "model" | "releaseId">): Promise<ReleaseLabelCheck> {
    const n = this.generator.releaseCounts(q.releaseId);
    return { release: q.releaseId, ...n, agree: n.router === n.lanes };
  }

  async observe(q: GateQuery): Promise<GateObservations> {
    // A shadow phase reads the mirrored requests' outcomes: the candidate's copies beside the
    // routed lanes' answers to the same requests.
    const key = `${q.releaseId}\u0000${q.sinceMs}${q.shadow ? "\u0000shadow" : ""}`;
    const now = q.shadow ? this.generator.shadowSnapshot() : this.generator.snapshot();
    const start = this.starts.get(key) ?? now;
    this.starts.set(key, start);
    const arm = (serves: (r: ArmCounters) => boolean) =>
      minus(totals(now, serves), totals(start, serves));
    const c = arm((r) => r.image === q.candidateImage);
    // The control: what the lanes serving at release start still serve (any image but the
    // candidate's); without the observed baseline, the baseline image.
    const baseLanes = q.controlLanes?.length && !q.shadow ? new Set(q.controlLanes) : null;
    const b = arm((r) =>
      q.shadow
        ? r.image !== q.candidateImage
        : baseLanes
          ? baseLanes.has(r.lane) && r.image !== q.candidateImage
          : r.image === q.controlImage,
    );
    const hist = (t: Totals): Bucket[] =>
      t.buckets.map((count, i) => ({
        le: LATENCY_BUCKETS_MS[i] ?? Number.POSITIVE_INFINITY,
        count,
      }));
    const metrics: GateObservations["metrics"] = {};
    for (const m of q.analysis.metrics) {
      // A shadow phase reads `shadow_query`, never `query` (which reads real traffic).
      if (q.shadow ? m.shadow_query : m.query) {
        // A read that can never succeed here: an error, not data still to come.
        metrics[m.name] = {
          missing: "a PromQL query needs the Prometheus metrics source",
          error: true,
        };
      } else if (m.kind === "ratio") {
        metrics[m.name] = {
          candidate: { kind: "ratio", counts: { numerator: c.errors, denominator: c.requests } },
          control: { kind: "ratio", counts: { numerator: b.errors, denominator: b.requests } },
        };
      } else {
        metrics[m.name] = {
          candidate: { kind: "latency", buckets: hist(c) },
          control: { kind: "latency", buckets: hist(b) },
        };
      }
    }
    return { assignments: { candidate: c.units, control: b.units }, metrics };
  }
}
