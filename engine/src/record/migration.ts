/**
 * The record's `migration` section (docs/record.md, docs/recipes.md "Migrations"): each phase
 * of the release's migration with its state and times, the migrate step's checkpoints and its
 * verification evidence per attempt, and, for the release that activated the new form, when
 * its contract may run. Pure; present only when the manifest declares a migration.
 */
import * as z from "zod";
import { checkpointOf, phaseOf, verificationsOf } from "../domain/migration.ts";
import { rollbackWindowClosesAt } from "../domain/rollback-window.ts";
import type { Json, Release, StepRun } from "../domain/types.ts";
import type { AttemptResult } from "../ports/store.ts";
import { lazySchema } from "../protocol/lazy-schema.ts";

const Ms = lazySchema(() => z.number().int().describe("epoch ms"));

/** The record's `migration` (schema). */
export const MigrationRecord = lazySchema(() =>
  z
    .object({
      id: z.string().describe("the recipe's migration.id"),
      lane: z.string().describe("the lane its steps ran on"),
      phases: z.array(
        z.object({
          phase: z.enum(["expand", "migrate", "activate", "contract"]),
          step_index: z
            .number()
            .int()
            .nullable()
            .describe("its step in the table; activate: the first step after the migration"),
          state: z
            .string()
            .describe(
              "its forward step run's state (activate: the waves', `succeeded` once the release is), `not_run` before it began",
            ),
          undone: z
            .string()
            .nullable()
            .describe("its backward step run's state when compensation ran it; else null"),
          started_at: Ms.nullable(),
          finished_at: Ms.nullable(),
          checkpoints: z
            .array(z.object({ attempt: z.number().int(), at: Ms, checkpoint: z.unknown() }))
            .optional()
            .describe("migrate: each attempt's last reported checkpoint, oldest first"),
          evidence: z
            .array(
              z.object({
                attempt: z.number().int(),
                at: Ms,
                checks: z.array(
                  z.object({
                    name: z.string(),
                    passed: z.boolean(),
                    expected: z.unknown(),
                    observed: z.unknown(),
                    message: z.string().nullable(),
                  }),
                ),
              }),
            )
            .optional()
            .describe(
              "migrate: each attempt's verification checks (counts, integrity, equivalence)",
            ),
        }),
      ),
      old_form_readers: z.array(z.string()).describe("images listed as readers of the old form"),
      contract_may_run_from: Ms.nullable().describe(
        "for the release that activated the new form, once it succeeded: when its rollback window closes, the earliest a contract may run; else null",
      ),
    })
    .describe('the release\'s migration (docs/recipes.md "Migrations"); absent when it has none'),
);
export type MigrationRecord = z.infer<typeof MigrationRecord>;

/** The `migration` section of `release`'s record, or undefined when it has no migration. */
export function migrationRecord(
  release: Release,
  results: readonly AttemptResult[],
): MigrationRecord | undefined {
  const m = release.manifest.migration;
  if (!m) return undefined;
  const run = (i: number, dir: "fwd" | "bwd"): StepRun | undefined =>
    release.step_runs.find((s) => s.step_index === i && s.direction === dir);
  const rows = release.manifest.steps.filter((s) => phaseOf(s) !== null);
  const phases: MigrationRecord["phases"] = rows.map((s) => {
    const fwd = run(s.index, "fwd");
    const bwd = run(s.index, "bwd");
    const mine = fwd
      ? results.filter((a) => a.step_run_id === fwd.id).sort((a, b) => a.attempt - b.attempt)
      : [];
    const phase = phaseOf(s) as "expand" | "migrate" | "contract";
    return {
      phase,
      step_index: s.index,
      state: fwd?.state ?? "not_run",
      undone: bwd?.state ?? null,
      started_at: fwd?.started_at ?? null,
      finished_at: fwd?.finished_at ?? null,
      ...(phase === "migrate"
        ? {
            checkpoints: mine.flatMap((a) => {
              const c = checkpointOf(a.checks);
              return c ? [{ attempt: a.attempt, at: a.received_at, checkpoint: c as Json }] : [];
            }),
            evidence: mine.flatMap((a) => {
              const v = verificationsOf(a.checks);
              return v.length > 0 ? [{ attempt: a.attempt, at: a.received_at, checks: v }] : [];
            }),
          }
        : {}),
    };
  });
  if (m.steps.includes("migrate")) {
    const after = Math.max(...rows.map((s) => s.index)) + 1;
    const first = release.step_runs
      .filter((s) => s.direction === "fwd" && s.step_index >= after)
      .sort((a, b) => a.step_index - b.step_index)[0];
    const state =
      release.state === "succeeded"
        ? "succeeded"
        : !first
          ? "not_run"
          : release.state === "rolled_back"
            ? "rolled_back"
            : release.state;
    phases.push({
      phase: "activate",
      step_index: after < release.manifest.steps.length ? after : null,
      state,
      undone: null,
      started_at: first?.started_at ?? first?.created_at ?? null,
      finished_at: release.succeeded_at ?? null,
    });
  }
  return {
    id: m.id,
    lane: m.lane,
    phases,
    old_form_readers: [...(m.old_form_readers ?? [])],
    contract_may_run_from: m.steps.includes("migrate") ? rollbackWindowClosesAt(release) : null,
  };
}
