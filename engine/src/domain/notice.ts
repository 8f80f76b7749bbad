/**
 * The shape of a notice (what people are told about a release's state change) and its kinds:
 * data only, so `types.ts` and `recipe.ts` can name them without importing the functions in
 * `notifications.ts` that read a release.
 */
import type { ReleaseState, StepRunState } from "./states.ts";

/**
 * What a notice is about. `paused` is a hold an operator must lift (a step's `pause` policy,
 * a lost dispatch); `waiting_for_rerun` a failed runner step waiting, paused, for a re-run
 * from the Actions UI before it compensates; `waiting_for_promotion` a gate that ended
 * inconclusive, waiting for an operator's promote or abort. `waiting`/`ended` cover release
 * states added after this table.
 */
export const NoticeKind = {
  failed: "failed",
  paused: "paused",
  waiting_for_rerun: "waiting_for_rerun",
  waiting_for_promotion: "waiting_for_promotion",
  waiting: "waiting",
  needs_operator: "needs_operator",
  succeeded: "succeeded",
  rolled_back: "rolled_back",
  aborted: "aborted",
  abandoned: "abandoned",
  ended: "ended",
  /** A finished release's lanes differ from what it left them at (docs/drift.md); once per distinct drift. */
  drift: "drift",
  /**
   * An incident naming the release's model was declared or resolved (docs/incidents.md); sent
   * once per model, on its newest release.
   */
  incident: "incident",
  /**
   * A model's recovery drill is due: its last passed drill is older than its recipe's
   * `policy.drill_every_days` (docs/recovery-actions.md "The drill schedule"); once per due
   * period, on the model's newest succeeded release.
   */
  drill_due: "drill_due",
} as const;
export type NoticeKind = (typeof NoticeKind)[keyof typeof NoticeKind];
export const NOTICE_KINDS = Object.values(NoticeKind) as [NoticeKind, ...NoticeKind[]];

/** The step a notice points at (numbers for people: 1-based). */
export interface NoticeStep {
  /** Step number, 1-based (the step table's index + 1). */
  number: number;
  name: string;
  lane: string | null;
  /** Wave number, 1-based. */
  wave: number;
  direction: "forward" | "backward";
  state: StepRunState;
  error: string | null;
}

/** One notice, as stored in the outbox and rendered by each channel's template. */
export interface Notice {
  v: 1;
  kind: NoticeKind;
  release_id: string;
  state: ReleaseState;
  previous_state: ReleaseState;
  recipe_name: string;
  model: string;
  image: string;
  previous_image: string;
  /** Why, as the release says it (kept through compensation), or null. */
  reason: string | null;
  /** Operator abort or a step's failure, when the release is undoing or undone. */
  cause: "operator_abort" | "failure" | null;
  step: NoticeStep | null;
  /** The commit the runner ran the tools from (latest attempt), or the pinned revision. */
  commit_sha: string | null;
  /** The release page on the dashboard. */
  url: string;
  /** Epoch ms of the transition. */
  at: number;
  /** One line for people, e.g. `r17 rolled back: step 9 (health_check, lane b) failed: …`. */
  summary: string;
}
