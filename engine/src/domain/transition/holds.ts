/**
 * Holds: where a release stops and waits for an operator's verb before it starts the next
 * step (docs/lifecycle.md). An operator `pause` (nothing new starts until `resume`); a dark
 * deploy (`exposure: dark`), held at 0% exposure before its first traffic write above 0%
 * until `release`; and `promotion: manual` on a wave, held after that wave before the next
 * widens exposure until `promote`. Each is a `paused` release with `hold` saying which, who
 * and why; `beginForwardAtCursor` asks `holdsAtCursor` before it begins a step.
 */
import { waveLabel } from "../gate/waves.ts";
import type { Hold, Manifest, Release } from "../types.ts";
import { suggestedCommand } from "../verbs.ts";
import type { Draft } from "./draft.ts";

/**
 * Index of the first step whose forward action writes traffic above 0% (the first wave's
 * `set_traffic`): the candidate's first exposure. -1 when no step exposes it.
 */
export function firstExposureStep(m: Manifest): number {
  const s = m.steps.find(
    (x) =>
      x.forward.kind === "control_plane" &&
      x.forward.request.op === "set_traffic" &&
      x.forward.request.percent > 0,
  );
  return s ? s.index : -1;
}

/** The 0-based wave whose first step is `index`, or null when `index` starts no wave. */
function waveStartingAt(m: Manifest, index: number): number | null {
  const s = m.steps[index];
  if (!s) return null;
  const prev = m.steps[index - 1];
  return !prev || prev.wave !== s.wave ? s.wave : null;
}

/** The verb each hold waits for, as a command. */
export function holdVerb(r: Release, h: Hold): string {
  if (h.kind === "pause") return `resume (${suggestedCommand("resume", { target: r.id })})`;
  if (h.kind === "dark") return `release (${suggestedCommand("release", { target: r.id })})`;
  return `promote (${suggestedCommand("promote", { target: r.id })})`;
}

/** `baton promote r1 --reason "<why the risk is acceptable>"` and the abort that compensates. */
const promoteRisk = (id: string) =>
  suggestedCommand("promote", {
    target: id,
    flags: { "--reason": '"<why the risk is acceptable>"' },
  });
const abortCommand = (id: string) => suggestedCommand("abort", { target: id });

/** One phrase: `paused by alice: canary looks odd`, `deployed dark by bob: …`. */
export function holdWords(h: Hold): string {
  if (h.kind === "pause") return `paused by ${h.actor}: ${h.reason}`;
  if (h.kind === "dark") return `deployed dark by ${h.actor}: ${h.reason}`;
  return h.reason;
}

/**
 * The reason of a release paused at a gate that ended inconclusive (`r.gate.decision`
 * `inconclusive`), with no operator's pause in force: the gate's reason and its two exits.
 */
export function inconclusiveGateReason(r: Release): string {
  const g = r.gate;
  const label = waveLabel(r.manifest, g?.wave ?? 0);
  return `gate of ${label} is inconclusive: ${g?.reason ?? ""}; promote (${promoteRisk(r.id)}) to accept the risk, or abort (${abortCommand(r.id)}) to compensate`;
}

/**
 * The reason of a release paused by an operator (`hold` `pause`) whose gate then ended
 * inconclusive: both waits and both verbs (either order; the next wave begins once both are
 * given). docs/lifecycle.md "Pause and resume".
 */
export function pausedAtInconclusiveGateReason(r: Release, h: Hold): string {
  const g = r.gate;
  const label = waveLabel(r.manifest, g?.wave ?? 0);
  return `${holdWords(h)}; and the gate of ${label} is inconclusive: ${g?.reason ?? ""}; the next wave waits for both promote (${promoteRisk(r.id)}, accepts the gate's risk) and resume (${suggestedCommand("resume", { target: r.id })}, lifts the pause), or abort (${abortCommand(r.id)}) to compensate`;
}

/**
 * Whether the release must wait before beginning the forward step at its cursor: an
 * operator's pause is in force, a dark release reached its first exposure, or a wave with
 * `promotion: manual` ended. Holds the release (`paused`, `hold` set) and returns true; the
 * caller then begins nothing.
 */
export function holdsAtCursor(d: Draft): boolean {
  const r = d.release;
  const m = r.manifest;
  if (r.hold) return true;
  if (r.exposure === "dark") {
    const first = firstExposureStep(m);
    if (first >= 0 && r.cursor >= first) {
      const step = m.steps[first];
      const pct =
        step?.forward.kind === "control_plane" && step.forward.request.op === "set_traffic"
          ? step.forward.request.percent
          : 0;
      const lanes = m.waves[step?.wave ?? 0]?.lanes.join(", ") ?? "";
      hold(d, {
        kind: "dark",
        actor: "operator",
        reason: `the candidate runs on ${lanes} with 0% exposure; release (${suggestedCommand("release", { target: r.id })}) exposes it to ${waveLabel(m, step?.wave ?? 0)} (${pct}% at step ${first + 1}), abort undoes it`,
        at: d.now,
      });
      return true;
    }
  }
  const w = waveStartingAt(m, r.cursor);
  if (w !== null && w > 0 && m.waves[w - 1]?.promotion === "manual") {
    if (!(r.promoted ?? []).includes(w)) {
      hold(d, {
        kind: "promotion",
        actor: "recipe",
        reason: `${waveLabel(m, w - 1)} is done and its promotion is manual; promote (${suggestedCommand("promote", { target: r.id, flags: { "--reason": '"<why the wave is good>"' } })}) widens to ${waveLabel(m, w)}, abort undoes the release`,
        at: d.now,
        wave: w,
      });
      return true;
    }
  }
  return false;
}

function hold(d: Draft, h: Hold): void {
  const r = d.release;
  r.state = "paused";
  r.hold = h;
  r.reason = holdWords(h);
  d.accept(`[engine] release ${r.id} waits before step ${r.cursor + 1}: ${r.reason}`, null, {
    hold: { kind: h.kind, ...(h.wave === undefined ? {} : { wave: h.wave }) },
  });
}
