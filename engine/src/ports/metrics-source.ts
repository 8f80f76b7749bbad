/**
 * Metrics-source port: where a gate's numbers come from (docs/gate.md). The arms are told
 * apart by the image that served (candidate image vs the baseline's), counted since the wave's
 * exposure was observed.
 */
import type { Analysis } from "../domain/gate/analysis.ts";
import type { GateObservations } from "../domain/gate/decide.ts";

/** One gated wave's read. */
export interface GateQuery {
  model: string;
  releaseId: string;
  analysis: Analysis;
  candidateImage: string;
  controlImage: string;
  /** Lane ids of the model (a template's `$lane` becomes `a|b|c`, for `=~`). */
  lanes: string[];
  /** Epoch ms from which counts are taken (the wave's exposure observed). */
  sinceMs: number;
  /** Epoch ms of the read. */
  nowMs: number;
}

export interface MetricsSource {
  /**
   * Never throws: a query that failed, timed out, returned nothing or NaN comes back as
   * `{missing: reason}` in the observations, which never passes a gate.
   */
  observe(q: GateQuery): Promise<GateObservations>;
}
