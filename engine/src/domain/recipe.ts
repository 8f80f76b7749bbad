/**
 * The recipe: what a user writes and merges, one YAML file per model rollout (docs/glossary.md).
 * The schema is the type. Objects are strict: an unknown key is a problem, not ignored, so a
 * typo such as `helth_url` cannot silently drop a field. Cross-field rules (lanes in waves,
 * increasing traffic, weight sums) live in `contract-check.ts`.
 */
import { z } from "zod";
import { Analysis, WaveAnalysis } from "./gate/analysis.ts";
import { NOTICE_KINDS } from "./notifications.ts";
import { FailurePolicy } from "./states.ts";

/** `name@sha256:<64 lowercase hex>`; a tag before the digest is allowed and ignored by pulls. */
export const IMAGE_PATTERN = /^[a-z0-9][A-Za-z0-9._/:-]*@sha256:[a-f0-9]{64}$/;
/**
 * OpenSSH fingerprint as `ssh-keygen -l -E sha256` prints it (43 base64 chars, no padding),
 * optionally prefixed by the key type (`ssh-rsa SHA256:…`), which lets the runner ask the host
 * for exactly that key type (a bare fingerprint is tried against each type the host offers).
 */
export const HOST_KEY_FINGERPRINT_PATTERN =
  /^(?:(?:ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(?:256|384|521)) )?SHA256:[A-Za-z0-9+/]{43}$/;
/** A known_hosts line (`[hosts] <type> <base64> [comment]`), hosts optional; no markers. */
export const HOST_KEY_LINE_PATTERN =
  /^(?:[^\s@#][^\s]*\s+)?(?:ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(?:256|384|521)|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com)\s+AAAA[A-Za-z0-9+/]+={0,3}(?:\s+\S.*)?$/;
/** Either form of host key pin, as one pattern (for the JSON Schema). */
export const HOST_KEY_PATTERN = new RegExp(
  `${HOST_KEY_FINGERPRINT_PATTERN.source}|${HOST_KEY_LINE_PATTERN.source}`,
);
/** Lane ids appear in operation keys (`lane=<id>:…`), so no `:`, `=` or spaces. */
export const LANE_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/**
 * Length limits (characters). Beyond them a field is a typo or a paste accident, and every
 * runner step carries the lane's fields in its dispatch payload (GitHub caps it at 64 KiB), so
 * an oversize field would only surface as `dispatch_failed` mid-rollout. Sources: host — DNS
 * name ≤ 253 (RFC 1035 §2.3.4); URL — 2048, the practical limit of browsers and proxies.
 */
export const RECIPE_LIMITS = {
  name: 128,
  model: 128,
  lane_id: 64,
  host: 253,
  user: 64,
  queue: 128,
  capability: 64,
  capabilities: 64,
  health_url: 2048,
  host_key: 16_384,
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

const Retries = z
  .number()
  .int("retries must be a whole number")
  .min(0, "retries must be 0 or more")
  .max(10, "retries must be 10 or fewer")
  .describe("Engine-side retries after the first try of a failed step.");
const OnFailure = z
  .enum([FailurePolicy.compensate, FailurePolicy.pause])
  .describe("compensate: walk the table backwards (default); pause: hold for an operator.");

/** Default minutes a failed runner step waits for a re-run from the Actions UI. */
export const DEFAULT_RERUN_WINDOW_MINUTES = 30;
const RerunWindow = z
  .number()
  .int("rerun_window_minutes must be a whole number of minutes")
  .min(0, "rerun_window_minutes must be 0 (compensate at once) or more")
  .max(1440, "rerun_window_minutes must be at most 1440 (24 h)")
  .describe(
    "Minutes a failed runner step waits, paused, for a re-run of its job from the Actions UI before the release compensates; 0 = compensate at once.",
  );

/** A per-step override of the policy; keys are step names of the catalogue. */
export const StepPolicy = z
  .object({
    retries: Retries.optional(),
    on_failure: OnFailure.optional(),
    rerun_window_minutes: RerunWindow.optional(),
  })
  .strict();
export type StepPolicy = z.infer<typeof StepPolicy>;

const HostKeyPin = z
  .string()
  .max(RECIPE_LIMITS.host_key, `host_key must be at most ${RECIPE_LIMITS.host_key} characters`)
  .regex(
    HOST_KEY_PATTERN,
    "host_key must be an OpenSSH SHA256:… fingerprint or a known_hosts line (a fingerprint may follow its key type: ssh-rsa SHA256:…)",
  )
  .describe(
    "Pinned host key: `SHA256:<43 base64 chars>` as `ssh-keygen -l -E sha256` prints (optionally after its type, e.g. `ssh-rsa SHA256:…`), or a known_hosts line.",
  );
const SshHost = z
  .string()
  .min(1, "host must not be empty")
  .max(RECIPE_LIMITS.host, `host must be at most ${RECIPE_LIMITS.host} characters`)
  .regex(/^[A-Za-z0-9.:-]+$/, "host must be a DNS name or an IP address (IPv6 without brackets)");
const SshPort = z
  .number()
  .int("port must be a whole number")
  .min(1, "port must be 1..65535")
  .max(65535, "port must be 1..65535")
  .default(22);
const SshUser = z
  .string()
  .max(RECIPE_LIMITS.user, `user must be at most ${RECIPE_LIMITS.user} characters`)
  .regex(/^[a-z_][a-z0-9_-]{0,31}$/, "user must be a POSIX user name");

/** A bastion in front of a lane (OpenSSH ProxyJump): host, port, user and its pinned host key. */
export const JumpHost = z
  .object({
    host: SshHost.describe("DNS name or IP address of the bastion."),
    port: SshPort.describe("SSH port of the bastion (default 22)."),
    user: SshUser.describe("SSH user on the bastion (the runner's key must be authorised)."),
    host_key: HostKeyPin,
  })
  .strict();
export type JumpHost = z.infer<typeof JumpHost>;

/** One serving unit: a machine attached to a queue, advertising capabilities. */
export const RecipeLane = z
  .object({
    id: z
      .string()
      .max(RECIPE_LIMITS.lane_id, `lane id must be at most ${RECIPE_LIMITS.lane_id} characters`)
      .regex(LANE_ID_PATTERN, "lane id must be lowercase letters, digits, '.', '_' or '-'")
      .describe("Lane id, unique in the recipe, e.g. lane-a."),
    host: z
      .string()
      .min(1, "host must not be empty")
      .max(RECIPE_LIMITS.host, `host must be at most ${RECIPE_LIMITS.host} characters`)
      .regex(
        /^[A-Za-z0-9.:-]+$/,
        "host must be a DNS name or an IP address (IPv6 without brackets)",
      )
      .describe("DNS name or IP address the runner connects to over SSH."),
    port: z
      .number()
      .int("port must be a whole number")
      .min(1, "port must be 1..65535")
      .max(65535, "port must be 1..65535")
      .default(22)
      .describe("SSH port (default 22)."),
    user: z
      .string()
      .max(RECIPE_LIMITS.user, `user must be at most ${RECIPE_LIMITS.user} characters`)
      .regex(/^[a-z_][a-z0-9_-]{0,31}$/, "user must be a POSIX user name")
      .describe("SSH user on the machine."),
    host_key: HostKeyPin,
    jump: JumpHost.optional().describe(
      "Bastion (OpenSSH ProxyJump) the runner connects through; omit when the lane is reachable directly.",
    ),
    queue: z
      .string()
      .min(1, "queue must not be empty")
      .max(RECIPE_LIMITS.queue, `queue must be at most ${RECIPE_LIMITS.queue} characters`)
      .describe("Queue the lane serves."),
    capabilities: z
      .array(
        z
          .string()
          .min(1, "a capability must not be empty")
          .max(
            RECIPE_LIMITS.capability,
            `a capability must be at most ${RECIPE_LIMITS.capability} characters`,
          ),
      )
      .max(
        RECIPE_LIMITS.capabilities,
        `a lane advertises at most ${RECIPE_LIMITS.capabilities} capabilities`,
      )
      .default([])
      .describe("Capabilities advertised once the lane runs the new image."),
    health_url: z
      .url({ protocol: /^https?$/, error: "health_url must be an http(s) URL" })
      .max(
        RECIPE_LIMITS.health_url,
        `health_url must be at most ${RECIPE_LIMITS.health_url} characters`,
      )
      .describe("URL the smoke check probes on the lane."),
    weight: z
      .number()
      .int("weight must be a whole percent")
      .min(0, "weight must be 0..100")
      .max(100, "weight must be 0..100")
      .optional()
      .describe("Baseline traffic % of this lane; give it on every lane or none (equal split)."),
  })
  .strict();
export type RecipeLane = z.infer<typeof RecipeLane>;

/** Lanes released together, and the absolute traffic % on the lanes deployed so far. */
export const RecipeWave = z
  .object({
    lanes: z
      .array(z.string().max(RECIPE_LIMITS.lane_id, "a wave names lane ids (at most 64 characters)"))
      .min(1, "a wave must name at least one lane")
      .max(RECIPE_LIMITS.lanes, `a wave names at most ${RECIPE_LIMITS.lanes} lanes`)
      .describe("Lane ids deployed in this wave."),
    traffic: z
      .number()
      .int("traffic must be a whole percent")
      .min(0, "traffic must be 0..100 (a percent)")
      .max(100, "traffic must be 0..100 (a percent)")
      .describe("Absolute % of the model's traffic on all lanes deployed so far."),
    analysis: WaveAnalysis.optional().describe(
      "This wave's gate: fields replacing the recipe's `analysis`, or false for no gate.",
    ),
  })
  .strict();
export type RecipeWave = z.infer<typeof RecipeWave>;

/** The user's rollout description (docs/glossary.md recipe). Input of the contract check. */
export const Recipe = z
  .object({
    name: z
      .string()
      .regex(
        /^[a-z0-9][a-z0-9._-]{0,127}$/,
        "name must be 1–128 lowercase letters, digits, '.', '_' or '-'",
      )
      .describe("Recipe name, e.g. summarizer-v7-rollout."),
    model: z
      .string()
      .min(1, "model must not be empty")
      .max(RECIPE_LIMITS.model, `model must be at most ${RECIPE_LIMITS.model} characters`)
      .describe("Model being rolled out."),
    image: z
      .string()
      .regex(IMAGE_PATTERN, "image must be pinned by digest: name@sha256:<64 hex>")
      .describe("New image, pinned by digest: registry/name@sha256:<64 hex>."),
    previous_image: z
      .string()
      .regex(IMAGE_PATTERN, "previous_image must be pinned by digest: name@sha256:<64 hex>")
      .describe("Image the lanes run now, pinned by digest; restored on compensation."),
    tool_revision: z
      .string()
      .regex(
        /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/,
        "tool_revision must be a full commit sha (40 or 64 hex)",
      )
      .optional()
      .describe("Commit sha the release tools must run from (preflight refuses others)."),
    lanes: z
      .array(RecipeLane)
      .min(1, "a recipe needs at least one lane")
      .max(RECIPE_LIMITS.lanes, `a recipe has at most ${RECIPE_LIMITS.lanes} lanes`),
    rollout: z
      .object({
        waves: z.array(RecipeWave).min(1, "a rollout needs at least one wave").max(64),
      })
      .strict(),
    analysis: Analysis.optional().describe(
      "Evidence gate for every wave with 0 < traffic < 100 (docs/gate.md).",
    ),
    policy: z
      .object({
        retries: Retries.optional(),
        on_failure: OnFailure.default(FailurePolicy.compensate),
        rerun_window_minutes: RerunWindow.default(DEFAULT_RERUN_WINDOW_MINUTES),
        steps: z
          .object({
            drain_wave: StepPolicy.optional(),
            exclude_lane: StepPolicy.optional(),
            attach_queue_lane: StepPolicy.optional(),
            assert_smoke_passed: StepPolicy.optional(),
            advertise_capabilities: StepPolicy.optional(),
            include_lane: StepPolicy.optional(),
            set_traffic: StepPolicy.optional(),
            assert_traffic_observed: StepPolicy.optional(),
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
  .describe("A Baton recipe: one model rollout over lanes in waves.");
/** A recipe after parsing: defaults filled. */
export type Recipe = z.infer<typeof Recipe>;
/** A recipe as written: defaulted fields optional. */
export type RecipeInput = z.input<typeof Recipe>;
