/**
 * Which gate a wave of a manifest has (docs/gate.md): pure, from the manifest alone, so the
 * transition (which holds a wave at its gate) and the evaluator (which reads the metrics)
 * agree on it.
 */
import type { Manifest } from "../types.ts";
import type { Analysis } from "./analysis.ts";
import type { GatePhase } from "./decide.ts";

/**
 * The gate in force at wave `wave`: its own analysis (phase `gate`), else the analysis of the
 * latest earlier gated wave read for guardrails only (phase `watch`, when it has any), else
 * null. A wave at 0% or 100% has no pair of arms, so it has no gate and no watch.
 */
export function gateAt(
  manifest: Manifest,
  wave: number,
): { analysis: Analysis; phase: GatePhase } | null {
  const w = manifest.waves[wave];
  // A shadow phase (traffic 0) is gated on mirrored requests (docs/gate.md "Shadow phases").
  if (w?.shadow) return w.analysis ? { analysis: w.analysis, phase: "gate" } : null;
  if (!w || w.traffic <= 0 || w.traffic >= 100) return null;
  if (w.analysis) return { analysis: w.analysis, phase: "gate" };
  for (let i = wave - 1; i >= 0; i--) {
    const a = manifest.waves[i]?.analysis;
    if (a) return a.metrics.some((m) => !m.required) ? { analysis: a, phase: "watch" } : null;
  }
  return null;
}

/** Index of the last step of wave `wave` (its traffic assert), or -1 when it has none. */
export function lastStepOfWave(manifest: Manifest, wave: number): number {
  let last = -1;
  for (const s of manifest.steps) if (s.wave === wave && s.index > last) last = s.index;
  return last;
}

/** A wave as people read it: `wave 1 (10%)` (waves count from 1 in messages, like steps). */
export function waveLabel(manifest: Manifest, wave: number): string {
  const w = manifest.waves[wave];
  return `wave ${wave + 1} (${w?.shadow ? "shadow, " : ""}${w?.traffic ?? "?"}%)`;
}
