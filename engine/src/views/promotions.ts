/**
 * Who promoted a wave, from the release's history: an operator's accepted `promote` (past an
 * inconclusive gate, or a manual promotion) names the wave, the actor and the reason. The gate
 * panel and the CLI say who promoted instead of still asking for a promote. Pure.
 */
import type { HistoryEntry } from "../domain/types.ts";
import { time } from "./format.ts";

/** One operator's promotion of a wave (`wave` counts from 0, as the release's waves do). */
export interface Promotion {
  wave: number;
  actor: string;
  /** The operator's reason, or "" when none was given (promote's reason is optional). */
  reason: string;
  /** When it was accepted (epoch ms). */
  at: number;
}

/** The promotions in `history`, by wave (the latest per wave). */
export function promotionsByWave(history: readonly HistoryEntry[]): Map<number, Promotion> {
  const out = new Map<number, Promotion>();
  for (const e of history) {
    if (e.kind !== "promote" || e.outcome !== "accepted") continue;
    const d = e.data;
    if (!d || typeof d !== "object" || Array.isArray(d)) continue;
    if (typeof d.wave !== "number" || typeof d.actor !== "string") continue;
    const prev = out.get(d.wave);
    if (prev && prev.at > e.at) continue;
    out.set(d.wave, {
      wave: d.wave,
      actor: d.actor,
      reason: typeof d.reason === "string" ? d.reason : "",
      at: e.at,
    });
  }
  return out;
}

/** `promoted by operator:maria at 2026-11-29 12:03:04Z: the latency is within the SLO`. */
export function promotionWords(p: Promotion): string {
  return `promoted by ${p.actor} at ${time(p.at)}${p.reason.trim() ? `: ${p.reason.trim()}` : ""}`;
}
