/**
 * The recipe: what a user writes and merges, one YAML file per model rollout (docs/glossary.md).
 * The schema is the type. Objects are strict: an unknown key is a problem, not ignored, so a
 * typo such as `helth_url` cannot silently drop a field. Cross-field rules (lanes in waves,
 * increasing traffic, weight sums) live in `contract-check.ts`.
 */
import * as z from "zod";
import {
  Capability,
  FIELD_LIMITS,
  HealthUrl,
  HostKeyPin as HostKeyPinField,
  imageRef,
  LaneId,
  ModelName,
  QueueName,
  SshHost as SshHostField,
  SshPort as SshPortField,
  SshUser as SshUserField,
} from "../protocol/fields.ts";
import { lazySchema } from "../protocol/lazy-schema.ts";
import { Conformance } from "./conformance-schema.ts";
import { Credentials } from "./credentials.ts";
import {
  DEFAULT_ROLLBACK_WINDOW,
  MAX_ROLLBACK_WINDOW_DAYS,
  rollbackWindowProblem,
} from "./duration.ts";
import { Analysis, WaveAnalysis } from "./gate/analysis.ts";
import { StopConditionInput } from "./gate/stop-condition.ts";
import { Migration } from "./migration-schema.ts";
import { MutableDependencies } from "./mutable-dependencies.ts";
import { NOTICE_KINDS } from "./notice.ts";
import { ShadowPolicy, ShadowSafe, WaveShadow } from "./shadow.ts";
import { FailurePolicy } from "./states.ts";
import {
  OnFailure,
  RerunWindow,
  Retries,
  StepTimeoutMs,
  ToolInputs,
  ToolName,
} from "./step-fields.ts";
import { Strategy } from "./strategy.ts";

export {
  HOST_KEY_FINGERPRINT_PATTERN,
  HOST_KEY_LINE_PATTERN,
  HOST_KEY_PATTERN,
  IMAGE_PATTERN,
  LANE_ID_PATTERN,
} from "../protocol/fields.ts";

/**
 * Length limits (characters). Beyond them a field is a typo or a paste accident, and every
 * runner step carries the lane's fields in its dispatch payload (GitHub caps it at 64 KiB), so
 * an oversize field would only surface as `dispatch_failed` mid-rollout. Fields the tools or
 * the control plane also read take their limits from protocol/fields.ts (host: DNS name ≤ 253,
 * RFC 1035 §2.3.4; model: the control plane's 64; health URL: deploy.sh's 400).
 */
export const RECIPE_LIMITS = {
  name: 128,
  model: FIELD_LIMITS.model,
  lane_id: FIELD_LIMITS.lane_id,
  host: FIELD_LIMITS.host,
  user: FIELD_LIMITS.user,
  queue: FIELD_LIMITS.queue,
  capability: FIELD_LIMITS.capability,
  capabilities: 64,
  health_url: FIELD_LIMITS.health_url,
  host_key: FIELD_LIMITS.host_key,
  image: FIELD_LIMITS.image,
  lanes: 256,
} as const;

/** Default ms from dispatch accepted to preflight before a runner step run is `unknown`. */
export const DEFAULT_START_DEADLINE_MS = 10 * 60_000;
/** Default ms from preflight accepted to callback before a runner step run is `unknown`. */
export const DEFAULT_CALLBACK_DEADLINE_MS = 30 * 60_000;
/** Default engine-side retries of a failed runner step (a redeploy is slow and visible). */
export const DEFAULT_RUNNER_RETRIES = 0;
/** Default engine-side retries of a failed control-plane step (keyed, cheap, idempotent). */
export const DEFAULT_CONTROL_PLANE_RETRIES = 2;

/** Default minutes a failed runner step waits for a re-run from the Actions UI. */
export const DEFAULT_RERUN_WINDOW_MINUTES = 30;

/** A per-step override of the policy; keys are step names of the catalogue. */
export const StepPolicy = lazySchema(() =>
  z
    .object({
      retries: Retries.optional(),
      on_failure: OnFailure.optional(),
      rerun_window_minutes: RerunWindow.optional(),
    })
    .strict(),
);
export type StepPolicy = z.infer<typeof StepPolicy>;

const HostKeyPin = lazySchema(() =>
  HostKeyPinField.describe(
    "Pinned host key: `SHA256:<43 base64 chars>` as `ssh-keygen -l -E sha256` prints (optionally after its type, e.g. `ssh-rsa SHA256:…`), or a known_hosts line.",
  ),
);
const SshHost = SshHostField;
const SshPort = lazySchema(() => SshPortField.default(22));
const SshUser = SshUserField;

/** A bastion in front of a lane (OpenSSH ProxyJump): host, port, user and its pinned host key. */
export const JumpHost = lazySchema(() =>
  z
    .object({
      host: SshHost.describe("DNS name or IP address of the bastion."),
      port: SshPort.describe("SSH port of the bastion (default 22)."),
      user: SshUser.describe("SSH user on the bastion (the runner's key must be authorised)."),
      host_key: HostKeyPin,
    })
    .strict(),
);
export type JumpHost = z.infer<typeof JumpHost>;

/** One serving unit: a machine attached to a queue, advertising capabilities. */
export const RecipeLane = lazySchema(() =>
  z
    .object({
      id: LaneId.describe("Lane id, unique in the recipe, e.g. lane-a."),
      host: SshHost.describe("DNS name or IP address the runner connects to over SSH."),
      port: SshPort.describe("SSH port (default 22)."),
      user: SshUser.describe("SSH user on the machine."),
      host_key: HostKeyPin,
      jump: JumpHost.optional().describe(
        "Bastion (OpenSSH ProxyJump) the runner connects through; omit when the lane is reachable directly.",
      ),
      queue: QueueName.describe("Queue the lane serves."),
      capabilities: z
        .array(Capability)
        .max(
          RECIPE_LIMITS.capabilities,
          `a lane advertises at most ${RECIPE_LIMITS.capabilities} capabilities`,
        )
        .default([])
        .describe("Capabilities advertised once the lane runs the new image."),
      health_url: HealthUrl.describe(
        "URL the smoke check probes on the lane: http(s), at most 400 characters, a DNS name or IPv4 address, letters, digits and ._~:/?&=%+- (percent-encode others).",
      ),
      failure_domain: z
        .string()
        .regex(
          /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/,
          "failure_domain must be 1–64 letters, digits, '.', '_', ':' or '-' (e.g. rack-3, eu-west-1a)",
        )
        .optional()
        .describe(
          "Rack, zone or region the lane shares with others: a parallel wave never takes every lane of one failure domain out of service at once.",
        ),
      weight: z
        .number()
        .int("weight must be a whole percent")
        .min(0, "weight must be 0..100")
        .max(100, "weight must be 0..100")
        .optional()
        .describe("Baseline traffic % of this lane; give it on every lane or none (equal split)."),
      shadow_safe: ShadowSafe.optional().describe(
        "Mirrored requests cause no side effects here (isolated cache and state namespaces, sandboxed tools, restricted egress): only such lanes take a shadow phase's traffic.",
      ),
      drill: z
        .boolean({ error: "drill must be true or false: is the lane marked for recovery drills" })
        .optional()
        .describe(
          "Marks the lane for recovery drills: a rehearsed recovery runs on lanes marked so, never on the others (default false).",
        ),
    })
    .strict(),
);
export type RecipeLane = z.infer<typeof RecipeLane>;

/** `N%` (a percent of lanes, 0..100) or a whole count of lanes (at least `min`). */
export const PERCENT_PATTERN = /^(100|[1-9]?[0-9])%$/;
/** `N%` from 1% to 100% (a limit that must let at least one lane go). */
const PERCENT_PATTERN_FROM_1 = /^(100|[1-9][0-9]?)%$/;

/**
 * A number of lanes as a recipe writes it: a whole count (e.g. `5`) or a percent string of
 * the lanes it applies to (e.g. `"25%"`). Resolved to a count by `resolveLaneCount`.
 */
function LaneCount(field: string, min = 1) {
  return z.union(
    [
      z
        .number()
        .int(`${field} must be a whole number of lanes or a percent such as "25%"`)
        .min(min, `${field} must be at least ${min}`)
        .max(RECIPE_LIMITS.lanes, `${field} must be at most ${RECIPE_LIMITS.lanes}`),
      z
        .string()
        .regex(
          min >= 1 ? PERCENT_PATTERN_FROM_1 : PERCENT_PATTERN,
          `${field} must be a percent from ${min >= 1 ? 1 : 0}% to 100% (e.g. "25%")`,
        ),
    ],
    { error: `${field} must be a whole number of lanes (e.g. 5) or a percent (e.g. "25%")` },
  );
}

/**
 * A lane count or percent resolved against `of` lanes: counts as written, percents of `of`
 * rounded `down` (max_unavailable: never more than declared) or up (min_serving: never fewer).
 */
export function resolveLaneCount(v: number | string, of: number, round: "down" | "up"): number {
  if (typeof v === "number") return v;
  const pct = Number(v.slice(0, -1));
  return round === "down" ? Math.floor((of * pct) / 100) : Math.ceil((of * pct) / 100);
}

/** How a release widens to the next wave (docs/lifecycle.md "Manual promotion"). */
export const Promotion = lazySchema(() =>
  z.enum(["auto", "manual"], {
    error:
      "promotion must be auto (widen when the wave and its gate are done) or manual (wait for baton promote)",
  }),
);

/** Lanes released together, and the absolute traffic % on the lanes deployed so far. */
export const RecipeWave = lazySchema(() =>
  z
    .object({
      lanes: z
        .array(
          z.string().max(RECIPE_LIMITS.lane_id, "a wave names lane ids (at most 64 characters)"),
        )
        .min(1, "a wave must name at least one lane")
        .max(RECIPE_LIMITS.lanes, `a wave names at most ${RECIPE_LIMITS.lanes} lanes`)
        .describe("Lane ids deployed in this wave."),
      traffic: z
        .number()
        .int("traffic must be a whole percent")
        .min(0, "traffic must be 0..100 (a percent)")
        .max(100, "traffic must be 0..100 (a percent)")
        .optional()
        .describe(
          "Absolute % of the model's traffic on all lanes deployed so far; required under strategy canary (the default), absent under rolling; under blue_green only on a wave before the last (1-99: a concurrent-traffic canary phase).",
        ),
      analysis: WaveAnalysis.optional().describe(
        "This wave's gate: fields replacing the recipe's `analysis`, or false for no gate.",
      ),
      max_unavailable: LaneCount("max_unavailable")
        .optional()
        .describe(
          "Lanes of this wave out of service (redeploying) at once: a count (e.g. 5) or a percent of the wave's lanes (e.g. 25%). Absent or 1: one lane at a time.",
        ),
      promotion: Promotion.optional().describe(
        "How the release widens past this wave: `manual` waits for an operator's promote before the next wave begins; `auto` goes on (after its gate, if any). Default: the recipe's `promotion`.",
      ),
      shadow: WaveShadow.optional().describe(
        "Makes this wave (traffic 0, before any exposure) a shadow phase: the router mirrors at most `share`% of the model's requests, at most `rate_per_s` a second, to its shadow-safe lanes and discards their answers.",
      ),
    })
    .strict(),
);
export type RecipeWave = z.infer<typeof RecipeWave>;

/**
 * Recovery classes (docs/recipes.md "Recovery class"): what undoing a release of this recipe
 * takes. `reversible`: traffic rollback (compensation) restores service (the default when a
 * recipe declares none). `recoverable`: compensation is not enough on its own; the recipe's
 * `restore` names the action that must follow it. `roll_forward_only`: after the step named by
 * `unsafe_after` may have taken effect, rollback is unsafe: the engine does not compensate and
 * holds the release for a roll forward.
 */
export const RECOVERY_CLASSES = ["reversible", "recoverable", "roll_forward_only"] as const;
export type RecoveryClass = (typeof RECOVERY_CLASSES)[number];

/** The step after which rollback is unsafe: a lane step with its lane, or a wave step with its wave. */
export const UnsafeAfter = lazySchema(() =>
  z
    .object({
      step: z
        .string()
        .max(64)
        .describe(
          "Step name from the step table (e.g. attach_queue_lane, set_traffic; docs/recipes.md).",
        ),
      lane: z
        .string()
        .max(RECIPE_LIMITS.lane_id)
        .optional()
        .describe("Lane of a lane step (exclude_lane … include_lane)."),
      wave: z
        .number()
        .int("unsafe_after.wave must be a whole wave number (1 = the first wave)")
        .min(1, "unsafe_after.wave counts from 1 (the first wave)")
        .max(64, "unsafe_after.wave must be at most 64")
        .optional()
        .describe(
          "Wave (1-based) of a wave step (drain_wave, set_traffic, assert_traffic_observed).",
        ),
    })
    .strict(),
);
export type UnsafeAfter = z.infer<typeof UnsafeAfter>;

/**
 * Built-in steps a custom step may be placed before or after (docs/recipes.md "Custom
 * steps"): the lane steps (`exclude_lane` … `include_lane`, once per lane) and the wave steps
 * (`drain_wave`, `set_traffic`, `assert_traffic_observed`, once per wave).
 */
export const CUSTOM_STEP_ANCHORS = [
  "drain_wave",
  "exclude_lane",
  "attach_queue_lane",
  "assert_smoke_passed",
  "advertise_capabilities",
  "include_lane",
  "set_traffic",
  "assert_traffic_observed",
] as const;
export type CustomStepAnchor = (typeof CUSTOM_STEP_ANCHORS)[number];

/** Names a custom step can take: its step name in the table, the dashboard, the CLI and the record. */
export const CUSTOM_STEP_NAME = /^[a-z][a-z0-9_]{0,47}$/;

const Anchor = lazySchema(() =>
  z.enum(CUSTOM_STEP_ANCHORS, {
    error: `a custom step is placed before or after one of ${CUSTOM_STEP_ANCHORS.join(", ")}`,
  }),
);

/**
 * Where a custom step runs: right before or right after one built-in step (exactly one of
 * `before`/`after`), in the waves listed (1-based; default every wave), for the lanes listed
 * (default every lane of those waves). Extensible: later placement forms add fields here.
 */
export const CustomStepPlacement = lazySchema(() =>
  z
    .object({
      before: Anchor.optional().describe("The built-in step this step runs right before."),
      after: Anchor.optional().describe("The built-in step this step runs right after."),
      waves: z
        .array(
          z
            .number()
            .int("placement.waves lists whole wave numbers (1 = the first wave)")
            .min(1, "placement.waves counts from 1 (the first wave)")
            .max(64, "placement.waves lists waves 1 to 64"),
        )
        .min(1, "placement.waves lists at least one wave (leave it out for every wave)")
        .max(64)
        .optional()
        .describe("Waves (1-based) the step runs in; default every wave."),
      lanes: z
        .array(z.string().max(RECIPE_LIMITS.lane_id, "placement.lanes lists lane ids"))
        .min(1, "placement.lanes lists at least one lane (leave it out for every lane)")
        .max(RECIPE_LIMITS.lanes)
        .optional()
        .describe("Lanes the step runs for; default every lane of its waves."),
    })
    .strict(),
);
export type CustomStepPlacement = z.infer<typeof CustomStepPlacement>;

/**
 * A step pair the recipe declares (docs/recipes.md "Custom steps"): an allowlisted runner tool
 * forward, its compensating tool backward (or `irreversible: true`: a recovery boundary, after
 * which the release rolls forward only). Runs once per lane it is placed for, through the same
 * runner protocol as the built-in runner steps.
 */
/**
 * The restore a `recoverable` recipe runs after its traffic rollback (docs/recovery-actions.md
 * "Restore state"): an allowlisted runner tool, dispatched and called back like any runner
 * step, with `inputs` beside the restore point it is asked for.
 */
export const RestoreState = lazySchema(() =>
  z
    .object({
      tool: ToolName.describe("Allowlisted runner tool that restores the state to a named point."),
      inputs: ToolInputs.optional().describe(
        "Arguments for the tool (e.g. which database and table), passed as `inputs`.",
      ),
      point: z
        .string()
        .regex(
          /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/,
          "a restore point is 1-128 letters, digits, '.', '_', ':' or '-' (e.g. latest, snap-2041)",
        )
        .optional()
        .describe("The restore point the automatic restore asks for (default `latest`)."),
    })
    .strict(),
);
export type RestoreState = z.infer<typeof RestoreState>;

export const CustomStep = lazySchema(() =>
  z
    .object({
      name: z
        .string()
        .regex(
          CUSTOM_STEP_NAME,
          "a custom step name is 1-48 lowercase letters, digits and '_', starting with a letter (e.g. warm_cache)",
        )
        .describe("Step name in the table, the dashboard, the CLI and the record."),
      forward: ToolName.describe("Allowlisted runner tool that does the step."),
      backward: ToolName.optional().describe(
        "Allowlisted runner tool that undoes it during compensation; required unless `irreversible`.",
      ),
      irreversible: z
        .boolean()
        .optional()
        .describe(
          "true: the step cannot be undone; once it may have taken effect the release rolls forward only (a recovery boundary).",
        ),
      placement: CustomStepPlacement.describe("Where in the step table the step runs."),
      inputs: ToolInputs.optional().describe(
        "Arguments for both tools, passed as `inputs` beside the lane and the images.",
      ),
      timeout_ms: StepTimeoutMs.optional().describe(
        "ms from preflight accepted to callback before a run of the step is unknown (default deadlines.callback_ms).",
      ),
      retries: Retries.optional(),
      on_failure: OnFailure.optional(),
      rerun_window_minutes: RerunWindow.optional(),
      needs_drained: z
        .boolean()
        .optional()
        .describe(
          "true: the step must run while its lane serves no traffic (between exclude_lane and include_lane); the contract check refuses another placement.",
        ),
    })
    .strict(),
);
export type CustomStep = z.infer<typeof CustomStep>;

/** The user's rollout description (docs/glossary.md recipe). Input of the contract check. */
export const Recipe = lazySchema(() =>
  z
    .object({
      name: z
        .string()
        .regex(
          /^[a-z0-9][a-z0-9._-]{0,127}$/,
          "name must be 1–128 lowercase letters, digits, '.', '_' or '-'",
        )
        .describe("Recipe name, e.g. summarizer-v7-rollout."),
      model: ModelName.describe(
        "Model being rolled out, as the control plane names it: 1–64 letters, digits, '.', '_', ':' or '-'.",
      ),
      image: imageRef("image").describe(
        "New image, pinned by digest: registry/name[:tag]@sha256:<64 hex> (name lowercase).",
      ),
      previous_image: imageRef("previous_image").describe(
        "Image the lanes run now, pinned by digest; restored on compensation.",
      ),
      tool_revision: z
        .string()
        .regex(
          /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/,
          "tool_revision must be a full commit sha (40 or 64 hex)",
        )
        .optional()
        .describe("Commit sha the release tools must run from (preflight refuses others)."),
      environment: z
        .string()
        .regex(
          /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,254}$/,
          "environment must be a GitHub environment name: 1-255 letters, digits, space, '.', '_' or '-' (e.g. production)",
        )
        .optional()
        .describe(
          "GitHub environment the release's deployment shows under (default: the engine's BATON_GITHUB_DEPLOYMENTS).",
        ),
      recovery_class: z
        .enum(RECOVERY_CLASSES, {
          error: `recovery_class must be one of ${RECOVERY_CLASSES.join(", ")}`,
        })
        .optional()
        .describe(
          "What undoing this rollout takes: reversible (default: traffic rollback restores service), recoverable (a named restore action must follow; give `restore`), roll_forward_only (rollback is unsafe after `unsafe_after`).",
        ),
      unsafe_after: UnsafeAfter.optional().describe(
        "roll_forward_only: the step after which rollback is unsafe; once it may have taken effect the engine does not compensate.",
      ),
      restore: z
        .string()
        .min(1, "restore must name the action")
        .max(500, "restore must be at most 500 characters")
        .optional()
        .describe(
          "recoverable: the restore or compensate action that must follow a traffic rollback (what an operator runs, e.g. a runbook command).",
        ),
      strategy: Strategy.optional(),
      restore_state: RestoreState.optional().describe(
        'recoverable: the allowlisted runner tool that restores persisted state after the traffic rollback, reporting the restore point and the data lost (docs/recovery-actions.md "Restore state").',
      ),
      custom_steps: z
        .array(CustomStep)
        .max(32, "a recipe declares at most 32 custom steps")
        .optional()
        .describe("Steps of the recipe's own, each a forward/backward pair of allowlisted tools."),
      conformance: Conformance.optional(),
      migration: Migration.optional().describe(
        'Expand → migrate → contract of a schema or cache change (docs/recipes.md "Migrations").',
      ),
      shadow: ShadowPolicy.optional().describe(
        "`never`: this model's requests must not be mirrored, and the contract check refuses any shadow phase; `allowed` (default).",
      ),
      lanes: z
        .array(RecipeLane)
        .min(1, "a recipe needs at least one lane")
        .max(RECIPE_LIMITS.lanes, `a recipe has at most ${RECIPE_LIMITS.lanes} lanes`),
      rollout: z
        .object({
          waves: z.array(RecipeWave).min(1, "a rollout needs at least one wave").max(64),
        })
        .strict(),
      promotion: Promotion.optional().describe(
        "How the release widens from each wave to the next: `manual` waits for an operator's promote after every wave but the last; `auto` (default) goes on by itself (after the wave's gate, if any). A wave's own `promotion` overrides it.",
      ),
      min_serving: LaneCount("min_serving", 0)
        .optional()
        .describe(
          "Lanes of the model that stay in service (not excluded) at every instant: a count or a percent of the recipe's lanes (e.g. 60%). Bounds how many lanes redeploy at once.",
        ),
      analysis: Analysis.optional().describe(
        "Evidence gate for every wave with 0 < traffic < 100 (docs/gate.md).",
      ),
      stop_condition: StopConditionInput.optional(),
      // Mutable dependencies (domain/mutable-dependencies.ts: schema, cross-field rules, drift).
      mutable_dependencies: MutableDependencies.optional(),
      // Credentials by reference only (domain/credentials.ts: schema, secret refusal, revocation).
      credentials: Credentials.optional(),
      policy: z
        .object({
          retries: Retries.optional(),
          on_failure: OnFailure.default(FailurePolicy.compensate),
          rerun_window_minutes: RerunWindow.default(DEFAULT_RERUN_WINDOW_MINUTES),
          drill_max_age_days: z
            .number()
            .int()
            .min(1, "drill_max_age_days must be at least 1")
            .max(3650, "drill_max_age_days must be at most 3650")
            .optional()
            .describe(
              'How old (days) the model\'s last passed recovery drill may be when a release starts (docs/recovery-actions.md "Drills").',
            ),
          drill_stale: z
            .enum(["warn", "refuse"], { error: "drill_stale must be warn or refuse" })
            .optional()
            .describe(
              "With drill_max_age_days: warn (default: the release starts, its history says so) or refuse the start.",
            ),
          drill_every_days: z
            .number()
            .int()
            .min(1, "drill_every_days must be at least 1")
            .max(3650, "drill_every_days must be at most 3650")
            .optional()
            .describe(
              'How often (days) the model\'s recovery is rehearsed: the engine raises a "drill due" notice once its last passed drill is older (docs/recovery-actions.md "The drill schedule").',
            ),
          rollback_window: z
            .string()
            .superRefine((v, ctx) => {
              const problem = rollbackWindowProblem(v);
              if (problem) ctx.addIssue({ code: "custom", message: problem });
            })
            .optional()
            .describe(
              `How long after a release succeeded \`baton rollback\` to its predecessor is admitted (default ${DEFAULT_ROLLBACK_WINDOW}, at most ${MAX_ROLLBACK_WINDOW_DAYS}d); a migration's contract waits for it to close.`,
            ),
          steps: z
            .object({
              assert_conformance_passed: StepPolicy.optional(),
              drain_wave: StepPolicy.optional(),
              exclude_lane: StepPolicy.optional(),
              attach_queue_lane: StepPolicy.optional(),
              assert_smoke_passed: StepPolicy.optional(),
              advertise_capabilities: StepPolicy.optional(),
              include_lane: StepPolicy.optional(),
              set_traffic: StepPolicy.optional(),
              assert_traffic_observed: StepPolicy.optional(),
              assert_check_passed: StepPolicy.optional(),
            })
            .strict()
            .default({}),
        })
        .strict()
        .default({
          on_failure: FailurePolicy.compensate,
          rerun_window_minutes: DEFAULT_RERUN_WINDOW_MINUTES,
          steps: {},
        }),
      deadlines: z
        .object({
          start_ms: z
            .number()
            .int()
            .min(10_000, "start_ms must be at least 10000 (10 s)")
            .max(86_400_000, "start_ms must be at most 86400000 (24 h)")
            .default(DEFAULT_START_DEADLINE_MS),
          callback_ms: z
            .number()
            .int()
            .min(10_000, "callback_ms must be at least 10000 (10 s)")
            .max(86_400_000, "callback_ms must be at most 86400000 (24 h)")
            .default(DEFAULT_CALLBACK_DEADLINE_MS),
        })
        .strict()
        .default({
          start_ms: DEFAULT_START_DEADLINE_MS,
          callback_ms: DEFAULT_CALLBACK_DEADLINE_MS,
        }),
      notify: z
        .object({
          on: z
            .array(
              z.enum(NOTICE_KINDS, {
                error: `notify.on lists notice kinds: ${NOTICE_KINDS.join(", ")}`,
              }),
            )
            .max(NOTICE_KINDS.length)
            .optional()
            .describe("Notice kinds sent for this recipe's releases (default: the engine's list)."),
          channels: z
            .array(
              z.enum(["webhook", "slack", "github"], {
                error: "notify.channels lists engine channels: webhook, slack, github",
              }),
            )
            .max(3)
            .optional()
            .describe("Engine channels used for this recipe (default: every configured one)."),
        })
        .strict()
        .optional()
        .describe("Who is told about this recipe's releases; the channels are set on the engine."),
    })
    .strict()
    .describe("A Baton recipe: one model rollout over lanes in waves."),
);
/** A recipe after parsing: defaults filled. */
export type Recipe = z.infer<typeof Recipe>;
/** A recipe as written: defaulted fields optional. */
export type RecipeInput = z.input<typeof Recipe>;
