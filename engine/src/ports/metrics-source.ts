/**
 * Metrics-source port: where a gate's numbers come from (docs/gate.md). The arms are told
 * apart by the image that served (candidate image vs the baseline's), counted since the wave's
 * exposure was observed.
 */
import type { Analysis } from "../domain/gate/analysis.ts";
import type { GateObservations } from "../domain/gate/decide.ts";
import type { ReleaseLabelCheck } from "../domain/gate/evidence.ts";

/** One gated wave's read. */
export interface GateQuery {
  model: string;
  releaseId: string;
  analysis: Analysis;
  candidateImage: string;
  controlImage: string;
  /**
   * The control arm as observed: the lanes that served the model at release start (the
   * observed baseline's lanes with weight > 0, not excluded). A source that can tell lanes
   * apart counts as control what these lanes served with any image but the candidate's, so the
   * control is the baseline actually serving, not an assumed image. Absent: `controlImage`.
   */
  controlLanes?: string[];
  /** Lane ids of the model (a template's `$lane` becomes `a|b|c`, each id regex-escaped, for `=~`). */
  lanes: string[];
  /**
   * Set on a shadow phase (docs/gate.md "Shadow phases"): the arms are the candidate's answers
   * to mirrored requests and the baseline's answers to the same requests, not real traffic.
   * A source that cannot tell mirrored requests apart answers every metric missing.
   */
  shadow?: true;
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
  /**
   * Requests labelled with the release (`baton-release`) as the router counted them and as the
   * lanes counted them; absent (or null) when the source cannot count labels. Never throws.
   */
  releaseLabels?(q: Pick<GateQuery, "model" | "releaseId">): Promise<ReleaseLabelCheck | null>;
}
