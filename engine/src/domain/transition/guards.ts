/**
 * Named guards of the release state machine: small predicates the handlers
 * reference by name, so that each rule of docs/state-machine.md lives in one place.
 */
import { isProbeStep } from "../prerequisites.ts";
import { TERMINAL_RELEASE_STATES } from "../states.ts";
import type { Release, StepRun } from "../types.ts";

/**
 * Steps `a` and `b` are lane rows of the same parallel wave (`max_unavailable` above 1), whose
 * lanes the release walks each with its own cursor (`lanes.ts`).
 */
function sameParallelWave(r: Release, a: number, b: number): boolean {
  const sa = r.manifest.steps[a];
  const sb = r.manifest.steps[b];
  if (!sa || !sb || sa.lane === null || sb.lane === null || sa.wave !== sb.wave) return false;
  return (r.manifest.waves[sa.wave]?.max_unavailable ?? 1) > 1;
}

/**
 * Steps `a` and `b` are both probe steps of a rollback (`PROBE_STEP`), which the release runs
 * concurrently (`probe.ts`).
 */
function bothProbes(r: Release, a: number, b: number): boolean {
  return isProbeStep(r.manifest.steps[a]) && isProbeStep(r.manifest.steps[b]);
}

const IN_FLIGHT = new Set(["dispatching", "dispatched", "running", "applying"]);

export const guards = {
  /** succeeded, rolled_back, aborted: no work of any kind. */
  isTerminal: (r: Release): boolean => TERMINAL_RELEASE_STATES.has(r.state),

  /** An action of this step run may be under way outside the engine. */
  inFlight: (sr: StepRun): boolean => IN_FLIGHT.has(sr.state),

  /**
   * The release is driving this step run now: a forward step run at the cursor (or of the
   * same parallel wave, or a probe while the cursor is on the probes) while the release is
   * `running` or `paused`, or a backward one at the cursor while `compensating` or
   * `needs_operator`.
   */
  isCurrent: (r: Release, sr: StepRun): boolean =>
    sr.direction === "fwd"
      ? (sr.step_index === r.cursor ||
          sameParallelWave(r, sr.step_index, r.cursor) ||
          bothProbes(r, sr.step_index, r.cursor)) &&
        (r.state === "running" || r.state === "paused")
      : sr.step_index === r.cursor && (r.state === "compensating" || r.state === "needs_operator"),

  /** The release waits on an operator for this step run (`retry` is allowed). */
  waitsOnOperator: (r: Release, sr: StepRun): boolean =>
    guards.isCurrent(r, sr) &&
    (sr.direction === "fwd" ? r.state === "paused" : r.state === "needs_operator") &&
    (sr.state === "failed" || sr.state === "unknown" || sr.state === "dispatch_failed"),

  /**
   * Whether a forward step run's action may have reached its target, so that compensation
   * must undo it. Runner: only if a preflight opened an attempt, since the action touches no
   * machine without a 200 preflight (docs/state-machine.md), and not when every attempt's result files
   * prove no remote command ran (`Attempt.nothing_ran`: connect, host key or authentication
   * failed; any attempt without that proof counts as taken effect). Control plane: once the
   * call was made.
   */
  mayHaveTakenEffect: (sr: StepRun): boolean =>
    sr.kind === "runner"
      ? sr.attempts.length > 0 && !sr.attempts.every((a) => a.nothing_ran === true)
      : sr.state !== "planned" && sr.state !== "dispatch_failed",

  /** Preflight may bind a run to this step run: awaiting its dispatch, no run yet. */
  awaitsFirstRun: (sr: StepRun): boolean =>
    sr.bound_run_id === null && (sr.state === "dispatching" || sr.state === "dispatched"),
} as const;
