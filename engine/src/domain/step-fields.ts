/**
 * Field rules a recipe's runner steps share, built-in or declared (custom steps, the migration
 * block's phases, the restore): the tool's name, its inputs, its deadline and its failure policy.
 * One rule per field, so each field is refused with the same words wherever it is written.
 */
import * as z from "zod";
import { lazySchema } from "../protocol/lazy-schema.ts";
import { FailurePolicy } from "./states.ts";

/** An allowlisted runner tool's name (`warm-cache`, `migrate-table`). */
export const ToolName = lazySchema(() =>
  z
    .string()
    .regex(/^[a-z][a-z0-9-]{0,63}$/, "a tool is named as in the allowlist, e.g. warm-cache"),
);

/**
 * A tool's `inputs`: names of lowercase letters, digits and '_' (≤ 64), values strings of at
 * most 1,000 characters, finite numbers or booleans.
 */
export const ToolInputs = lazySchema(() =>
  z.record(
    z
      .string()
      .regex(/^[a-z][a-z0-9_]{0,63}$/, "an input name is lowercase letters, digits and '_'"),
    z.union(
      [z.string().max(1000, "an input value is at most 1000 characters"), z.number(), z.boolean()],
      {
        error:
          "an input value is a string of at most 1000 characters, a finite number or true/false (1e309 and .inf are not finite)",
      },
    ),
  ),
);

/** ms from preflight accepted to callback before a run of a step is unknown: 10 s to 24 h. */
export const StepTimeoutMs = lazySchema(() =>
  z
    .number()
    .int()
    .min(10_000, "timeout_ms must be at least 10000 (10 s)")
    .max(86_400_000, "timeout_ms must be at most 86400000 (24 h)"),
);

/** Engine-side retries after the first try of a failed step: 0 to 10. */
export const Retries = lazySchema(() =>
  z
    .number()
    .int("retries must be a whole number")
    .min(0, "retries must be 0 or more")
    .max(10, "retries must be 10 or fewer")
    .describe("Engine-side retries after the first try of a failed step."),
);

/** What a failed step does once its retries are spent. */
export const OnFailure = lazySchema(() =>
  z
    .enum([FailurePolicy.compensate, FailurePolicy.pause])
    .describe("compensate: walk the table backwards (default); pause: hold for an operator."),
);

/** Minutes a failed runner step waits for a re-run from the Actions UI: 0 to 1,440. */
export const RerunWindow = lazySchema(() =>
  z
    .number()
    .int("rerun_window_minutes must be a whole number of minutes")
    .min(0, "rerun_window_minutes must be 0 (compensate at once) or more")
    .max(1440, "rerun_window_minutes must be at most 1440 (24 h)")
    .describe(
      "Minutes a failed runner step waits, paused, for a re-run of its job from the Actions UI before the release compensates; 0 = compensate at once.",
    ),
);
