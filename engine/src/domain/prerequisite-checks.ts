/**
 * The shapes of rollback prerequisite evidence (one row per check per lane, and the report
 * stored on the release): data only, so `types.ts` can name them without importing the
 * reading and probing functions in `prerequisites.ts`.
 */

/** The checks, in the order they are listed for each lane. */
export const PREREQUISITE_CHECKS = ["lane_credentials", "image_present", "lane_capacity"] as const;
/**
 * A check of the rolled-back release itself, not of a lane: its recipe's recovery class allows
 * a rollback (a `roll_forward_only` release does not). Its row has `lane: null`.
 */
export const RECOVERY_CLASS_CHECK = "recovery_class" as const;
export type PrerequisiteCheckName =
  | (typeof PREREQUISITE_CHECKS)[number]
  | typeof RECOVERY_CLASS_CHECK;

/** One row of prerequisite evidence: one check on one lane (null: of the release itself). */
export interface PrerequisiteCheck {
  check: PrerequisiteCheckName;
  lane: string | null;
  /** `skipped`: not asked (no way to reach the lane's machine from the engine, or an earlier check failed). */
  outcome: "pass" | "fail" | "skipped";
  /** One sentence for people: what the target answered. */
  message: string;
  /** What to do when it failed; null otherwise. */
  fix: string | null;
}

/** The prerequisites of one rollback, stored on the release it started (`Release.prerequisites`). */
export interface PrerequisiteReport {
  ok: boolean;
  /** Epoch ms when the answers were in. */
  at: number;
  /** The image the rollback deploys (the previous admitted manifest's). */
  image: string;
  checks: PrerequisiteCheck[];
  /**
   * Who asks the lanes: `engine` (its `TargetProbe`, before the release exists; the default
   * when absent) or `runner` (the rollback's first steps, one read-only probe step per lane:
   * the lane rows stay `skipped` "asking: …" until each probe's callback answers them).
   */
  asked_by?: "engine" | "runner";
}
