/**
 * The schema of a recipe's `migration:` block and what the manifest keeps of it (the logic is
 * in migration.ts). Imports only zod, the protocol's field rules and the step fields.
 */
import * as z from "zod";
import { imageRef } from "../protocol/fields.ts";
import { lazySchema } from "../protocol/lazy-schema.ts";
import {
  OnFailure,
  RerunWindow,
  Retries,
  StepTimeoutMs,
  ToolInputs,
  ToolName,
} from "./step-fields.ts";

/** The phases a record shows, in order. `activate` is the release's waves. */
export const MIGRATION_PHASES = ["expand", "migrate", "activate", "contract"] as const;
export type MigrationPhase = (typeof MIGRATION_PHASES)[number];
/** The phases that are step pairs in a table (their step names). */
export const MIGRATION_STEPS = ["expand", "migrate", "contract"] as const;
export type MigrationStep = (typeof MIGRATION_STEPS)[number];

const Inputs = lazySchema(() =>
  ToolInputs.optional().describe(
    "Arguments for the phase's tools, passed as `inputs` (over the block's own).",
  ),
);
const Timeout = lazySchema(() =>
  StepTimeoutMs.optional().describe(
    "ms from preflight to callback before a run is unknown (default deadlines.callback_ms).",
  ),
);

/** A reversible phase: a forward tool and the tool that undoes it. */
const PhasePair = lazySchema(() =>
  z
    .object({
      forward: ToolName.describe("Allowlisted runner tool that does the phase."),
      backward: ToolName.describe("Allowlisted runner tool that undoes it during compensation."),
      inputs: Inputs,
      timeout_ms: Timeout,
      retries: Retries.optional(),
      on_failure: OnFailure.optional(),
      rerun_window_minutes: RerunWindow.optional(),
    })
    .strict(),
);

/** The recipe's `migration:` block. */
export const Migration = lazySchema(() =>
  z
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
        .object({ forward: ToolName, inputs: Inputs, timeout_ms: Timeout })
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
    .strict(),
);
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
