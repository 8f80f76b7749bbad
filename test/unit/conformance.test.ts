/**
 * Mixed-version conformance checks (docs/recipes.md "Conformance checks"): the contract check's
 * refusals, each naming the field and the fix; the rows the compiler places first in the step
 * table (before wave 1's first step, so before any traffic step), with both images and the side
 * of each in the tool's arguments; the words a failure is told with; the record's evidence.
 */
import { describe, expect, it } from "vitest";
import { checkAndCompile, compileRecipe } from "../../engine/src/domain/compile.ts";
import {
  conformanceEvidence,
  conformanceFailureWords,
} from "../../engine/src/domain/conformance.ts";
import type { Problem } from "../../engine/src/domain/errors.ts";
import { Recipe, type RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { Release, StepRun } from "../../engine/src/domain/types.ts";
import { manifestDigest } from "../../engine/src/recipes/digest.ts";
import { goodRecipe, IMAGE, PREVIOUS_IMAGE } from "./recipe-fixture.ts";

type CheckInput = NonNullable<RecipeInput["conformance"]>[number];

const OLD_READER: CheckInput = {
  name: "old-reader-new-writer",
  reader: "old",
  writer: "new",
  tool: "run-smoke",
  args: { corpus: "golden-50" },
};
const NEW_READER: CheckInput = {
  name: "new-reader-old-writer",
  reader: "new",
  writer: "old",
  tool: "inspect-lane",
};

function withChecks(...checks: CheckInput[]): RecipeInput {
  return { ...goodRecipe(), conformance: checks };
}

function problems(r: unknown): Problem[] {
  const out = checkAndCompile(r);
  return out.ok ? [] : out.problems;
}

function problemAt(r: unknown, path: string): Problem {
  const at = problems(r).filter((p) => p.path === path);
  expect(at, JSON.stringify(problems(r))).toHaveLength(1);
  return at[0] as Problem;
}

describe("conformance: the contract check refuses", () => {
  it("a tool that is not allowlisted, naming the field and the allowlist", () => {
    const p = problemAt(withChecks({ ...OLD_READER, tool: "cache-compat" }), "conformance.0.tool");
    expect(p.message).toBe("conformance tool `cache-compat` is not in the allowlist");
    expect(p.fix).toContain("scripts/release/allowlist.json");
    expect(p.fix).toContain("run-smoke");
  });

  it("two checks of one name", () => {
    const p = problemAt(
      withChecks(OLD_READER, { ...NEW_READER, name: OLD_READER.name }),
      "conformance.1.name",
    );
    expect(p.message).toBe(
      "duplicate conformance check name `old-reader-new-writer` (also conformance.0)",
    );
    expect(p.fix).toMatch(/^Give every conformance check its own name/);
  });

  it("a same-version pair, with the writer to set", () => {
    const p = problemAt(withChecks({ ...OLD_READER, writer: "old" }), "conformance.0.writer");
    expect(p.message).toContain("pairs a old reader with a old writer");
    expect(p.fix).toMatch(/^Set `writer: new`/);
  });

  it("a side that is neither old nor new, an unknown field, an empty list", () => {
    const side = problemAt(
      withChecks({ ...OLD_READER, reader: "v6" as never }),
      "conformance.0.reader",
    );
    expect(side.message).toContain("a side is `old` (previous_image) or `new` (image)");
    const unknown = problems(withChecks({ ...OLD_READER, readr: "old" } as never));
    expect(unknown.map((p) => p.path)).toContain("conformance.0.readr");
    const empty = problemAt({ ...goodRecipe(), conformance: [] }, "conformance");
    expect(empty.message).toContain("conformance lists at least one check");
  });
});

describe("conformance: the compiled table", () => {
  it("runs every check first, before wave 1's first step and any traffic step, with both images", () => {
    const { manifest } = compileRecipe(Recipe.parse(withChecks(OLD_READER, NEW_READER)));
    const [a, b, first] = manifest.steps;
    expect([a?.name, b?.name, first?.name]).toEqual([
      "assert_conformance_passed",
      "assert_conformance_passed",
      "drain_wave",
    ]);
    const firstTraffic = manifest.steps.findIndex((s) => s.name === "set_traffic");
    const checks = manifest.steps.filter((s) => s.name === "assert_conformance_passed");
    expect(checks.every((s) => s.index < firstTraffic && s.lane === null && s.wave === 0)).toBe(
      true,
    );
    expect(a?.backward).toBeNull();
    expect(a?.forward).toMatchObject({
      kind: "runner",
      tool: "run-smoke",
      target: "conformance=old-reader-new-writer",
      args: {
        lane: { id: "lane-a" },
        image: IMAGE,
        previous_image: PREVIOUS_IMAGE,
        conformance: {
          name: "old-reader-new-writer",
          reader: "old",
          writer: "new",
          reader_image: PREVIOUS_IMAGE,
          writer_image: IMAGE,
          args: { corpus: "golden-50" },
        },
      },
    });
    expect(b?.forward).toMatchObject({
      tool: "inspect-lane",
      args: { conformance: { reader_image: IMAGE, writer_image: PREVIOUS_IMAGE } },
    });
  });

  it("is in the manifest's digest; a recipe without checks compiles as before", () => {
    const plain = compileRecipe(Recipe.parse(goodRecipe()));
    const checked = compileRecipe(Recipe.parse(withChecks(OLD_READER)));
    expect(plain.manifest.steps.some((s) => s.name === "assert_conformance_passed")).toBe(false);
    expect(checked.manifest.steps.slice(1).map((s) => s.name)).toEqual(
      plain.manifest.steps.map((s) => s.name),
    );
    expect(manifestDigest(checked.canonical)).not.toBe(manifestDigest(plain.canonical));
  });
});

describe("conformance: a failure in words and in the record", () => {
  const { manifest } = compileRecipe(Recipe.parse(withChecks(OLD_READER, NEW_READER)));

  it("names the check and its pair, says exposure stayed 0 and what to do", () => {
    const words = conformanceFailureWords(manifest.steps[0]!, "step 1 ended failed: x");
    expect(words).toBe(
      "conformance check `old-reader-new-writer` (old reader × new writer) did not pass, so no traffic reached the candidate: step 1 ended failed: x. To go on, make the candidate write what the previous version can read (or expand the old readers in an earlier release), then start a new release; if the check itself is wrong, fix its tool or its arguments in the recipe",
    );
    expect(conformanceFailureWords(manifest.steps[2]!, "x")).toBeNull();
  });

  it("the record's evidence: each check's pair, tool, step run and outcome", () => {
    const sr = (i: number, state: StepRun["state"], last_error: string | null) =>
      ({ id: `sr_1_${i}_f`, step_index: i, direction: "fwd", state, last_error }) as StepRun;
    const release = {
      manifest,
      step_runs: [sr(0, "succeeded", null), sr(1, "failed", "the reader refused 3 rows")],
    } as unknown as Release;
    expect(conformanceEvidence(release)).toEqual([
      {
        name: "old-reader-new-writer",
        reader: "old",
        writer: "new",
        tool: "run-smoke",
        step_index: 0,
        step_run_id: "sr_1_0_f",
        outcome: "pass",
        message: null,
      },
      {
        name: "new-reader-old-writer",
        reader: "new",
        writer: "old",
        tool: "inspect-lane",
        step_index: 1,
        step_run_id: "sr_1_1_f",
        outcome: "fail",
        message: "the reader refused 3 rows",
      },
    ]);
  });
});
