/**
 * One evaluation of a release's stop condition (docs/gate.md "The stop condition"): read the
 * metrics source since the release's latest observed exposure, decide (pure domain), and
 * return the evaluation for the `stop_check` event. Never throws for a failing source (that is
 * missing data inside the evaluation).
 */
import type { Analysis, GateMetric } from "../domain/gate/analysis.ts";
import { decideStop } from "../domain/gate/stop.ts";
import { stopConditionOf } from "../domain/gate/stop-condition.ts";
import type { Release, StopEvaluation } from "../domain/types.ts";
import type { MetricsSource } from "../ports/metrics-source.ts";

/**
 * Evaluates the stop condition of `release` as evaluation `seq` at `now`; null when the
 * release has no stop condition or is not watched. `controlLanes`: the observed baseline's
 * lanes serving at start (the control arm), as the gate reads them.
 */
export async function evaluateStop(
  source: MetricsSource,
  release: Release,
  seq: number,
  now: number,
): Promise<StopEvaluation | null> {
  const stop = stopConditionOf(release.manifest);
  const w = release.stop;
  if (!stop || !w) return null;
  const m = release.manifest;
  const controlLanes = (release.baseline?.lanes ?? [])
    .filter((l) => l.weight > 0 && !l.excluded)
    .map((l) => l.id);
  // The source reads only each metric's name, kind, threshold and query.
  const analysis = {
    ...(m.waves.find((x) => x.analysis)?.analysis ?? {}),
    alpha: stop.alpha,
    min_samples: stop.min_samples,
    metrics: stop.metrics.map(
      (x) => ({ margin: { absolute: 0 }, required: false, ...x }) as GateMetric,
    ),
  } as Analysis;
  const observations = await source.observe({
    model: m.model,
    releaseId: release.id,
    analysis,
    candidateImage: m.image,
    controlImage: m.previous_image,
    ...(controlLanes.length ? { controlLanes } : {}),
    lanes: m.lanes.map((l) => l.id),
    sinceMs: w.since,
    nowMs: now,
  });
  return decideStop(stop, { seq, at: now, wave: w.wave, since: w.since }, observations);
}
