/**
 * The shapes of a recovery verification (docs/lifecycle.md "Recovery verification"): data only,
 * so `types.ts` can name them without importing the functions in `verification.ts` that read
 * a release (which re-exports them).
 */
import type { Json } from "./json.ts";

/** Fields a verification compares per lane. */
export const VERIFY_FIELDS = ["image", "weight", "excluded", "capabilities", "health"] as const;
export type VerifyField = (typeof VERIFY_FIELDS)[number];

/** What one lane should be, per the verification's source of truth. */
export interface LaneDesired {
  id: string;
  /**
   * `name@sha256:…` the lane should run; null when unknown (the baseline could not tell and no
   * step of the release deployed the lane): then the image is not compared.
   */
  image: string | null;
  /** % of the model's traffic. */
  weight: number;
  excluded: boolean;
  /** Sorted, de-duplicated. */
  capabilities: string[];
  advertised: boolean;
  /**
   * Whether the lane's machine is asked (image, health): a runner step of the release may have
   * taken effect on it. A lane no runner step touched was left as it was on its machine.
   */
  target: boolean;
}

/** What the target said about one lane: the image it runs and its health check. */
export interface TargetObservation {
  /** `target_probe`: asked now by the engine (deploy.sh smoke over SSH); `runner_report`: the lane's last runner step result. */
  source: "target_probe" | "runner_report";
  /** Epoch ms of the observation (the probe's answer, or the runner's callback). */
  at: number;
  /** False when the machine could not be asked (SSH refused, timed out): nothing observed. */
  reached: boolean;
  /**
   * Whether the container of the desired image runs: false means it does not (the image is
   * then null); null when the answer does not say (a runner report without a running image).
   */
  running: boolean | null;
  /** The image the lane runs as the container runtime reports it; null when not reported. */
  image: string | null;
  /** The lane's health check; null when not run. */
  health: "pass" | "fail" | null;
  /** One sentence for people: what the target answered. */
  message: string;
  /** `runner_report`: the step run whose result this is. */
  step_run_id: string | null;
}

/** What a lane's machine answered when asked (the target probe port's `observe`). */
export type TargetAnswer = Pick<
  TargetObservation,
  "reached" | "running" | "image" | "health" | "message"
>;

/** The control plane's view of one lane, as listed now. */
export interface ControlPlaneObservation {
  weight: number;
  excluded: boolean;
  capabilities: string[];
  advertised: boolean;
}

/** One lane's reading, as the reconciler made it. */
export interface LaneReading {
  id: string;
  /** null: the control plane did not list the lane. */
  control_plane: ControlPlaneObservation | null;
  /** null: not asked (see `target_gap`). */
  target: TargetObservation | null;
  /** Why the target was not asked, when it was not (no way to reach the machine, not touched). */
  target_gap: string | null;
}

/** The reading a `verify` effect produced (the `verified` event carries it). */
export interface VerificationReading {
  /** Epoch ms the reading ended. */
  at: number;
  /** What read: e.g. `control plane lanes + target probe (deploy.sh smoke over SSH)`. */
  by: string;
  /** The control plane could not be listed (its message): the reading proves nothing. */
  read_error: string | null;
  lanes: LaneReading[];
  /**
   * Capabilities of the model withdrawn by kill switches in force at the reading: the desired
   * lists leave them out (a kill switch outranks the baseline an undo restores). Absent: none.
   */
  withdrawn?: string[];
}

/** One field's verdict: `ok` null means not observed (a gap, named in `note`). */
export interface FieldVerdict {
  field: VerifyField;
  desired: Json;
  observed: Json;
  ok: boolean | null;
  /** The difference in words when `ok` is false, or why it was not observed when null. */
  note: string | null;
}

/** One lane's verdict: passed when no observed field differs. */
export interface LaneVerdict {
  lane: string;
  ok: boolean;
  fields: FieldVerdict[];
  /** Where the target fields came from, for the record (null: not asked). */
  target_source: TargetObservation["source"] | null;
}

/**
 * A recovery verification on the release (`Release.verification`): the latest one. `trigger`:
 * `compensation` (the undo ended; the release is `compensating` until it passes) or `operator`
 * (`baton verify`). `desired_from`: `baseline` after an undo, `manifest` for a succeeded release.
 */
export interface RecoveryVerification {
  /** 1-based; the outcome must carry the same seq and generation (rule 1). */
  seq: number;
  generation: number;
  trigger: "compensation" | "operator";
  requested_by: string;
  requested_at: number;
  desired_from: "baseline" | "manifest";
  state: "verifying" | "passed" | "failed";
  /** Reads made (a read error is tried again, at most `VERIFY_TRIES_MAX`). */
  tries: number;
  desired: LaneDesired[];
  /** When and by what the deciding reading was made; null while verifying. */
  at: number | null;
  by: string | null;
  lanes: LaneVerdict[];
  /** Fields that could not be observed, in words (the verification passes without them). */
  gaps: string[];
  /** One sentence: passed, or each lane and field that differs. */
  summary: string | null;
  /** Why the release was undone (its reason when the undo's verification began); kept for its end. */
  undo_reason: string | null;
}
