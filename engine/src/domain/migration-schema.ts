/**
 * The schema of a recipe's `migration:` block and what the manifest keeps of it (the logic is
 * in migration.ts). Imports only zod and the protocol's field rules.
 */
import * as z from "zod";
import { imageRef } from "../protocol/fields.ts";

/** The phases a record shows, in order. `activate` is the release's waves. */
export const MIGRATION_PHASES = ["expand", "migrate", "activate", "contract"] as const;
export type MigrationPhase = (typeof MIGRATION_PHASES)[number];
/** The phases that are step pairs in a table (their step names). */
export const MIGRATION_STEPS = ["expand", "migrate", "contract"] as const;
export type MigrationStep = (typeof MIGRATION_STEPS)[number];

const Tool = z
  .string()
  .regex(/^[a-z][a-z0-9-]{0,63}$/, "a tool is named as in the allowlist, e.g. migrate-table");
const Inputs = z
  .record(
    z
      .string()
      .regex(/^[a-z][a-z0-9_]{0,63}$/, "an input name is lowercase letters, digits and '_'"),
    z.union([
      z.string().max(1000, "an input value is at most 1000 characters"),
      z.number(),
      z.boolean(),
    ]),
  )
  .optional()
  .describe("Arguments for the phase's tools, passed as `inputs` (over the block's own).");
const Timeout = z
  .number()
  .int()
  .min(10_000, "timeout_ms must be at least 10000 (10 s)")
  .max(86_400_000, "timeout_ms must be at most 86400000 (24 h)")
  .optional()
  .describe(
    "ms from preflight to callback before a run is unknown (default deadlines.callback_ms).",
  );
const Retries = z.number().int().min(0).max(10).optional();
const OnFailure = z.enum(["compensate", "pause"]).optional();
const RerunWindow = z.number().int().min(0).max(1440).optional();

/** A reversible phase: a forward tool and the tool that undoes it. */
const PhasePair = z
  .object({
    forward: Tool.describe("Allowlisted runner tool that does the phase."),
    backward: Tool.describe("Allowlisted runner tool that undoes it during compensation."),
    inputs: Inputs,
    timeout_ms: Timeout,
    retries: Retries,
    on_failure: OnFailure,
    rerun_window_minutes: RerunWindow,
  })
  .strict();

/** The recipe's `migration:` block. */
export const Migration = z
  .object({
    id: z
      .string()
      .regex(
        /^[a-z][a-z0-9_-]{0,63}$/,
        "migration.id is 1-64 lowercase letters, digits, '_' or '-', starting with a letter",
      )
      .describe("Names the migration: the later release that contracts it names the same id."),
    lane: z
      .string()
      .max(64)
      .optional()
      .describe("The lane whose runner reaches the data (default: the first lane of wave 1)."),
    inputs: Inputs,
    expand: PhasePair.optional().describe(
      "Readers and schema accept both forms; writers keep the old one.",
    ),
    migrate: PhasePair.optional().describe(
      "The resumable, verified backfill (its result reports a checkpoint and verification checks).",
    ),
    contract: z
      .object({ forward: Tool, inputs: Inputs, timeout_ms: Timeout })
      .strict()
      .optional()
      .describe(
        "Removes the old form (irreversible). Declared by a later release than the one that activated the new form.",
      ),
    old_form_readers: z
      .array(imageRef("old_form_readers"))
      .max(64)
      .optional()
      .describe("Images that read the old form: contract is refused while a lane runs one."),
  })
  .strict();
export type Migration = z.infer<typeof Migration>;

/** What the manifest keeps of a migration (only when the recipe declares one). */
export interface ManifestMigration {
  id: string;
  /** The lane its steps run on. */
  lane: string;
  /** The phases this release runs as steps (`expand`, `migrate`; or `contract`). */
  steps: MigrationStep[];
  /** Images that read the old form (a contract release checks the lanes against them). */
  old_form_readers?: string[];
}
