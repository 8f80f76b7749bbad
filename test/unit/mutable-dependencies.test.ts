/**
 * Mutable dependencies (docs/recipes.md "Mutable dependencies"): the recipe's schema errors name
 * the field and the fix; requalification checks must be checks a gated wave runs; the manifest
 * keeps the dependencies (and a recipe without them compiles to the same bytes); the drift
 * judgement and the start's refusal; the revision read from a probe's answer.
 */
import { describe, expect, it } from "vitest";
import { compileRecipe } from "../../engine/src/domain/compile.ts";
import { checkRecipe } from "../../engine/src/domain/contract-check.ts";
import {
  type DependencyBook,
  dependencyDriftPrint,
  EMPTY_DEPENDENCY_BOOK,
  modelDependencyDrift,
  requalificationProblems,
} from "../../engine/src/domain/dependency-drift.ts";
import {
  contractExpiresAt,
  type MutableDependency,
  revisionFromAnswer,
} from "../../engine/src/domain/mutable-dependencies.ts";
import type { Recipe } from "../../engine/src/domain/recipe.ts";
import { goodRecipe } from "./recipe-fixture.ts";

const DEP = {
  name: "summarizer-api",
  kind: "hosted_model",
  owner: "ml-platform",
  revision: "2026-11-01",
  contract_expires: "2027-03-31",
  probe: { url: "https://api.provider.example/v1/models/summarizer", field: "revision" },
  requalification: { checks: ["task-set"] },
  fallback: "start recipe summarizer-v6-selfhosted",
};

/** The fixture recipe with a gate on its 10% wave that runs check `task-set`. */
function gated(deps: unknown[] = [DEP]) {
  return {
    ...goodRecipe(),
    analysis: {
      metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.02 } }],
      checks: [{ name: "task-set", tool: "run-smoke" }],
    },
    mutable_dependencies: deps,
  };
}

function problems(input: unknown) {
  const r = checkRecipe(input);
  return r.ok ? [] : r.problems;
}

describe("mutable dependencies in the recipe", () => {
  it("accepts a dependency whose requalification checks a gated wave runs", () => {
    expect(problems(gated())).toEqual([]);
  });

  it("names the field and the fix for each bad field", () => {
    const bad = problems(
      gated([
        {
          ...DEP,
          kind: "api",
          revision: "",
          contract_expires: "2027-02-30",
          probe: { url: "http://provider.example/rev" },
          owner: "",
          extra: 1,
        },
      ]),
    );
    const at = (path: string) => bad.find((p) => p.path === path);
    expect(at("mutable_dependencies.0.kind")?.message).toMatch(
      /kind must be one of hosted_model, tool, corpus/,
    );
    expect(at("mutable_dependencies.0.contract_expires")?.message).toMatch(
      /calendar date written YYYY-MM-DD/,
    );
    expect(at("mutable_dependencies.0.probe.url")?.message).toMatch(
      /plain http to a host other than the engine's own machine: give an https URL/,
    );
    expect(at("mutable_dependencies.0.revision")).toBeDefined();
    expect(at("mutable_dependencies.0.owner")).toBeDefined();
    expect(at("mutable_dependencies.0.extra")).toBeDefined();
    for (const p of bad) expect(p.fix.length).toBeGreaterThan(0);
  });

  it("refuses a requalification check no gated wave runs, and a duplicate name", () => {
    const bad = problems(
      gated([DEP, { ...DEP, requalification: { checks: ["task-set", "golden-50"] } }]),
    );
    expect(bad.map((p) => p.path).sort()).toEqual([
      "mutable_dependencies.1.name",
      "mutable_dependencies.1.requalification.checks.1",
    ]);
    const check = bad.find((p) => p.path.endsWith("checks.1"));
    expect(check?.message).toMatch(/`golden-50` is not a check of any gated wave/);
    expect(check?.fix).toMatch(/Add \{name: golden-50, tool: <an allowlisted tool>\}/);
    // Without a gate there is no check to requalify with.
    const { analysis: _, ...ungated } = gated();
    expect(problems(ungated).map((p) => p.message)).toEqual([
      expect.stringMatching(/its gates run no checks/),
    ]);
  });

  it("keeps the dependencies in the manifest; a recipe without them compiles as before", () => {
    const withDeps = compileRecipe(gated() as unknown as Recipe);
    expect(withDeps.manifest.mutable_dependencies).toEqual([DEP]);
    const { mutable_dependencies: _, ...plain } = gated();
    const without = compileRecipe(plain as unknown as Recipe);
    expect(without.manifest.mutable_dependencies).toBeUndefined();
    expect(without.canonical).not.toMatch(/mutable_dependencies/);
  });
});

describe("dependency drift and requalification", () => {
  const dep = DEP as MutableDependency;
  const manifest = { model: "summarizer-v7", mutable_dependencies: [dep] };
  const NOW = Date.UTC(2027, 0, 15);
  const seen = (revision: string): DependencyBook => ({
    observations: [
      {
        model: "summarizer-v7",
        name: dep.name,
        release: "r1",
        revision,
        observed_at: NOW - 1000,
        error: null,
        error_at: null,
      },
    ],
    recorded: [],
  });

  it("a contract holds through its last day (UTC)", () => {
    expect(contractExpiresAt("2027-03-31")).toBe(Date.UTC(2027, 3, 1));
  });

  it("an unchanged revision with a contract in force is no drift and no refusal", () => {
    expect(modelDependencyDrift(manifest, "r1", seen(dep.revision), NOW)).toBeNull();
    expect(requalificationProblems(manifest, seen(dep.revision), NOW)).toEqual([]);
    expect(requalificationProblems(manifest, EMPTY_DEPENDENCY_BOOK, NOW)).toEqual([]);
  });

  it("a new revision is drift, and a start is refused naming the dependency and the fix", () => {
    const d = modelDependencyDrift(manifest, "r1", seen("2026-12-01"), NOW);
    expect(d?.dependencies).toMatchObject([
      { name: dep.name, declared: "2026-11-01", observed: "2026-12-01", expired: false },
    ]);
    expect(dependencyDriftPrint(d)).not.toBe("");
    const [p, ...rest] = requalificationProblems(manifest, seen("2026-12-01"), NOW);
    expect(rest).toEqual([]);
    expect(p?.path).toBe("mutable_dependencies.0.revision");
    expect(p?.message).toMatch(
      /summarizer-api \(hosted_model, owner ml-platform\): provider revision changed: the recipe declares "2026-11-01", its probe observed "2026-12-01"/,
    );
    expect(p?.fix).toMatch(
      /set mutable_dependencies.0.revision to "2026-12-01".*must pass the requalification checks task-set.*Until then: start recipe summarizer-v6-selfhosted/,
    );
  });

  it("a recipe that leaves out a dependency recorded in drift is refused: leaving it out is no requalification", () => {
    const d = modelDependencyDrift(manifest, "r1", seen("2026-12-01"), NOW);
    const book: DependencyBook = {
      ...seen("2026-12-01"),
      recorded: [{ model: "summarizer-v7", print: dependencyDriftPrint(d), release: "r1" }],
    };
    const bare = { model: "summarizer-v7" };
    const [p, ...rest] = requalificationProblems(bare, book, NOW);
    expect(rest).toEqual([]);
    expect(p?.path).toBe("mutable_dependencies");
    expect(p?.message).toMatch(
      /summarizer-api of summarizer-v7 is in drift \(its provider revision changed from "2026-11-01" to "2026-12-01"; recorded on release r1\)/,
    );
    // Nothing recorded (or cleared): leaving it out is fine.
    expect(requalificationProblems(bare, seen("2026-12-01"), NOW)).toEqual([]);
    expect(
      requalificationProblems(
        bare,
        { ...book, recorded: [{ model: "summarizer-v7", print: "", release: "r1" }] },
        NOW,
      ),
    ).toEqual([]);
  });

  it("an expired contract is drift and a refusal, whatever the probe says", () => {
    const later = Date.UTC(2027, 3, 1);
    expect(requalificationProblems(manifest, seen(dep.revision), later - 1)).toEqual([]);
    const [p] = requalificationProblems(manifest, EMPTY_DEPENDENCY_BOOK, later);
    expect(p?.path).toBe("mutable_dependencies.0.contract_expires");
    expect(p?.message).toMatch(/contract expired: it held through 2027-03-31/);
    expect(p?.fix).toMatch(/Renew the contract with ml-platform/);
    expect(modelDependencyDrift(manifest, "r1", seen(dep.revision), later)?.dependencies).toEqual([
      expect.objectContaining({ expired: true, observed: null }),
    ]);
  });
});

describe("the revision in a probe's answer", () => {
  it("reads the trimmed text, or a JSON field (a number becomes its text)", () => {
    expect(revisionFromAnswer(" 2026-12-01\n", undefined)).toEqual({
      ok: true,
      revision: "2026-12-01",
    });
    expect(revisionFromAnswer('{"model":{"revision":7}}', "model.revision")).toEqual({
      ok: true,
      revision: "7",
    });
  });

  it("says why there is no revision", () => {
    expect(revisionFromAnswer("<html>", "revision")).toMatchObject({ ok: false });
    expect(revisionFromAnswer('{"rev":"a"}', "revision")).toEqual({
      ok: false,
      message: "the answer has no field revision",
    });
    expect(revisionFromAnswer("", undefined)).toMatchObject({ ok: false });
    expect(revisionFromAnswer("x".repeat(300), undefined)).toMatchObject({ ok: false });
  });
});
