/**
 * The migration block compiled onto custom steps, and its contract-check rules (docs/recipes.md
 * "Migrations"); `policy.rollback_window` in the manifest (docs/lifecycle.md "The rollback
 * window"). Pure.
 */
import { describe, expect, it } from "vitest";
import { checkAndCompile, compileRecipe } from "../../engine/src/domain/compile.ts";
import { Recipe, type RecipeInput } from "../../engine/src/domain/recipe.ts";
import { goodRecipe, laneId } from "./recipe-fixture.ts";

const T = "migrate-table";
const inputs = { database: "app.db", table: "customers", from: "email", to: "email_norm" };

function withMigration(migration: RecipeInput["migration"], extra: Partial<RecipeInput> = {}) {
  return { ...goodRecipe(), migration, ...extra } as RecipeInput;
}

function problems(r: unknown) {
  const c = checkAndCompile(r);
  return c.ok ? [] : c.problems.map((p) => `${p.path}: ${p.message}`);
}

describe("migration: the compiled table", () => {
  it("expand then migrate run once, on the migration's lane, right before wave 1's drain_wave", () => {
    const r = withMigration({
      id: "email-norm",
      lane: laneId(0),
      inputs,
      expand: { forward: T, backward: T },
      migrate: { forward: T, backward: T, inputs: { batch: 10 }, retries: 2 },
    });
    const m = compileRecipe(Recipe.parse(r)).manifest;
    const names = m.steps.map((s) => s.name);
    const drain = names.indexOf("drain_wave");
    expect(names.slice(drain - 2, drain)).toEqual(["expand", "migrate"]);
    expect(names.filter((n) => n === "migrate")).toHaveLength(1);
    const migrate = m.steps[drain - 1]!;
    expect(migrate.custom).toEqual({ phase: "migrate" });
    expect(migrate.retries).toBe(2);
    expect(migrate.lane).toBeNull();
    expect(migrate.forward).toMatchObject({
      kind: "runner",
      tool: T,
      target: `lane=${laneId(0)}:step=migrate`,
      args: { inputs: { ...inputs, batch: 10 }, step: { name: "migrate", direction: "forward" } },
    });
    expect(m.migration).toEqual({
      id: "email-norm",
      lane: laneId(0),
      steps: ["expand", "migrate"],
    });
  });

  it("a later release's contract is irreversible: the release rolls forward only from it", () => {
    const r = withMigration({
      id: "email-norm",
      inputs,
      contract: { forward: T },
      old_form_readers: [goodRecipe().previous_image as string],
    });
    const m = compileRecipe(Recipe.parse(r)).manifest;
    const contract = m.steps.find((s) => s.name === "contract")!;
    expect(contract.custom).toEqual({ irreversible: true, phase: "contract" });
    expect(contract.backward).toBeNull();
    expect(m.recovery).toEqual({ class: "roll_forward_only", unsafe_after: contract.index });
    expect(m.migration?.old_form_readers).toEqual([goodRecipe().previous_image]);
  });

  it("a recipe without a migration or a rollback window compiles to the manifest it did", () => {
    const m = compileRecipe(Recipe.parse(goodRecipe())).manifest;
    expect("migration" in m).toBe(false);
    expect("rollback_window_ms" in m).toBe(false);
    const w = compileRecipe(
      Recipe.parse({ ...goodRecipe(), policy: { rollback_window: "36h" } }),
    ).manifest;
    expect(w.rollback_window_ms).toBe(36 * 3_600_000);
  });
});

describe("migration: the contract check", () => {
  it("a phase's retries, on_failure and rerun window are refused in the words a custom step's are", () => {
    const phase = { forward: T, backward: T, retries: 11, rerun_window_minutes: 2000 };
    const got = problems(withMigration({ id: "m", expand: phase, migrate: phase }));
    expect(got).toContain("migration.expand.retries: retries must be 10 or fewer");
    expect(got).toContain(
      "migration.migrate.rerun_window_minutes: rerun_window_minutes must be at most 1440 (24 h)",
    );
    const custom = problems({
      ...goodRecipe(),
      custom_steps: [
        { name: "warm", forward: T, backward: T, retries: 11, placement: { before: "drain_wave" } },
      ],
    });
    expect(custom).toContain("custom_steps.0.retries: retries must be 10 or fewer");
  });

  it("migrate-table's own input rules are the contract check's: a bad batch or name is refused at baton check, naming the field the run would read", () => {
    const bad = problems(
      withMigration({
        id: "m",
        inputs: { ...inputs, batch: -5 },
        expand: { forward: T, backward: T },
        migrate: { forward: T, backward: T, inputs: { table: "Bad Table" } },
      }),
    );
    expect(bad).toContain(
      "migration.inputs.batch: migrate-table: inputs.batch must be a whole number of rows, 1 to 100000",
    );
    expect(
      bad.some((p) =>
        p.startsWith(
          "migration.migrate.inputs.table: migrate-table: inputs.table must be a lowercase SQL name",
        ),
      ),
    ).toBe(true);
    // Told once, though expand and migrate both read the block's batch.
    expect(bad.filter((p) => p.startsWith("migration.inputs.batch"))).toHaveLength(1);
    expect(
      problems(
        withMigration({
          id: "m",
          inputs,
          expand: { forward: T, backward: T },
          migrate: { forward: T, backward: T },
        }),
      ),
    ).toEqual([]);
  });

  it("an input that is not finite (YAML 1e309 or .inf) is refused saying what an input value may be", () => {
    const says =
      "an input value is a string of at most 1000 characters, a finite number or true/false (1e309 and .inf are not finite)";
    const inf = { big: Number.POSITIVE_INFINITY };
    expect(problems(withMigration({ id: "m", inputs: inf, contract: { forward: T } }))).toContain(
      `migration.inputs.big: \`migration.inputs.big\`: ${says}`,
    );
    const custom = problems({
      ...goodRecipe(),
      custom_steps: [
        { name: "warm", forward: T, backward: T, inputs: inf, placement: { before: "drain_wave" } },
      ],
    });
    expect(custom).toContain(`custom_steps.0.inputs.big: \`custom_steps.0.inputs.big\`: ${says}`);
  });

  it("refuses, naming the field: a lone expand, contract beside expand, no phase, a tool not allowlisted, a lane not in the recipe, a custom step named like a phase, a reversible contract", () => {
    expect(problems(withMigration({ id: "m", expand: { forward: T, backward: T } }))).toContain(
      "migration.migrate: a migration declares expand and migrate together; `migrate` is missing",
    );
    expect(
      problems(
        withMigration({
          id: "m",
          expand: { forward: T, backward: T },
          migrate: { forward: T, backward: T },
          contract: { forward: T },
        }),
      ).some((p) =>
        p.startsWith(
          "migration.contract: contract removes the old form, so it runs in a later release",
        ),
      ),
    ).toBe(true);
    expect(problems(withMigration({ id: "m" }))).toContain(
      "migration: the migration declares no phase",
    );
    expect(
      problems(
        withMigration({
          id: "m",
          expand: { forward: "drop-db", backward: T },
          migrate: { forward: T, backward: T },
        }),
      ),
    ).toContain(
      "migration.expand.forward: forward tool `drop-db` of the migration's expand is not in the allowlist",
    );
    expect(problems(withMigration({ id: "m", lane: "nope", contract: { forward: T } }))).toContain(
      "migration.lane: lane `nope` is not a lane of this recipe",
    );
    expect(
      problems(
        withMigration(
          { id: "m", contract: { forward: T } },
          {
            custom_steps: [
              { name: "migrate", forward: T, backward: T, placement: { before: "drain_wave" } },
            ],
          },
        ),
      ),
    ).toContain("custom_steps.0.name: `migrate` is a migration phase's step name");
    expect(
      problems(
        withMigration({ id: "m", contract: { forward: T } }, { recovery_class: "reversible" }),
      ),
    ).toContain(
      "migration.contract: contract removes the old form: once it may have taken effect the release rolls forward only, but recovery_class is reversible",
    );
    // A contract names the images that read the old form (an empty list says none does).
    const noReaders = `migration.old_form_readers: a contract is refused while a lane runs an image that reads the old form, and this migration names none, so that guard would be off`;
    expect(problems(withMigration({ id: "m", contract: { forward: T } }))).toContain(noReaders);
    expect(
      problems(withMigration({ id: "m", inputs, contract: { forward: T }, old_form_readers: [] })),
    ).toEqual([]);
    expect(
      problems(withMigration({ id: "m", lane: laneId(1), contract: { forward: T } })),
    ).toContain(
      `migration.lane: lane \`${laneId(1)}\` is not in wave 1, but the migration runs before wave 1 begins, on a lane of it`,
    );
    expect(problems({ ...goodRecipe(), policy: { rollback_window: "2 weeks" } })).toContain(
      'policy.rollback_window: rollback_window "2 weeks" is not a whole number of minutes, hours or days; write it like 30m, 12h or 7d',
    );
    // Zero, a leading zero and too long each say what is wrong and the fix; 365d is the most.
    const windowProblem = (w: string) =>
      problems({ ...goodRecipe(), policy: { rollback_window: w } }).filter((p) =>
        p.startsWith("policy.rollback_window"),
      );
    expect(windowProblem("0m")).toEqual([
      "policy.rollback_window: rollback_window 0m is zero: a rollback could never be admitted; give at least 1m (or leave it out for the default 7d)",
    ]);
    expect(windowProblem("01m")).toEqual([
      "policy.rollback_window: rollback_window 01m has a leading zero; write 1m",
    ]);
    for (const long of ["366d", "100000d", "9999999d", "8761h"]) {
      expect(windowProblem(long)).toEqual([
        `policy.rollback_window: rollback_window ${long} is longer than the longest allowed, 365d (8760h); give 365d or less`,
      ]);
    }
    for (const ok of ["1m", "365d", "8760h", "525600m"]) expect(windowProblem(ok)).toEqual([]);
  });
});
