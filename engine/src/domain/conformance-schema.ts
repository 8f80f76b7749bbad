/**
 * The schema of a recipe's `conformance` list (docs/recipes.md "Conformance checks"): mixed-
 * version checks run before any exposure. The rules and words are in conformance.ts.
 */
import * as z from "zod";
import { lazySchema } from "../protocol/lazy-schema.ts";

/** The version of one side of a conformance check: the previous image or the candidate. */
export const ConformanceSide = lazySchema(() =>
  z.enum(["old", "new"], {
    error: "a side is `old` (previous_image) or `new` (image)",
  }),
);
export type ConformanceSide = z.infer<typeof ConformanceSide>;

/** The name of the catalogue step a conformance check compiles into. */
export const CONFORMANCE_STEP = "assert_conformance_passed";

/**
 * One conformance check: an allowlisted runner tool that runs `reader` against what `writer`
 * wrote (both versions are in its arguments as images) and reports pass or fail in its
 * result files. Reader and writer must differ: a same-version pair is no mixed-version check.
 */
export const ConformanceCheck = lazySchema(() =>
  z
    .object({
      name: z
        .string()
        .regex(
          /^[a-z][a-z0-9_-]{0,62}$/,
          "a conformance check name is lowercase letters, digits, '_' or '-' (≤ 63), starting with a letter",
        )
        .describe("Check name, unique in the recipe, e.g. old-reader-new-writer."),
      reader: ConformanceSide.describe(
        "The version that reads: old (previous_image) or new (image).",
      ),
      writer: ConformanceSide.describe(
        "The version that writes what the reader reads: old or new (not the reader's).",
      ),
      tool: z
        .string()
        .regex(/^[a-z][a-z0-9-]{0,63}$/, "tool must be a tool name such as run-smoke")
        .describe("Allowlisted runner tool (scripts/release/allowlist.json) that runs the check."),
      args: z
        .record(z.string().max(64), z.union([z.string().max(1024), z.number(), z.boolean()]))
        .optional()
        .describe(
          "Extra arguments for the tool (strings, numbers, booleans), passed as `conformance.args`.",
        ),
    })
    .strict(),
);
export type ConformanceCheck = z.infer<typeof ConformanceCheck>;

/** The recipe's `conformance` list. */
export const Conformance = lazySchema(() =>
  z
    .array(ConformanceCheck)
    .min(1, "conformance lists at least one check (or leave it out)")
    .max(16, "a recipe has at most 16 conformance checks")
    .describe(
      "Mixed-version checks (old reader × new writer, new reader × old writer) that must pass before the first traffic step.",
    ),
);
