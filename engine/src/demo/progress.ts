/**
 * Prints a release as it happens: one line per step run when it ends (step, direction,
 * attempt, result, duration), and one line per change of the release's state. Pure over the
 * release records it is given, so the demo and the e2e tests can both use it.
 */
import type { Manifest, ManifestStep, Release, StepRun } from "../domain/types.ts";

const ENDED = new Set(["succeeded", "failed", "unknown", "dispatch_failed"]);

/** `attach_queue_lane:lane-b`, `set_traffic(10%)`; backward steps by their backward action. */
export function stepLabel(step: ManifestStep, direction: "fwd" | "bwd" = "fwd"): string {
  const action = direction === "bwd" && step.backward ? step.backward : step.forward;
  if (step.lane) return `${action.name}:${step.lane}`;
  const req = action.kind === "control_plane" ? action.request : null;
  if (!req || !("percent" in req)) return action.name;
  // Backward to before the first wave (the first drain_wave's undo): the observed baseline.
  return direction === "bwd" && step.name === "drain_wave" && step.wave === 0
    ? `${action.name}(baseline)`
    : `${action.name}(${req.percent}%)`;
}

/**
 * Resolves `--fail-at`: a step number, 1-based as the dashboard and `baton status` show it
 * (`11`), or `name:lane` of a forward runner step (`attach_queue_lane:lane-b`).
 * @throws Error listing the accepted values when `spec` names no runner step.
 */
export function resolveStep(manifest: Manifest, spec: string): ManifestStep {
  const runnerSteps = manifest.steps.filter((s) => s.kind === "runner" && s.lane);
  const accepted = runnerSteps.map((s) => `${s.index + 1} (${stepLabel(s)})`).join(", ");
  const found = /^\d+$/.test(spec)
    ? manifest.steps[Number(spec) - 1]
    : manifest.steps.find((s) => stepLabel(s) === spec);
  if (found?.kind !== "runner" || !found.lane) {
    throw new Error(
      `[demo] --fail-at ${spec}: not a runner step of a lane (only those run a health check); use one of: ${accepted}`,
    );
  }
  return found;
}

/** Milliseconds a step run took: started (or created) to finished. */
export function stepRunDuration(sr: StepRun): number | null {
  if (sr.finished_at === null) return null;
  return sr.finished_at - (sr.started_at ?? sr.created_at);
}

/** The attempt number a line shows: the runner's latest attempt, or the control-plane tries. */
export function attemptOf(sr: StepRun): number {
  return sr.attempts.at(-1)?.n ?? Math.max(1, sr.tries);
}

/** One ended step run, as printed. `number` is the 1-based step number shown. */
export interface StepLine {
  index: number;
  number: number;
  label: string;
  direction: "fwd" | "bwd";
  attempt: number;
  result: string;
  duration_ms: number | null;
  text: string;
}

export function formatStepLine(manifest: Manifest, sr: StepRun): StepLine {
  const step = manifest.steps[sr.step_index]!;
  const direction = sr.direction as "fwd" | "bwd";
  const label = stepLabel(step, direction);
  const attempt = attemptOf(sr);
  const d = stepRunDuration(sr);
  const text = `  ${String(sr.step_index + 1).padStart(2)}  ${label.padEnd(34)} ${direction}  attempt ${attempt}  ${sr.state.padEnd(10)} ${d === null ? "" : `${d} ms`}`;
  return {
    index: sr.step_index,
    number: sr.step_index + 1,
    label,
    direction,
    attempt,
    result: sr.state,
    duration_ms: d,
    text,
  };
}

/** Remembers what was printed; `update` returns the new lines for a fresher record. */
export class ProgressPrinter {
  private readonly printed = new Map<string, string>();
  private lastState = "";
  readonly lines: StepLine[] = [];

  /**
   * The lines to print for a fresher record: step runs that ended since the last call, in the
   * order they ended, with `timed` lines (e.g. gate evaluations, `at` epoch ms) placed among them
   * by time, then the release's state when it changed.
   */
  update(release: Release, timed: { at: number; text: string }[] = []): string[] {
    const steps: { at: number; text: string }[] = [];
    const ended = release.step_runs
      .filter((sr) => ENDED.has(sr.state))
      .sort((a, b) => (a.finished_at ?? 0) - (b.finished_at ?? 0));
    for (const sr of ended) {
      // A step run that ends again (a retry, a re-run) prints again.
      const key = `${sr.state}:${attemptOf(sr)}:${sr.dispatch}:${sr.finished_at}`;
      if (this.printed.get(sr.id) === key) continue;
      this.printed.set(sr.id, key);
      const line = formatStepLine(release.manifest, sr);
      this.lines.push(line);
      steps.push({ at: sr.finished_at ?? 0, text: line.text });
    }
    // A stable sort: a step that ended in the same millisecond as an evaluation comes first.
    const out = [...steps, ...timed].sort((a, b) => a.at - b.at).map((l) => l.text);
    if (release.state !== this.lastState) {
      this.lastState = release.state;
      const why = release.reason ? `: ${release.reason}` : "";
      out.push(`[demo] release ${release.id} is ${release.state}${why}`);
    }
    return out;
  }
}
