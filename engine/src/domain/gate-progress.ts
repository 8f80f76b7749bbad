/**
 * What a gate under way waits for, read from its latest evaluation and kept on the release's
 * `gate` (`GateWait.progress`), so every view can say what holds the release (`waiting for
 * samples (1,240 of 5,000)`, `baking 20 s of 30 s`) from the release alone, without reading
 * the stored evidence. Pure; it reads the evidence's figures, never its reason text.
 */
import type { Analysis } from "./gate/analysis.ts";
import type { GateEvidence } from "./gate/evidence.ts";

/**
 * What the latest evaluation waits for, in the order the gate asks (docs/gate.md):
 * `assignments` (no counts per arm yet), `metrics` (a primary metric's query gave nothing),
 * `samples` (an arm has fewer than `min_samples`), `evidence` (the bounds do not yet show the
 * candidate within its margin), `bake` (everything else is in; the bake time runs).
 */
export type GateWaitingFor = "assignments" | "metrics" | "samples" | "evidence" | "bake";

/** What a gate's latest `wait` (or `inconclusive`) evaluation waited for, with its figures. */
export interface GateProgress {
  waiting_for: GateWaitingFor;
  /** ms the wave had been observed at that evaluation. */
  elapsed_ms: number;
  /** The analysis' `bake_ms`. */
  bake_ms: number;
  /** samples: the fewest units of an arm over the primary metrics (`have`) and `min_samples`. */
  samples: { have: number; need: number } | null;
  /** metrics / samples / evidence: the metric it waits on. */
  metric: string | null;
}

/**
 * The progress of evaluation `ev` of a gate with `analysis`; null for a decision that does not
 * wait (pass, fail). A watch (guardrails of a later wave) waits only for its bake time.
 */
export function gateProgress(ev: GateEvidence, analysis: Analysis): GateProgress | null {
  if (ev.decision === "pass" || ev.decision === "fail") return null;
  const base = {
    elapsed_ms: ev.elapsed_ms,
    bake_ms: analysis.bake_ms,
    samples: null,
    metric: null,
  };
  if (ev.phase === "watch") return { ...base, waiting_for: "bake" };
  if (!ev.arms) return { ...base, waiting_for: "assignments" };
  const primaries = ev.metrics.filter((m) => m.required);
  const unread = analysis.metrics.find(
    (a) => a.required && !primaries.some((m) => m.name === a.name),
  );
  if (unread) return { ...base, waiting_for: "metrics", metric: unread.name };
  const missing = primaries.find((m) => m.missing && (!m.candidate || !m.control));
  if (missing) return { ...base, waiting_for: "metrics", metric: missing.name };
  let fewest: { have: number; metric: string } | null = null;
  for (const m of primaries) {
    const have = Math.min(m.candidate?.n ?? 0, m.control?.n ?? 0);
    if (have < analysis.min_samples && (!fewest || have < fewest.have))
      fewest = { have, metric: m.name };
  }
  if (fewest) {
    return {
      ...base,
      waiting_for: "samples",
      samples: { have: fewest.have, need: analysis.min_samples },
      metric: fewest.metric,
    };
  }
  const undecided = primaries.find((m) => m.verdict !== "non_inferior");
  if (undecided) return { ...base, waiting_for: "evidence", metric: undecided.name };
  return { ...base, waiting_for: "bake" };
}
