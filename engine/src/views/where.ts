/**
 * What holds a release that is not moving on by itself, in one line for people: the gate it
 * is held at and what that gate waits for (`Held at wave 1 gate (10%): baking 20 s of 30 s`),
 * who paused it and where (`Paused at wave 2 gate (50%) by maria: checking GPU memory`,
 * `Paused before step 3 (wave 1) by maria: …`), or the verb it waits for (`Waiting for promote
 * after wave 1 (10%)`). The headline of the release page, the releases list, `baton status`
 * and `baton watch` (views/summary.ts). Pure: built from the release alone. Steps and waves
 * count from 1.
 */

import type { GateProgress } from "../domain/gate-progress.ts";
import type { GateWait, Release } from "../domain/types.ts";
import { count, duration } from "./format.ts";

/** `wave 1 gate (10%)`, `wave 2 guardrail watch (50%)`. */
export function gatePlace(r: Release, g: Pick<GateWait, "wave" | "phase">): string {
  const pct = r.manifest.waves[g.wave]?.traffic ?? "?";
  return `wave ${g.wave + 1} ${g.phase === "watch" ? "guardrail watch" : "gate"} (${pct}%)`;
}

/** `wave 1 (10%)`. */
function wave(r: Release, w: number): string {
  return `wave ${w + 1} (${r.manifest.waves[w]?.traffic ?? "?"}%)`;
}

/** What a gate's latest wait waited for: `waiting for samples (1,240 of 5,000)`. */
export function gateProgressWords(p: GateProgress): string {
  const s = (ms: number) => `${Math.round(ms / 1000)} s`;
  switch (p.waiting_for) {
    case "assignments":
      return "waiting for assignment counts per arm";
    case "metrics":
      return `waiting for metrics (${p.metric ?? "a primary metric"} has no data yet)`;
    case "samples":
      return p.samples
        ? `waiting for samples (${count(p.samples.have)} of ${count(p.samples.need)})`
        : "waiting for samples";
    case "evidence":
      return `waiting for evidence: ${p.metric ?? "a primary metric"} is not yet shown within its margin`;
    case "bake":
      return `baking ${s(Math.min(p.elapsed_ms, p.bake_ms))} of ${s(p.bake_ms)}`;
  }
}

/** What the gate `g` of `r` is doing now: `baking 20 s of 30 s`, `inconclusive after 120 s`. */
export function gateWords(g: GateWait): string {
  if (g.decision === "pending") return "waiting for its first evaluation";
  if (g.decision === "inconclusive") {
    const after = g.progress ? ` after ${duration(g.progress.elapsed_ms)}` : "";
    return `inconclusive${after}: promote to accept the risk, or abort`;
  }
  if (g.progress) return gateProgressWords(g.progress);
  return g.reason ?? g.decision;
}

/** `step 3 (wave 1)` of the step at `index`, or null past the last step. */
function stepAt(r: Release, index: number): string | null {
  const s = r.manifest.steps[index];
  return s ? `step ${s.index + 1} (wave ${s.wave + 1})` : null;
}

/**
 * Where a paused `r` stands: at the gate it is held at, at the step at its cursor when that
 * step has a run (still in flight, settling, or failed), or before the next step.
 */
export function pausedWhere(r: Release): string {
  if (r.gate) return `at ${gatePlace(r, r.gate)}`;
  const cur = r.step_runs.find((s) => s.step_index === r.cursor && s.direction === "fwd");
  const step = stepAt(r, r.cursor);
  if (!step) return "after the last step";
  return cur && cur.state !== "planned" ? `at ${step}` : `before ${step}`;
}

/**
 * The headline of a release held by a gate, an operator's pause or a hold waiting for a verb;
 * null when nothing holds it (it runs a step, ended, or is paused on a failure: the summary
 * says that with the failed step).
 */
export function holdHeadline(r: Release): string | null {
  const g = r.gate;
  const h = r.hold;
  if (r.state === "running") {
    return g ? `Held at ${gatePlace(r, g)}: ${gateWords(g)}` : null;
  }
  if (r.state !== "paused") return null;
  if (h?.kind === "pause") {
    const also =
      g?.decision === "inconclusive" ? "; its gate is inconclusive (promote or abort)" : "";
    return `Paused ${pausedWhere(r)} by ${h.actor}: ${h.reason}${also}`;
  }
  if (h?.kind === "promotion") {
    const before = (h.wave ?? 1) - 1;
    return `Waiting for promote after ${wave(r, before)}: its promotion is manual`;
  }
  if (h?.kind === "dark") {
    const first = r.manifest.steps[r.cursor]?.wave ?? 0;
    return `Waiting for release before ${wave(r, first)}: deployed dark by ${h.actor}, the candidate has 0% exposure`;
  }
  if (g?.decision === "inconclusive") return `Paused at ${gatePlace(r, g)}: ${gateWords(g)}`;
  return null;
}
