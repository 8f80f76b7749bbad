/**
 * The step protocol's wire shapes (docs/engine.md), shared by the engine, the release-step
 * action and the local runner. Schemas are the types (zod); untrusted input goes through
 * `safeParse` at the edge.
 */
import * as z from "zod";
import { RunnerRunIdText, RunOwnerIdText } from "./ids.ts";
import { lazySchema } from "./lazy-schema.ts";

/** Event type of every dispatch (`repository_dispatch` action). */
export const DISPATCH_EVENT_TYPE = "release-step";

/** GitHub's documented limits for `repository_dispatch` (REST docs, "Create a repository dispatch event"). */
export const GITHUB_DISPATCH_LIMITS = {
  event_type_max_chars: 100,
  client_payload_max_top_level_keys: 10,
  client_payload_max_bytes: 65_536,
} as const;

/**
 * `client_payload` of a dispatch: at most 10 top-level keys; extra fields nest under `args`
 * or `release`. `release.dispatch` is the step run's dispatch sequence, echoed at preflight.
 * A recovery run (`rv3`, protocol/ids.ts) is dispatched in the same shape: its id is both
 * `step_run_id` and `release.id`.
 */
export const DispatchPayload = lazySchema(() =>
  z
    .object({
      v: z.literal(1),
      step_run_id: RunnerRunIdText,
      tool: z
        .string()
        .regex(/^[a-z][a-z0-9-]{0,63}$/, "must be a tool name such as attach-queue-lane"),
      args: z.record(z.string(), z.unknown()),
      callback_url: z.string().url(),
      release: z
        .object({
          id: RunOwnerIdText,
          generation: z.number().int().nonnegative(),
          manifest_digest: z.string().regex(/^[a-f0-9]{64}$/),
          dispatch: z.number().int().positive(),
          operation_key: z.string().min(1).max(512),
        })
        .strict(),
    })
    .strict(),
);
export type DispatchPayload = z.infer<typeof DispatchPayload>;

/** Body of `POST /v1/releases/step-runs/:id/preflight`. */
export const PreflightRequest = lazySchema(() =>
  z
    .object({
      step_run_id: RunnerRunIdText,
      /** Echoed from the dispatch payload's `release` object (docs/state-machine.md rule 1). */
      release_id: RunOwnerIdText,
      generation: z.number().int().nonnegative(),
      manifest_digest: z.string().regex(/^[a-f0-9]{64}$/),
      dispatch: z.number().int().positive(),
      run_id: z.string().regex(/^[0-9]{1,20}$/, "must be GITHUB_RUN_ID (digits)"),
      run_attempt: z.number().int().positive(),
      sha: z.string().regex(/^[0-9a-f]{7,64}$/, "must be the commit sha (hex)"),
      tool: z.string().min(1).max(64),
      /**
       * sha256 hex of the canonical JSON of the payload's `{tool, args, operation_key}`
       * (engine/src/protocol/payload-digest.ts): binds the attempt to the work the engine dispatched.
       */
      payload_digest: z.string().regex(/^[a-f0-9]{64}$/, "must be the sha256 hex payload digest"),
    })
    .strict(),
);
export type PreflightRequest = z.infer<typeof PreflightRequest>;

/**
 * 200 answer of a preflight: proceed as attempt `attempt`. `checkpoint`, only for a resumable
 * step (a migration's `migrate`): the last checkpoint an earlier attempt of the step run
 * reported; the action hands it to the tool as `args.checkpoint` (docs/recipes.md "Migrations").
 */
export const PreflightAccepted = lazySchema(() =>
  z.object({
    proceed: z.literal(true),
    step_run_id: RunnerRunIdText,
    attempt: z.number().int().positive(),
    release_id: z.string(),
    generation: z.number().int(),
    checkpoint: z.record(z.string(), z.unknown()).optional(),
  }),
);
export type PreflightAccepted = z.infer<typeof PreflightAccepted>;

/** One check record in `checks.json`; stored verbatim, these fields are the ones we read. */
export const CheckRecord = lazySchema(() =>
  z
    .object({
      name: z.string(),
      status: z.string(),
      exit_code: z.number().int().nullable().optional(),
      signal: z.string().nullable().optional(),
      duration_ms: z.number().nonnegative().optional(),
      message: z.string().optional(),
    })
    .passthrough(),
);
export type CheckRecord = z.infer<typeof CheckRecord>;

/** Log tail cap inside a callback (bytes of UTF-8); longer logs are cut with a marker. */
export const CALLBACK_LOG_MAX_BYTES = 256 * 1024;
/** Whole callback body cap (bytes). */
export const CALLBACK_BODY_MAX_BYTES = 1024 * 1024;
/** Marker placed at the start of a cut log. */
export const LOG_TRUNCATED_MARKER = "[baton] log truncated: earlier output omitted\n";

/**
 * A GitHub login as a workflow run names it (`GITHUB_ACTOR`, `GITHUB_TRIGGERING_ACTOR`): letters,
 * digits and hyphens, or an app's `name[bot]`. Anything else is dropped (undefined), never a
 * refusal: a runner's result is never lost over who ran it.
 */
const GithubLogin = lazySchema(() =>
  z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9-]{0,38}(\[bot\])?$/)
    .optional()
    .catch(undefined),
);

/**
 * The result `status` words that say the tool did not succeed (the action's own words, docs/runner.md
 * "Outputs"): a result with one of them is a failure even when its `overall` says `pass`. Any other
 * one-word status (`succeeded`, or a custom tool's own word) lets `overall` decide.
 */
export const NOT_SUCCEEDED_STATUSES: ReadonlySet<string> = new Set([
  "failed",
  "timeout",
  "cancelled",
  "not_run",
  "declined",
  "invalid",
  "preflight_failed",
  "error",
]);

/**
 * The `status` words of a check record in `checks.json` that say the check failed (compared
 * lowercased). A result whose checks.json holds one is a failure even when its `overall` says
 * `pass`. Other words (`ok`, `skipped`, `not_run`, a migration's `running` checkpoint, a custom
 * tool's own word) do not decide on their own.
 */
export const FAILED_CHECK_STATUSES: ReadonlySet<string> = new Set([
  "fail",
  "failed",
  "failure",
  "error",
  "timeout",
  "timed_out",
  "cancelled",
  "canceled",
  "refused",
]);

/**
 * What in `checks` (checks.json as sent, any JSON) makes a pass a failure, as a check record, or
 * null: the first record whose `status` is in `FAILED_CHECK_STATUSES`; or, when checks.json
 * itself cannot be judged, a record named `checks.json` whose `message` says why: `null` (not
 * valid JSON, or dropped for the callback size cap), not an array, or an item that is not a
 * check record (an object). `undefined` (no checks given) is null.
 */
export function failedCheckIn(checks: unknown): Record<string, unknown> | null {
  if (checks === undefined) return null;
  const unjudged = (status: string, message: string) => ({ name: "checks.json", status, message });
  if (checks === null)
    return unjudged(
      "unreadable",
      "checks.json did not arrive (not valid JSON, or over the callback size cap); a pass needs its checks",
    );
  if (!Array.isArray(checks))
    return unjudged(
      "invalid",
      `checks.json is ${typeof checks === "object" ? "an object" : `a ${typeof checks}`}, not an array of check records ([{"name": …, "status": …}, …])`,
    );
  for (const [i, c] of checks.entries()) {
    if (c === null || typeof c !== "object" || Array.isArray(c))
      return unjudged(
        "invalid",
        `checks.json item ${i} is not a check record (an object with name and status)`,
      );
    const status = (c as Record<string, unknown>).status;
    if (typeof status === "string" && FAILED_CHECK_STATUSES.has(status.toLowerCase()))
      return c as Record<string, unknown>;
  }
  return null;
}

/**
 * Whether a result is a pass: `overall` pass, a status not in `NOT_SUCCEEDED_STATUSES` and, when
 * its `checks` (checks.json, any JSON) are given, no check with a status in `FAILED_CHECK_STATUSES`.
 */
export function resultPassed(status: string, overall: string, checks?: unknown): boolean {
  return (
    overall === "pass" && !NOT_SUCCEEDED_STATUSES.has(status) && failedCheckIn(checks) === null
  );
}

/** Body of `POST /v1/releases/step-runs/:id/callback`; signed over its raw bytes. */
export const CallbackBody = lazySchema(() =>
  z
    .object({
      step_run_id: RunnerRunIdText,
      run_id: z.string().regex(/^[0-9]{1,20}$/),
      run_attempt: z.number().int().positive(),
      status: z
        .string()
        .regex(
          /^[a-z_]{1,40}$/,
          "must be one lowercase word of a-z and _ (at most 40 characters), such as succeeded or failed",
        ),
      overall: z.enum(["pass", "fail"]),
      /** `checks.json` as the tool wrote it (verbatim, any JSON, or null when unreadable). */
      checks: z.unknown(),
      log: z.string(),
      log_truncated: z.boolean().default(false),
      timings: z
        .object({
          started_at: z.number().nonnegative().optional(),
          tool_started_at: z.number().nonnegative().optional(),
          tool_finished_at: z.number().nonnegative().optional(),
        })
        .passthrough()
        .default({}),
      /** Who started the workflow run (`github.actor`, GITHUB_ACTOR): the same on every re-run. */
      actor: GithubLogin,
      /**
       * Who started this run attempt (`github.triggering_actor`, GITHUB_TRIGGERING_ACTOR): the
       * person who re-ran the job from the Actions UI, on a re-run.
       */
      triggering_actor: GithubLogin,
    })
    .passthrough(),
);
export type CallbackBody = z.infer<typeof CallbackBody>;

/** The four result files (docs/glossary.md), seeded first thing in every attempt's directory. */
export const RESULT_FILES = {
  status: "status",
  overall: "overall",
  checks: "checks.json",
  log: "log",
} as const;
export const RESULT_SEED = { status: "not_run", overall: "fail", checks: "[]\n", log: "" } as const;
