/**
 * The shared shapes of the domain: manifest, release, step runs, events, effects, history.
 * Pure data; no I/O. Times are epoch milliseconds (number). Percents are integers 0–100.
 */

import type { ControlPlaneOp } from "../protocol/control-plane.ts";
import type { AdmissionReport } from "./admission.ts";
import type { CredentialRef } from "./credentials.ts";
import type { Problem } from "./errors.ts";
import type { Analysis } from "./gate/analysis.ts";
import type { GateDecision, GatePhase } from "./gate/decide.ts";
import type { GateEvidence, MetricEvidence } from "./gate/evidence.ts";
import type { StopConditionInput } from "./gate/stop-condition.ts";
import type { GateProgress } from "./gate-progress.ts";
import type { Json } from "./json.ts";
import type { ManifestMigration, MigrationStep } from "./migration-schema.ts";
import type { MutableDependency } from "./mutable-dependencies.ts";
import type { Notice, NoticeKind } from "./notice.ts";
import type { PrerequisiteCheck, PrerequisiteReport } from "./prerequisite-checks.ts";
import type { RecoveryClass } from "./recipe.ts";
import type { FailingCheck } from "./result-evidence.ts";
import type { SourcePosition } from "./source-order.ts";
import type { Direction, FailurePolicy, ReleaseState, StepKind, StepRunState } from "./states.ts";
import type {
  LaneDesired,
  RecoveryVerification,
  VerificationReading,
} from "./verification-shapes.ts";

export type { Json } from "./json.ts";

// ---------------------------------------------------------------- manifest

/** One serving unit (docs/glossary.md lane), as compiled into the manifest. */
export interface ManifestLane {
  id: string;
  host: string;
  port: number;
  user: string;
  /** OpenSSH `SHA256:…` fingerprint or a known_hosts line. */
  host_key: string;
  /** Bastion the runner connects through (OpenSSH ProxyJump); absent = direct. */
  jump?: { host: string; port: number; user: string; host_key: string };
  queue: string;
  capabilities: string[];
  health_url: string;
  /** Traffic weight (%) before the release starts. */
  baseline_weight: number;
  /** Rack, zone or region (recipe `failure_domain`); absent = a domain of its own. */
  failure_domain?: string;
  /**
   * Environment the candidate's container is given on this lane: the `shadow_safe`
   * declaration (`shadowEnv` in domain/shadow.ts); absent when the lane declares none.
   */
  shadow_env?: Record<string, string>;
  /** Marked for recovery drills (recipe `drill: true`); absent otherwise. */
  drill?: true;
}

/** A control-plane request (defined with the wire contract in protocol/control-plane.ts). */
export type { ControlPlaneOp } from "../protocol/control-plane.ts";

/** One direction of a step: what to run and the target part of its operation key. */
export type StepAction =
  | { kind: "control_plane"; name: string; target: string; request: ControlPlaneOp }
  | { kind: "runner"; name: string; target: string; tool: string; args: Record<string, Json> };

/** One row of the step table (docs/glossary.md step). No `backward` means an assertion. */
export interface ManifestStep {
  index: number;
  /** Catalogue name of the forward action, e.g. `set_traffic`. */
  name: string;
  kind: StepKind;
  /** Lane this step concerns, if any. */
  lane: string | null;
  /** Wave number (0-based) the step belongs to. */
  wave: number;
  forward: StepAction;
  backward: StepAction | null;
  /** Retries after the first try of a failed step (engine-side re-tries, not GitHub re-runs). */
  retries: number;
  on_failure: FailurePolicy;
  /** Runner steps: ms from dispatch accepted to preflight before the step run is `unknown`. */
  start_deadline_ms: number;
  /** Runner steps: ms from preflight accepted to callback before the step run is `unknown`. */
  callback_deadline_ms: number;
  /**
   * Runner steps: ms the release waits, paused, for a re-run of a failed forward step run from
   * the Actions UI before it compensates (recipe `policy.rerun_window_minutes`). 0 or absent
   * (manifests compiled before it existed): compensate at once.
   */
  rerun_window_ms?: number;
  /**
   * Present only on a recipe's custom steps (docs/recipes.md "Custom steps"), so the
   * manifests (and digests) of recipes without them are unchanged. `irreversible`: the step
   * has no backward action and is a recovery boundary (rollback is unsafe once it may have
   * taken effect); `needs_drained`: it runs while its lane is excluded.
   */
  custom?: { irreversible?: true; needs_drained?: true; phase?: MigrationStep };
}

/** The compiled, immutable plan of one release. `manifest_digest` = sha256 of canonical JSON. */
export interface Manifest {
  v: 1;
  recipe_name: string;
  model: string;
  image: string;
  previous_image: string;
  /** Commit sha the tools must run from, or null when not pinned. */
  tool_revision: string | null;
  /**
   * The recipe's strategy (domain/strategy.ts) when it is not `canary`; absent = canary, so the
   * manifests (and digests) of canary recipes are unchanged. Under `blue_green` the manifest's
   * lanes in no wave are the blue environment.
   */
  strategy?: "rolling" | "blue_green";
  lanes: ManifestLane[];
  /** `analysis`: the gate in force for the wave (defaults filled), only on gated waves. */
  /**
   * `max_unavailable`: lanes of the wave the engine may have out of service (between their
   * `exclude_lane` and `include_lane`) at once, after the recipe's `min_serving`; present only
   * when above 1 (absent = one lane at a time, the serial walk of the table).
   */
  /**
   * `promotion`: `manual` when the release waits for an operator's `promote` after this wave,
   * before the next one widens exposure (recipe `promotion`); absent = automatic. Never on
   * the last wave.
   */
  waves: {
    lanes: string[];
    traffic: number;
    analysis?: Analysis;
    max_unavailable?: number;
    promotion?: "manual";
    /** A shadow phase's caps (recipe wave `shadow`): the wave has traffic 0. */
    shadow?: { share: number; rate_per_s: number };
  }[];
  /** Lanes of the model kept in service at every instant (recipe `min_serving`, resolved). */
  min_serving?: number;
  /**
   * The recipe's `stop_condition`, as written (docs/gate.md "The stop condition"); absent when
   * the recipe declares none (then the analysis's guardrails and SLO bounds serve, resolved by
   * `stopConditionOf`, and the manifest's digest is unchanged).
   */
  stop_condition?: StopConditionInput;
  steps: ManifestStep[];
  /** GitHub environment of the release's deployment (recipe `environment`); absent = the engine's. */
  environment?: string;
  /**
   * The recipe's recovery class (docs/recipes.md "Recovery class"); absent = `reversible`
   * (declared by no recipe field). `unsafe_after`: roll_forward_only, the step index after
   * which rollback is unsafe; `restore`: recoverable, the action that must follow a rollback.
   */
  /**
   * The recipe's `policy.drill_max_age_days` and `policy.drill_stale` (docs/recovery-actions.md
   * "Drills"); absent when it sets no age, so other manifests (and digests) are unchanged.
   */
  drill_policy?: { max_age_days: number; on_stale: "warn" | "refuse" };
  /**
   * The recipe's `policy.drill_every_days` (docs/recovery-actions.md "The drill schedule"):
   * how often, in days, the model's recovery is rehearsed; absent when it sets none.
   */
  drill_every_days?: number;
  recovery?: {
    class: RecoveryClass;
    unsafe_after?: number;
    restore?: string;
    /**
     * recoverable: the allowlisted tool the engine runs after the traffic rollback (and on
     * `restore_state`), with its inputs and the point the automatic restore asks for.
     */
    restore_state?: RestoreStateSpec;
  };
  /**
   * The recipe's `policy.rollback_window` in ms (domain/rollback-window.ts); absent when the
   * recipe declares none (the default applies; other manifests and digests are unchanged).
   */
  rollback_window_ms?: number;
  /** The recipe's migration (domain/migration.ts); absent when it declares none. */
  migration?: ManifestMigration;
  /** The recipe's `notify` (kinds and channels); absent = the engine's settings. */
  notify?: { on?: NoticeKind[]; channels?: ("webhook" | "slack" | "github")[] };
  /**
   * The recipe's mutable dependencies as written (domain/mutable-dependencies.ts); absent when it
   * declares none, so the digests of other manifests are unchanged.
   */
  mutable_dependencies?: MutableDependency[];
  /**
   * The recipe's credential references (domain/credentials.ts): where each secret lives and the
   * tool that revokes it, never a value; absent when it lists none.
   */
  credentials?: CredentialRef[];
}

// ---------------------------------------------------------------- release

/** One try of a runner step run, numbered by preflight (docs/engine.md). */
export interface Attempt {
  /** 1-based attempt number within the step run. */
  n: number;
  /** Dispatch sequence this attempt was bound under. */
  dispatch: number;
  run_id: string;
  run_attempt: number;
  sha: string;
  state: "running" | "succeeded" | "failed" | "fenced" | "unknown";
  preflight_at: number;
  callback_at: number | null;
  status: string | null;
  overall: "pass" | "fail" | null;
  /** Who ran it, from its callback (absent: not reported). */
  run_by?: RunBy;
  /**
   * True when this attempt's result files prove that no remote command ran (connect failed,
   * host key mismatch, authentication failed, bad arguments; every phase `not_run`): its
   * action did not take effect. Absent = may have taken effect.
   */
  nothing_ran?: boolean;
}

/** One execution of one step in one direction (docs/glossary.md step run). */
export interface StepRun {
  /** `sr_<release number>_<step index>_<f|b>`, see `stepRunId`. */
  id: string;
  step_index: number;
  direction: Direction;
  kind: StepKind;
  state: StepRunState;
  operation_key: string;
  /** Dispatch sequence: 1 for the first dispatch, +1 for each engine or operator retry. */
  dispatch: number;
  /** GitHub run id bound by the first accepted preflight of the current dispatch. */
  bound_run_id: string | null;
  attempts: Attempt[];
  /** Tries of the current action (dispatch sends or control-plane calls), for backoff. */
  tries: number;
  /** Engine-side retries used against `ManifestStep.retries`. */
  retries_used: number;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  last_error: string | null;
  /**
   * Epoch ms until which this failed forward runner step run waits for a re-run of its job (its
   * own re-run window); null/absent when it does not wait. The release's `rerun_deadline` is
   * the earliest of those of the step runs it waits on.
   */
  rerun_deadline?: number | null;
  /** Set by `resolve`: an operator did this backward step run's effect by hand. */
  resolved?: { actor: string; reason: string; at: number };
  /**
   * Control plane: true while an apply of this step run timed out and no apply of its key has
   * been answered 2xx since, so the timed-out request may still land later (absent = false).
   */
  apply_unanswered?: boolean;
}

/** What an operator confirmed when abandoning a release (docs/state-machine.md "Ways out"). */
export interface Abandonment {
  actor: string;
  reason: string;
  at: number;
  /** Lane id -> image the operator confirms the lane runs now, for every lane of the manifest. */
  lanes: Record<string, string>;
}

/**
 * A release held at a wave's gate (docs/gate.md "In the release"): after the wave's last step
 * (its traffic assert) the release evaluates the gate every `interval_ms` until a decision.
 */
export interface GateWait {
  /** 0-based wave index. */
  wave: number;
  /** `gate`: the wave's own analysis; `watch`: a later wave, guardrails only, for `bake_ms`. */
  phase: GatePhase;
  /** Epoch ms the wave's exposure was observed (its traffic assert succeeded). */
  since: number;
  /** Evaluations taken so far (the seq of the latest evidence; 0 before the first). */
  seq: number;
  /** Decision of the latest evaluation, `pending` before the first. */
  decision: GateDecision | "pending";
  /** Its reason, for people. */
  reason: string | null;
  /** Epoch ms of the latest evaluation, or null. */
  at: number | null;
  /**
   * Evaluations in a row, up to the latest, whose reads failed and that could not decide with
   * all their data: what `consecutive_error_limit` and `inconclusive_limit` count. Absent: none.
   */
  streak?: { errors: number; undecided: number };
  /**
   * What the latest evaluation waited for, with its figures (`gateProgress`); null/absent
   * before the first evaluation and after one that did not wait.
   */
  progress?: GateProgress | null;
}

/**
 * The stop condition's watch (docs/gate.md "The stop condition"): from the first observed
 * exposure of the candidate, the release evaluates its stop condition every `interval_ms` in
 * every state where the candidate serves traffic, counting from the latest wave's exposure.
 */
export interface StopWatch {
  /** 0-based wave whose exposure was observed last. */
  wave: number;
  /** Epoch ms that exposure was observed: counts are taken from here. */
  since: number;
  /** Evaluations taken so far (the seq of the latest); 0 before the first. */
  seq: number;
  /** Epoch ms of the latest evaluation, or null. */
  at: number | null;
  /** The latest evaluation: `ok` (nothing breached), `no_data` (a metric could not be read), `breached`. */
  status: "pending" | "ok" | "no_data" | "breached";
  /** Its reason, for people, or null. */
  reason: string | null;
  /**
   * A bake after the last wave (`stop_condition.bake_ms`): the release, every step done, stays
   * running and watched until `until` (epoch ms), then succeeds; `done` once it has.
   */
  final_bake?: { until: number; done: boolean };
}

/** One evaluation of the stop condition, as the reconciler reports it (plain JSON). */
export interface StopEvaluation {
  seq: number;
  /** Epoch ms of the read. */
  at: number;
  /** The wave and the exposure instant it counted from (the release's watch when read). */
  wave: number;
  since: number;
  breached: boolean;
  /** True when a metric had no data (not a breach; recorded). */
  no_data: boolean;
  /** For people: a breach names the metric, its value and the bound; else what was seen. */
  reason: string;
  arms: { candidate: number; control: number } | null;
  metrics: MetricEvidence[];
}

/**
 * Why a `paused` release waits for an operator's verb (docs/lifecycle.md): `pause`, an
 * operator paused it (`resume` continues); `dark`, it was deployed at 0% exposure and waits
 * before its first exposure (`release` continues); `promotion`, the recipe's
 * `promotion: manual` holds it before wave `wave` widens exposure (`promote` continues).
 */
export interface Hold {
  kind: "pause" | "dark" | "promotion";
  /** Who: the operator who paused or deployed it; `recipe` for a manual promotion. */
  actor: string;
  /** Why, for people. */
  reason: string;
  /** Epoch ms the hold began (the request; a pause takes effect as in-flight work settles). */
  at: number;
  /** promotion: the 0-based wave the release waits to begin. */
  wave?: number;
}

/** The release aggregate, persisted as one row with a conditional update on `resource_version`. */
export interface Release {
  /** `r<number>`, e.g. `r17`. */
  id: string;
  /**
   * Random identity (16 hex), unique across engine databases; sent to the control plane with
   * every write so a key reused by another database's `r<number>` is refused, not replayed.
   * Absent on releases stored before it existed (their writes carry no uid).
   */
  uid?: string;
  state: ReleaseState;
  generation: number;
  resource_version: number;
  manifest_digest: string;
  manifest: Manifest;
  /** Highest step index whose forward action may have taken effect; -1 for none. */
  high_water_mark: number;
  /** Forward: next step to run. Compensating: next step index to consider backward. */
  cursor: number;
  step_runs: StepRun[];
  /** Why the release is paused / needs an operator / failed, for people. */
  reason: string | null;
  /**
   * Epoch ms until which a `paused` release waits for a re-run of its failed forward runner
   * step run before it compensates (the re-run window); null/absent otherwise.
   */
  rerun_deadline?: number | null;
  /**
   * Why the release compensates (set when compensation begins): the release's `reason` while
   * it compensates and once it ends rolled_back, given back after an operator's retry or
   * resolve of a backward step run replaced it with the hand-over's text. Absent before
   * compensation and on releases stored before it existed.
   */
  compensation_cause?: string | null;
  /** Set when the release was `abandoned`. */
  abandoned?: Abandonment;
  /**
   * The gate the release is held at (running: evaluating; paused: inconclusive, waiting for
   * an operator's promote or abort); null/absent otherwise.
   */
  gate?: GateWait | null;
  /** The operator verb a `paused` release waits for besides abort; null/absent otherwise. */
  hold?: Hold | null;
  /**
   * The stop condition's watch, from the candidate's first observed exposure until the release
   * compensates or ends; null/absent before it, or when the release has no stop condition.
   */
  stop?: StopWatch | null;
  /**
   * `dark`: deployed with 0% exposure (`deploy`); the release holds before its first traffic
   * write above 0% until `release`, which sets `released`. Absent: exposed as it goes.
   */
  exposure?: "dark" | "released";
  /** 0-based waves an operator promoted into past a `promotion: manual` hold. */
  promoted?: number[];
  /**
   * The observed baseline: the control plane's lanes of the model as read at start (the
   * state compensation restores; docs/state-machine.md "The observed baseline"). Absent on
   * releases started without a readable control plane port (hand-built services, older rows).
   */
  baseline?: ObservedBaseline;
  /**
   * Admission evidence: the named checks passed before any step ran (docs/trust.md).
   * Absent on releases stored before admission existed.
   */
  admission?: AdmissionReport;
  /**
   * Set while a roll_forward_only release past its `unsafe_after` step is held instead of
   * compensated (docs/lifecycle.md "Recovery classes"), and kept when it then ends (abort or
   * roll forward): when, the step index, and the failure that would have compensated.
   * null/absent otherwise.
   */
  roll_forward_hold?: { at: number; unsafe_after: number; why: string } | null;
  /**
   * A recoverable release whose compensation undid what took effect (docs/lifecycle.md
   * "Recovery classes"): the recipe's `restore` action, the epoch ms the release began to wait
   * for it (`needs_operator`, traffic already rolled back), and who confirmed it was run, when
   * and what they did (`confirm_restore`; null while it waits). Kept once the release ends;
   * absent on every other release.
   */
  restore?: RestoreWait | null;
  /**
   * Set on a release a lifecycle verb started (docs/lifecycle.md): a `rollback` of the
   * succeeded release `of` back to the manifest of `manifest_of`, or a `roll_forward` past the
   * rolled-back, aborted or abandoned release `of`. Absent on releases started with `start`.
   */
  lineage?: Lineage;
  /**
   * Set on a rollback: the prerequisites asked of each lane's machine before it was admitted
   * (docs/lifecycle.md "Rollback prerequisites"). Absent on other releases.
   */
  prerequisites?: PrerequisiteReport;
  /**
   * The latest recovery verification (docs/lifecycle.md "Recovery verification"): after an
   * undo (the release stays `compensating` until it passes; a mismatch waits `needs_operator`)
   * or asked by `baton verify`. Absent when none was made.
   */
  verification?: RecoveryVerification | null;
  /**
   * The commit of the recipe repository the recipe workflow started the release from
   * (docs/lifecycle.md "Merge order is release order"). Absent on releases started otherwise.
   */
  source?: SourcePosition;
  /** Epoch ms the release became `succeeded` (its rollback window opens); absent otherwise. */
  succeeded_at?: number;
  created_at: number;
  updated_at: number;
}

/** A recipe's `restore_state`: the restore tool, its inputs, the default restore point. */
export interface RestoreStateSpec {
  tool: string;
  inputs?: Record<string, string | number | boolean>;
  point?: string;
}

/**
 * What a restore tool reported (its `restore` check in checks.json): the point restored to and
 * when that point was taken (epoch ms), the rows written after it that the restore dropped, and
 * the RPO: ms from the point to the last write before the restore (0 when nothing was lost).
 */
export interface RestoreReport {
  point: string;
  point_at: number;
  rows_lost: number;
  rpo_ms: number;
  rows_restored: number;
  /** The tool's own read-back: the restored table equals the point's (its `verify` check). */
  verified: boolean;
}

/** One run of a recipe's restore tool (`restore_state`): who asked, for which point, its outcome. */
export interface RestoreRun {
  /** `engine` for the automatic restore after the rollback, else `operator:<name>`. */
  actor: string;
  reason: string;
  /** The restore point asked for (`latest` or a named point). */
  point: string;
  at: number;
  step_run_id: string;
  /** `running` until its step run settles; then `succeeded` (with `report`) or `failed`. */
  state: "running" | "succeeded" | "failed";
  report: RestoreReport | null;
  finished_at: number | null;
  error: string | null;
}

/** The restore action a recoverable release waits for after its traffic rollback. */
export interface RestoreWait {
  /** The recipe's `restore` (what an operator runs), or the restore tool's words. */
  action: string;
  /** Epoch ms compensation ended and the wait for the restore began. */
  since: number;
  /**
   * Set by `confirm_restore` (who ran it, what they did, when, epoch ms), or by a restore tool
   * run that succeeded (actor `engine` or the operator who asked for it; reason: its report).
   */
  confirmed: { actor: string; reason: string; at: number } | null;
  /** Runs of the recipe's restore tool, oldest first (absent: it declares none or none ran). */
  runs?: RestoreRun[];
}

/** Which lifecycle verb started a release, and from which release. */
export interface Lineage {
  verb: "rollback" | "roll_forward";
  /** The release rolled back (succeeded) or rolled forward from (rolled_back, aborted, abandoned). */
  of: string;
  /** rollback: the earlier succeeded release whose admitted manifest runs again. */
  manifest_of?: string;
  /**
   * rollback of a `recoverable` release: its recipe's restore action (text). Once the rollback's
   * steps have put traffic and images back, the rollback release waits `needs_operator` for it
   * to be confirmed (`confirm_restore`) before it ends `succeeded`. Absent otherwise.
   */
  restore?: string;
  /**
   * rollback of a blue-green release: a switch back (domain/blue-green.ts), one traffic write to
   * the old environment, which still runs the previous image; no manifest runs again.
   */
  switch_back?: true;
}

/** The control plane's state of the release's lanes when it started. */
export interface ObservedBaseline {
  /** Epoch ms of the read. */
  read_at: number;
  /** One entry per recipe lane, in recipe order. Capabilities sorted. */
  lanes: {
    id: string;
    /** % of the model's traffic. */
    weight: number;
    excluded: boolean;
    capabilities: string[];
    advertised: boolean;
    /**
     * Image the lane ran (`name@sha256:…`) as the control plane reported it; null when it could
     * not tell (then compensation restores the recipe's `previous_image`). Absent on releases
     * stored before images were recorded.
     */
    image?: string | null;
  }[];
  /**
   * Digest of the manifest compiled from the recipe alone (what `baton sign` signs and
   * admission checks). `manifest_digest` is of the plan compiled against this baseline; they
   * are equal when the control plane is in the state the recipe assumes.
   */
  recipe_manifest_digest: string;
}

// ---------------------------------------------------------------- events

/** Runner preflight request, as the engine sees it after authentication. */
export interface PreflightEvent {
  type: "preflight";
  step_run_id: string;
  release_id: string;
  generation: number;
  manifest_digest: string;
  dispatch: number;
  run_id: string;
  run_attempt: number;
  sha: string;
  tool: string;
  /** sha256 hex of the payload's canonical `{tool, args, operation_key}`, sent by the runner. */
  payload_digest: string;
  /**
   * The same digest computed by the service from the engine's own record of the step run
   * (engine/src/service/payload-digest.ts) before the transition runs; never taken from the
   * request. Missing (a caller that did not compute it) refuses the preflight: fail closed.
   */
  expected_payload_digest?: string;
}

/** Runner callback, after the credential was verified over the raw body. */
export interface CallbackEvent {
  type: "callback";
  step_run_id: string;
  run_id: string;
  run_attempt: number;
  status: string;
  overall: "pass" | "fail";
  /**
   * Set by the service from checks.json (`provesNothingRan`): the result files prove no remote
   * command ran. Absent or false = the action may have taken effect.
   */
  nothing_ran?: boolean;
  /**
   * Set by the service from checks.json (`failingCheckOf`) on a `fail`: the first failing
   * check, so the step run's error (and the release's reason) names the cause.
   */
  failing_check?: FailingCheck;
  /**
   * Set by the service on the callback of a rollback's probe step (`checksFromProbe` over
   * checks.json): the three prerequisite checks of the probed lane. The transition refuses a
   * probe callback without them (fail closed).
   */
  probe_checks?: PrerequisiteCheck[];
  /**
   * Set by the service from checks.json (`restoreReportOf`) on the callback of a restore step
   * run: the point restored to and the data lost. A restore's pass without it is a failure.
   */
  restore_report?: RestoreReport;
  /**
   * Set by the service from checks.json (`reportedImages`): the images the target reported
   * running, in order. A passing step whose action names an image (`args.image`) fails when the
   * last one's digest differs (`imageMismatch`). Absent or empty = nothing to compare.
   */
  images?: string[];
  /**
   * Set by the service from checks.json when it holds checks of kind `verification` (a
   * migration's `migrate` step, domain/migration.ts): their names and which failed. A passing
   * migrate step without them, or with one failed, fails (`migrateUnverified`).
   */
  verifications?: { names: string[]; failed: string[] };
  /**
   * Who ran this attempt, as the runner reports it: `actor` started the workflow run
   * (github.actor, the same on a re-run), `triggering_actor` started this run attempt (the
   * person who re-ran the job from the Actions UI). Absent from older runners.
   */
  run_by?: RunBy;
}

/** Who ran a run attempt (GitHub logins; see `CallbackEvent.run_by`). */
export interface RunBy {
  actor?: string;
  triggering_actor?: string;
}

export type ReleaseEvent =
  | { type: "start" }
  | { type: "dispatch_accepted"; step_run_id: string; dispatch: number }
  | {
      type: "dispatch_failed";
      step_run_id: string;
      dispatch: number;
      /** true: network error / 5xx, retry the same step run; false: 4xx, definitive. */
      retryable: boolean;
      message: string;
      /**
       * Throttled (paced, or GitHub's 403/429 rate limit): not sent or not accepted. The same
       * dispatch goes again at this epoch ms and it does not count as a try.
       */
      throttled_until?: number;
    }
  | PreflightEvent
  | CallbackEvent
  | {
      type: "applied";
      step_run_id: string;
      /** ok: receiver applied (or replayed); failed: definitive refusal; unknown: not observed. */
      outcome: "ok" | "failed" | "unknown";
      message: string;
      /**
       * With `ok`: the read of the state the write changed, made right after the 2xx (a 2xx is
       * not the state). `matches` false: the control plane does not show the write (the step
       * run fails); null: the read itself failed (the step run is `unknown` and is read again).
       * The reconciler always sends it for writes; an `ok` without it (events built by hand,
       * `assert_traffic`, which is itself a read) counts as read.
       */
      read_back?: { matches: boolean | null; message: string };
    }
  | {
      type: "observed";
      step_run_id: string;
      /** Whether the control plane shows the step's target state (read after `unknown`). */
      matches: boolean | null;
      message: string;
    }
  | {
      type: "deadline";
      step_run_id: string;
      kind: DeadlineKind;
      /** Dispatch sequence / attempt the deadline was set for; stale deadlines are ignored. */
      dispatch: number;
      attempt: number;
    }
  | {
      /**
       * One gate evaluation, stored as evidence before it is applied: its binding (release,
       * generation, manifest digest, wave) must be the release's own and its seq the next.
       */
      type: "gate";
      evidence: GateEvidence;
    }
  | {
      /** One evaluation of the stop condition (docs/gate.md "The stop condition"). */
      type: "stop_check";
      generation: number;
      evaluation: StopEvaluation;
    }
  | { type: "abort"; actor: string; reason: string }
  | {
      type: "resume";
      actor: string;
      /** Why, when the operator says (optional): kept in the history. */
      reason?: string;
    }
  | {
      /** An operator pauses a running release: nothing new starts; in-flight work settles. */
      type: "pause";
      actor: string;
      reason: string;
    }
  | {
      /** First exposure of a release deployed dark (waiting at 0%): the rollout goes on. */
      type: "release";
      actor: string;
      reason: string;
    }
  | {
      /** An operator accepts the risk of a gate that ended inconclusive: the next wave begins. */
      type: "promote";
      actor: string;
      reason: string;
    }
  | {
      type: "retry";
      actor: string;
      step_run_id: string;
      /** Why, when the operator says (optional): kept in the history. */
      reason?: string;
    }
  | {
      /**
       * needs_operator, waiting for a recoverable release's restore action: the operator ran it
       * (`reason` says what and what it showed); the release ends `rolled_back`.
       */
      type: "confirm_restore";
      actor: string;
      reason: string;
    }
  | {
      /**
       * needs_operator, waiting for a recoverable release's restore, whose recipe declares a
       * restore tool: run it to `point` (default: the recipe's point, else `latest`).
       */
      type: "restore_state";
      actor: string;
      reason: string;
      point?: string;
    }
  | {
      /** needs_operator: the operator did this backward step run's effect by hand. */
      type: "resolve";
      actor: string;
      step_run_id: string;
      reason: string;
    }
  | {
      /**
       * Verify the release's lanes against what they should be (docs/lifecycle.md "Recovery
       * verification"): after an undo whose verification failed (`needs_operator`), or of a
       * `succeeded` or `rolled_back` release. The reading is an effect; `verified` its outcome.
       */
      type: "verify";
      actor: string;
      /** Why, when the operator says (optional): kept in the history. */
      reason?: string;
    }
  | {
      /** The outcome of a `verify` effect: what the control plane and the targets showed. */
      type: "verified";
      /** The verification it answers (`Release.verification.seq`) and its generation. */
      seq: number;
      generation: number;
      reading: VerificationReading;
    }
  | {
      /** needs_operator -> abandoned, once the operator confirms what every lane runs. */
      type: "abandon";
      actor: string;
      reason: string;
      /** Lane id -> image it runs now, as the operator checked on the machine. */
      lanes: Record<string, string>;
    };

/**
 * Deadlines: `start` (dispatch -> preflight), `callback` (preflight -> callback), `rerun`
 * (the end of the re-run window of a failed forward runner step run), `retry` (reserved).
 */
export type DeadlineKind = "start" | "callback" | "retry" | "rerun";

// ---------------------------------------------------------------- effects

/** The runner payload fields the engine decides; the service adds `callback_url`. */
export interface DispatchEffect {
  type: "dispatch";
  step_run_id: string;
  dispatch: number;
  operation_key: string;
  tool: string;
  args: Record<string, Json>;
  /** Release generation when the dispatch was decided (docs/state-machine.md rule 7); goes in `release.generation`. */
  generation: number;
  /** Epoch ms before which the effect must not run (backoff); null = now. */
  not_before: number | null;
}

export interface ControlPlaneEffect {
  type: "control_plane";
  step_run_id: string;
  operation_key: string;
  /** `apply` sends the keyed write; `read` observes the target after `unknown`. */
  mode: "apply" | "read";
  request: ControlPlaneOp;
  generation: number;
  not_before: number | null;
}

export interface DeadlineEffect {
  type: "deadline";
  step_run_id: string;
  kind: DeadlineKind;
  dispatch: number;
  attempt: number;
  /** Epoch ms when the deadline fires. */
  at: number;
}

/**
 * A notice for one channel (webhook, slack, github). Never emitted by the transition: the
 * service adds it beside the transition's effects, in the same commit (domain/notifications.ts).
 */
export interface NotifyEffect {
  type: "notify";
  channel: string;
  /** Stable delivery id (`<release>.<uid>.v<resource_version>.<kind>.<channel>`), for dedup. */
  delivery: string;
  notice: Notice;
  not_before: number | null;
}

/**
 * Evaluate a wave's gate once (docs/gate.md): the reconciler reads the metrics source, stores
 * the evidence and feeds it back as a `gate` event. Performs nothing external but reads.
 */
export interface GateEffect {
  type: "gate";
  /** The forward step run of the wave's last step, whose success began the gate. */
  step_run_id: string;
  wave: number;
  phase: GatePhase;
  /** The evaluation number to store (1-based within release, generation and wave). */
  seq: number;
  /** Epoch ms the wave's exposure was observed: counts are taken from here. */
  since: number;
  generation: number;
  /** Epoch ms when the evaluation is due; null = now. */
  not_before: number | null;
  /** The gate's streaks before this evaluation (`GateWait.streak`); absent: none. */
  streak?: { errors: number; undecided: number };
}

/**
 * Evaluate the release's stop condition once (docs/gate.md "The stop condition"): the
 * reconciler reads the metrics source since the release's latest observed exposure and feeds
 * the result back as a `stop_check` event. Performs nothing external but reads.
 */
export interface StopCheckEffect {
  type: "stop_check";
  /** The forward step run whose observed exposure (a traffic assert) began the watch. */
  step_run_id: string;
  /** The evaluation number (1-based within the release). */
  seq: number;
  generation: number;
  /** Epoch ms when the evaluation is due; null = now. */
  not_before: number | null;
}

/**
 * Read every lane of the release once (docs/lifecycle.md "Recovery verification"): the control
 * plane's lanes, and for each lane with `target` its machine (the engine's target probe, else the
 * lane's last runner report). The reconciler feeds the reading back as a `verified` event.
 * Performs nothing external but reads.
 */
export interface VerifyEffect {
  type: "verify";
  /** The verification it reads for (`Release.verification.seq`). */
  seq: number;
  generation: number;
  /** The lanes and the image each should run (the target is asked with it). */
  lanes: Pick<LaneDesired, "id" | "image" | "target">[];
  /** Epoch ms before which the read must not run (backoff after a read error); null = now. */
  not_before: number | null;
}

/** Effects are data (docs/state-machine.md): written to the outbox in the transition's transaction. */
export type Effect =
  | DispatchEffect
  | ControlPlaneEffect
  | DeadlineEffect
  | GateEffect
  | StopCheckEffect
  | VerifyEffect;

/**
 * One GitHub deployment status of a release (domain/deployments.ts). Never emitted by the
 * transition: the service adds it beside the transition's effects, in the same commit, and the
 * reconciler reports it through the deployments port; its outcome feeds no transition.
 */
export interface DeploymentEffect {
  type: "deployment";
  /** Stable id (`<release>.<uid>.v<resource_version>.<state>`), for logs and dedup. */
  delivery: string;
  /** What GitHub's Deployments page shows for this release from now on. */
  report: DeploymentReport;
  not_before: number | null;
}

/** A deployment status for one release, as the deployments port sends it. */
export interface DeploymentReport {
  release_id: string;
  /** The release's uid (absent on old releases): tells two releases of one id apart. */
  uid: string | null;
  /** GitHub environment name, e.g. `production`. */
  environment: string;
  /** Branch, tag or commit the deployment names (the tools' pinned revision when set). */
  ref: string;
  state: DeploymentStatusState;
  /** ≤ 140 characters (GitHub's limit). */
  description: string;
  /** The release page on the dashboard (GitHub's `log_url`). */
  log_url: string;
  recipe_name: string;
  model: string;
  image: string;
  /** Epoch ms of the transition. */
  at: number;
}

/** The deployment status states Baton posts (GitHub also knows queued, pending). */
export type DeploymentStatusState = "in_progress" | "success" | "failure" | "error" | "inactive";

/** What an outbox row holds: a transition's effect, or a notice or deployment status the service added. */
export type OutboxEffect = Effect | NotifyEffect | DeploymentEffect;

// ---------------------------------------------------------------- history

/** One line of a release's history. Refused events are kept too, with their reason. */
export interface HistoryEntry {
  release_id: string;
  at: number;
  /** Event type, or an engine note such as `transition`. */
  kind: string;
  step_run_id: string | null;
  /** `accepted` changed state; `refused` changed nothing (late, duplicate, fenced, forged…). */
  outcome: "accepted" | "refused";
  /** One sentence for people, starting with the component, e.g. `[engine] …`. */
  message: string;
  /** Event data, for the record. */
  data: Json;
}

// ---------------------------------------------------------------- transition

export type TransitionResult =
  | {
      ok: true;
      /** false when the event was recorded but changed nothing (e.g. a duplicate callback). */
      changed: boolean;
      release: Release;
      effects: Effect[];
      history: HistoryEntry[];
      /** Data for the caller's HTTP answer, e.g. the preflight's attempt number. */
      reply: Record<string, Json>;
    }
  | {
      ok: false;
      /** 409 stale / fenced / duplicate / wrong state; 422 illegal; 404 unknown step run. */
      status: 404 | 409 | 422;
      code: string;
      reason: string;
      /** The bad fields of the request, each with its fix (e.g. `body.reason`). */
      problems?: Problem[];
      history: HistoryEntry[];
    };
