/**
 * Migrations (docs/recipes.md "Migrations: expand → migrate → contract"): a recipe's
 * `migration:` block, compiled onto the custom-step mechanism (domain/custom-steps.ts). The
 * release that declares `expand` and `migrate` runs them, in that order, as runner step pairs
 * right before wave 1's `drain_wave` (before any lane changes or takes traffic), on the lane
 * whose runner reaches the data; its waves are the `activate` phase (the new image, which
 * reads and writes the new form, takes the traffic). `migrate` is resumable (its result
 * reports a checkpoint; a re-run or a new attempt of the step run gets the last one back in
 * `args.checkpoint`) and verified (its `kind: verification` checks must all pass, or the step
 * fails before exposure widens). A later release declares `contract` (irreversible: a recovery
 * boundary), which the engine refuses to start until the rollback window of the release that
 * activated the new form has closed and no lane runs an image listed in `old_form_readers`.
 * Pure.
 */
import { migrateTableInputs } from "../protocol/migrate-table-inputs.ts";
import { allowlistFix, TOOL_ALLOWLIST } from "./allowlist.ts";
import type { Problem } from "./errors.ts";
import { asArray as arr, asObject as obj } from "./json.ts";
import {
  type ManifestMigration,
  MIGRATION_PHASES,
  MIGRATION_STEPS,
  type Migration,
  type MigrationPhase,
  type MigrationStep,
} from "./migration-schema.ts";
import type { CustomStep } from "./recipe.ts";

export {
  type ManifestMigration,
  MIGRATION_PHASES,
  MIGRATION_STEPS,
  type Migration,
  type MigrationPhase,
  type MigrationStep,
};

import type { Json, ManifestStep, Release } from "./types.ts";

/** A custom step compiled from a migration phase (its row carries `custom.phase`). */
export type MigrationCustomStep = CustomStep & { phase: MigrationStep };

/** The lane a recipe's migration runs on: `migration.lane`, else wave 1's first lane. */
function migrationLane(r: {
  migration?: Migration;
  rollout: { waves: { lanes: string[] }[] };
}): string | undefined {
  return r.migration?.lane ?? r.rollout.waves[0]?.lanes[0];
}

/**
 * The migration's phases as custom steps, in table order (expand, migrate; or contract): each
 * right before wave 1's `drain_wave`, once, on the migration's lane. Empty without a block.
 */
export function migrationCustomSteps(r: {
  migration?: Migration;
  rollout: { waves: { lanes: string[] }[] };
}): MigrationCustomStep[] {
  const m = r.migration;
  const lane = migrationLane(r);
  if (!m || !lane) return [];
  const placement = { before: "drain_wave" as const, waves: [1], lanes: [lane] };
  const out: MigrationCustomStep[] = [];
  for (const name of ["expand", "migrate"] as const) {
    const p = m[name];
    if (!p) continue;
    out.push({
      name,
      phase: name,
      forward: p.forward,
      backward: p.backward,
      placement,
      inputs: { ...(m.inputs ?? {}), ...(p.inputs ?? {}) },
      ...(p.timeout_ms !== undefined ? { timeout_ms: p.timeout_ms } : {}),
      ...(p.retries !== undefined ? { retries: p.retries } : {}),
      ...(p.on_failure !== undefined ? { on_failure: p.on_failure } : {}),
      ...(p.rerun_window_minutes !== undefined
        ? { rerun_window_minutes: p.rerun_window_minutes }
        : {}),
    });
  }
  if (m.contract) {
    out.push({
      name: "contract",
      phase: "contract",
      forward: m.contract.forward,
      irreversible: true,
      placement,
      inputs: { ...(m.inputs ?? {}), ...(m.contract.inputs ?? {}) },
      ...(m.contract.timeout_ms !== undefined ? { timeout_ms: m.contract.timeout_ms } : {}),
    });
  }
  return out;
}

/** The manifest's `migration`, or undefined without a block. */
export function manifestMigration(r: {
  migration?: Migration;
  rollout: { waves: { lanes: string[] }[] };
}): ManifestMigration | undefined {
  const m = r.migration;
  const lane = migrationLane(r);
  if (!m || !lane) return undefined;
  return {
    id: m.id,
    lane,
    steps: migrationCustomSteps(r).map((s) => s.phase),
    ...(m.old_form_readers?.length ? { old_form_readers: [...m.old_form_readers] } : {}),
  };
}

/**
 * The contract check's rules for `migration` (the schema checks each field's form): `expand`
 * and `migrate` together or neither, `contract` only in a release without them (it runs after
 * the rollback window of the release that activated the new form), at least one phase,
 * allowlisted tools, a lane of the recipe, no custom step taking a phase's name, and a contract
 * (irreversible) only with the roll_forward_only recovery class or none. Never throws.
 */
export function migrationProblems(input: unknown): Problem[] {
  const root = obj(input);
  const m = obj(root?.migration);
  if (!root || !m) return [];
  const problems: Problem[] = [];
  const has = (k: string) => m[k] !== undefined;
  if (has("expand") !== has("migrate")) {
    const missing = has("expand") ? "migrate" : "expand";
    problems.push({
      path: `migration.${missing}`,
      message: `a migration declares expand and migrate together; \`${missing}\` is missing`,
      fix: `Add \`migration.${missing}\` (forward and backward tools), or declare only \`contract\` in a later release.`,
    });
  }
  if (has("contract") && (has("expand") || has("migrate"))) {
    problems.push({
      path: "migration.contract",
      message:
        "contract removes the old form, so it runs in a later release than the one that activates the new form (after that release's rollback window has closed)",
      fix: "Remove `contract` from this recipe and declare `migration: {id, contract, old_form_readers}` in the next release of the model.",
    });
  }
  if (has("contract") && !has("old_form_readers")) {
    problems.push({
      path: "migration.old_form_readers",
      message:
        "a contract is refused while a lane runs an image that reads the old form, and this migration names none, so that guard would be off",
      fix: "List the images (pinned by digest) that read the old form in `migration.old_form_readers`, or write `old_form_readers: []` to say that none does.",
    });
  }
  if (!has("expand") && !has("migrate") && !has("contract")) {
    problems.push({
      path: "migration",
      message: "the migration declares no phase",
      fix: "Declare `expand` and `migrate` (this release activates the new form), or `contract` (a later release removes the old form).",
    });
  }
  // The migrate-table tool's own input rules, on the inputs each of its runs is handed (the
  // block's, under the phase's): refused here, not on the machine.
  const toldInputs = new Set<string>();
  for (const phase of MIGRATION_STEPS) {
    const p = obj(m[phase]);
    if (p?.forward !== "migrate-table" && p?.backward !== "migrate-table") continue;
    const own = obj(p.inputs) ?? {};
    const inputs = { ...(obj(m.inputs) ?? {}), ...own };
    for (const bad of migrateTableInputs(inputs).problems) {
      const path =
        bad.field in own
          ? `migration.${phase}.inputs.${bad.field}`
          : `migration.inputs.${bad.field}`;
      if (toldInputs.has(path)) continue;
      toldInputs.add(path);
      problems.push({
        path,
        message: `migrate-table: ${bad.message}`,
        fix: bad.fix,
      });
    }
  }
  for (const phase of MIGRATION_STEPS) {
    for (const dir of ["forward", "backward"] as const) {
      const tool = obj(m[phase])?.[dir];
      if (typeof tool === "string" && !TOOL_ALLOWLIST.includes(tool)) {
        problems.push({
          path: `migration.${phase}.${dir}`,
          message: `${dir} tool \`${tool}\` of the migration's ${phase} is not in the allowlist`,
          fix: allowlistFix(tool),
        });
      }
    }
  }
  const laneIds = arr(root.lanes)
    .map((l) => obj(l)?.id)
    .filter((x): x is string => typeof x === "string");
  const first = arr(obj(arr(obj(root.rollout)?.waves)[0])?.lanes).filter(
    (x): x is string => typeof x === "string",
  );
  if (typeof m.lane === "string" && !laneIds.includes(m.lane)) {
    problems.push({
      path: "migration.lane",
      message: `lane \`${m.lane}\` is not a lane of this recipe`,
      fix: `Name a lane of wave 1: ${first.join(", ") || "<a lane id>"}.`,
    });
  } else if (typeof m.lane === "string" && first.length > 0 && !first.includes(m.lane)) {
    problems.push({
      path: "migration.lane",
      message: `lane \`${m.lane}\` is not in wave 1, but the migration runs before wave 1 begins, on a lane of it`,
      fix: `Name a lane of wave 1: ${first.join(", ")}.`,
    });
  }
  arr(root.custom_steps).forEach((c, i) => {
    const name = obj(c)?.name;
    if (typeof name === "string" && (MIGRATION_STEPS as readonly string[]).includes(name)) {
      problems.push({
        path: `custom_steps.${i}.name`,
        message: `\`${name}\` is a migration phase's step name`,
        fix: "Give the custom step another name, or declare the phase under `migration`.",
      });
    }
  });
  const cls = root.recovery_class;
  if (has("contract") && (cls === "reversible" || cls === "recoverable")) {
    problems.push({
      path: "migration.contract",
      message: `contract removes the old form: once it may have taken effect the release rolls forward only, but recovery_class is ${cls}`,
      fix: "Set `recovery_class: roll_forward_only` (or leave it out) in the recipe that contracts.",
    });
  }
  return problems;
}

/** Whether the recipe's migration declares a contract (an irreversible step). */
export function hasContract(input: unknown): boolean {
  return obj(obj(input)?.migration)?.contract !== undefined;
}

/** The migration phase of a step row, or null. */
export function phaseOf(step: Pick<ManifestStep, "custom">): MigrationStep | null {
  return step.custom?.phase ?? null;
}

const OK = new Set(["pass", "passed", "ok", "success", "succeeded"]);

function records(checks: unknown): Record<string, unknown>[] {
  return Array.isArray(checks)
    ? checks.filter(
        (c): c is Record<string, unknown> =>
          c !== null && typeof c === "object" && !Array.isArray(c),
      )
    : [];
}

/**
 * The checkpoint a migrate attempt reported: the `checkpoint` object of the last check record
 * of kind `checkpoint` in its checks.json, or null.
 */
export function checkpointOf(checks: unknown): Record<string, Json> | null {
  const recs = records(checks).filter((c) => c.kind === "checkpoint" && obj(c.checkpoint));
  const last = recs[recs.length - 1];
  return last ? (last.checkpoint as Record<string, Json>) : null;
}

/** One verification a migrate attempt reported (count, integrity, equivalence …). */
export interface VerificationCheck {
  name: string;
  passed: boolean;
  /** What the tool says it compared (message, expected, observed), as written. */
  message: string | null;
  expected: Json;
  observed: Json;
}

/** The `kind: verification` checks of a migrate attempt's checks.json. */
export function verificationsOf(checks: unknown): VerificationCheck[] {
  return records(checks)
    .filter((c) => c.kind === "verification")
    .map((c) => ({
      name: typeof c.name === "string" ? c.name.slice(0, 60) : "verification",
      passed: typeof c.status === "string" && OK.has(c.status.toLowerCase()),
      message: typeof c.message === "string" ? c.message.slice(0, 500) : null,
      expected: (c.expected ?? null) as Json,
      observed: (c.observed ?? null) as Json,
    }));
}

/**
 * The callback event's `verifications` from checks.json: undefined when it holds none.
 */
export function verificationSummary(
  checks: unknown,
): { names: string[]; failed: string[] } | undefined {
  const v = verificationsOf(checks);
  if (v.length === 0) return undefined;
  return { names: v.map((c) => c.name), failed: v.filter((c) => !c.passed).map((c) => c.name) };
}

/**
 * Why a passing callback of a `migrate` step does not count (no verification reported, or one
 * failed), from the event's `verifications`; null when it stands or the step is not a migrate.
 */
export function migrateUnverified(
  step: Pick<ManifestStep, "custom">,
  direction: "fwd" | "bwd",
  overall: "pass" | "fail",
  v: { names: string[]; failed: string[] } | undefined,
): string | null {
  if (phaseOf(step) !== "migrate" || direction !== "fwd" || overall !== "pass") return null;
  if (!v || v.names.length === 0)
    return "the migrate step reported no verification (checks of kind verification: counts, integrity, equivalence), so its backfill is not verified and exposure does not widen";
  return v.failed.length > 0
    ? `migrate verification failed (${v.failed.join(", ")}), so exposure does not widen`
    : null;
}

/**
 * Why a passing migrate result does not count (no verification reported, or one failed), or
 * null when it stands. A result the tool itself failed stays failed. The engine fails the step
 * then: exposure never widens past a backfill that was not verified.
 */
export function unverifiedMigrate(overall: "pass" | "fail", checks: unknown): string | null {
  if (overall !== "pass") return null;
  const v = verificationsOf(checks);
  if (v.length === 0)
    return "the migrate step reported no verification (checks of kind verification: counts, integrity, equivalence), so its backfill is not verified";
  const bad = v.filter((c) => !c.passed).map((c) => c.name);
  return bad.length > 0 ? `migrate verification failed: ${bad.join(", ")}` : null;
}

/**
 * Why the contract of migration `id` may not run yet at `now`, or null when it may: the
 * release that activated the new form (`activated`, null when none succeeded) must exist, its
 * rollback window must have closed (`closesAt`), and no lane may run an old-form reader
 * (`lanesOnOldReaders`: lane → image). The words say when it may run.
 */
export function contractRefusal(
  id: string,
  model: string,
  activated: Pick<Release, "id"> | null,
  closesAt: number | null,
  now: number,
  lanesOnOldReaders: readonly { lane: string; image: string }[],
): string | null {
  if (!activated || closesAt === null)
    return `no succeeded release of model ${model} activated migration ${id} (ran its expand and migrate), so there is no new form to contract to; run the release that expands and migrates first`;
  const why: string[] = [];
  if (now < closesAt)
    why.push(
      `the rollback window of ${activated.id}, which activated the new form, is open until ${new Date(closesAt).toISOString()} (a rollback until then would put back an image that reads the old form)`,
    );
  if (lanesOnOldReaders.length > 0)
    why.push(
      `lanes still run an image that reads the old form (${lanesOnOldReaders.map((l) => `${l.lane}: ${l.image}`).join(", ")})`,
    );
  if (why.length === 0) return null;
  const when =
    lanesOnOldReaders.length === 0
      ? `it may run from ${new Date(closesAt).toISOString()}`
      : `it may run once no lane runs an old-form reader${now < closesAt ? ` and not before ${new Date(closesAt).toISOString()}` : ""}`;
  return `the contract of migration ${id} may not run yet: ${why.join("; ")}; ${when}`;
}
