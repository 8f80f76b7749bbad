/**
 * State and kind vocabularies, as `const` objects with derived unions (docs/glossary.md, docs/state-machine.md).
 * Reused for SQL columns, `z.enum` and exhaustive switches.
 */

/**
 * Release states (docs/state-machine.md). Terminal: succeeded, rolled_back, aborted, abandoned
 * (an operator gave up on compensation after confirming what each lane runs). Every
 * non-terminal state has an exit an operator can take: `availableActions` in
 * `transition/exits.ts`, documented in docs/state-machine.md "Ways out".
 */
export const ReleaseState = {
  pending: "pending",
  running: "running",
  paused: "paused",
  compensating: "compensating",
  needs_operator: "needs_operator",
  succeeded: "succeeded",
  rolled_back: "rolled_back",
  aborted: "aborted",
  abandoned: "abandoned",
} as const;
export type ReleaseState = (typeof ReleaseState)[keyof typeof ReleaseState];
export const RELEASE_STATES = Object.values(ReleaseState) as [ReleaseState, ...ReleaseState[]];
export const TERMINAL_RELEASE_STATES: ReadonlySet<ReleaseState> = new Set([
  ReleaseState.succeeded,
  ReleaseState.rolled_back,
  ReleaseState.aborted,
  ReleaseState.abandoned,
]);

/**
 * Step-run states. Runner steps: planned → dispatching → dispatched → running →
 * succeeded | failed, `unknown` on a missed deadline, `dispatch_failed` when GitHub refuses.
 * Engine-side (control plane) steps: planned → applying → succeeded | failed | unknown.
 */
export const StepRunState = {
  planned: "planned",
  dispatching: "dispatching",
  dispatched: "dispatched",
  running: "running",
  applying: "applying",
  succeeded: "succeeded",
  failed: "failed",
  unknown: "unknown",
  dispatch_failed: "dispatch_failed",
} as const;
export type StepRunState = (typeof StepRunState)[keyof typeof StepRunState];
export const STEP_RUN_STATES = Object.values(StepRunState) as [StepRunState, ...StepRunState[]];

/** Direction of a step run. Appears in operation keys as `fwd` / `bwd`. */
export const Direction = { forward: "fwd", backward: "bwd" } as const;
export type Direction = (typeof Direction)[keyof typeof Direction];

/** Where a step's action executes: on a GitHub runner (dispatch) or as a control-plane call. */
export const StepKind = { runner: "runner", control_plane: "control_plane" } as const;
export type StepKind = (typeof StepKind)[keyof typeof StepKind];

/** What a step does when it fails after its retries: undo (default) or hold for an operator. */
export const FailurePolicy = { compensate: "compensate", pause: "pause" } as const;
export type FailurePolicy = (typeof FailurePolicy)[keyof typeof FailurePolicy];
