/**
 * What the release record shows of a release's shadow phases (docs/record.md): each phase's
 * caps and what was mirrored, read from its gate's evidence. Pure. (Apart from shadow.ts, which
 * the recipe schema imports, so that this file may read the manifest's types.)
 */
import type { GateSummary } from "./gate/summary.ts";
import type { Manifest } from "./types.ts";

/** One shadow phase as the release record shows it (`evidence.shadow`). */
export interface ShadowPhaseEvidence {
  phase: "shadow";
  /** 0-based wave index. */
  wave: number;
  lanes: string[];
  share: number;
  rate_per_s: number;
  /**
   * Mirrored requests the candidate answered (the shadow gate's candidate arm at its latest
   * evaluation, counted since the phase's lanes were observed at weight 0); null: no gate ran.
   */
  mirrored: number | null;
  /** The same requests as the baseline answered them (the gate's control arm); null: none. */
  baseline: number | null;
  /** The shadow gate's latest decision, or null when it was never evaluated. */
  decision: string | null;
}

/**
 * The record's view of each shadow phase of `manifest`: its caps and what was mirrored, read
 * from the gate summaries (`gateSummaries`) of its wave. Pure.
 */
export function shadowPhaseEvidence(
  manifest: Manifest,
  gates: readonly GateSummary[],
): ShadowPhaseEvidence[] {
  const out: ShadowPhaseEvidence[] = [];
  manifest.waves.forEach((w, wave) => {
    if (!w.shadow) return;
    const g = gates.filter((x) => x.wave === wave).at(-1);
    out.push({
      phase: "shadow",
      wave,
      lanes: [...w.lanes],
      share: w.shadow.share,
      rate_per_s: w.shadow.rate_per_s,
      mirrored: g?.arms ? g.arms.candidate : null,
      baseline: g?.arms ? g.arms.control : null,
      decision: g ? g.decision : null,
    });
  });
  return out;
}
