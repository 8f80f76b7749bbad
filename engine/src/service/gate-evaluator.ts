/**
 * One gate evaluation of a release's wave: read the metrics source, decide (pure domain), and
 * return the evidence record bound to the release, generation, manifest digest and wave, with
 * the source's release-label check when it can count labels.
 * What runs it on `interval_ms` and what the transition does with the decision is the
 * caller's (docs/gate.md).
 */
import { decideGate } from "../domain/gate/decide.ts";
import { type EvidenceBinding, type GateEvidence, toEvidence } from "../domain/gate/evidence.ts";
import { gateAt } from "../domain/gate/waves.ts";
import type { Manifest } from "../domain/types.ts";
import type { MetricsSource } from "../ports/metrics-source.ts";

export { gateAt };

/** Input of one evaluation. */
export interface GateRun {
  manifest: Manifest;
  binding: EvidenceBinding;
  /** 1-based evaluation number within the binding. */
  seq: number;
  /** Epoch ms the wave's exposure was observed at the router. */
  waveStartedAt: number;
  now: number;
  /** The model's baseline image as observed at release start (default: previous_image). */
  controlImage?: string;
  /** The lanes serving the model at release start (the observed baseline); see GateQuery. */
  controlLanes?: string[];
  /** Evaluations in a row before this one that failed to read / could not decide. */
  streak?: { errors: number; undecided: number };
}

/**
 * Evaluates once; null when the wave has no gate. Never throws for a failing source (that is
 * missing evidence inside the record).
 */
export async function evaluateGate(
  source: MetricsSource,
  run: GateRun,
): Promise<GateEvidence | null> {
  const { manifest, binding } = run;
  const gate = gateAt(manifest, binding.wave);
  if (!gate) return null;
  const wave = manifest.waves[binding.wave] as Manifest["waves"][number];
  const observations = await source.observe({
    model: manifest.model,
    releaseId: binding.release_id,
    analysis: gate.analysis,
    candidateImage: manifest.image,
    controlImage: run.controlImage ?? manifest.previous_image,
    ...(run.controlLanes?.length ? { controlLanes: run.controlLanes } : {}),
    lanes: manifest.lanes.map((l) => l.id),
    ...(wave.shadow ? { shadow: true as const } : {}),
    sinceMs: run.waveStartedAt,
    nowMs: run.now,
  });
  const evaluation = decideGate(
    {
      analysis: gate.analysis,
      // Mirrored requests are paired: each is answered once by either arm, so half each.
      plannedCandidateShare: wave.shadow ? 0.5 : wave.traffic / 100,
      elapsedMs: Math.max(0, run.now - run.waveStartedAt),
      phase: gate.phase,
      ...(run.streak ? { streak: run.streak } : {}),
    },
    observations,
  );
  const labels = source.releaseLabels
    ? await source
        .releaseLabels({ model: manifest.model, releaseId: binding.release_id })
        .catch(() => null)
    : null;
  const evidence = toEvidence(binding, run.seq, run.now, evaluation);
  return labels ? { ...evidence, labels } : evidence;
}
