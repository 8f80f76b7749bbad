/**
 * `restore_state` in the recipe and its report (docs/recovery-actions.md "Restore state"): a
 * `recoverable` recipe may declare a restore tool instead of (or besides) the prose `restore`;
 * the tool must be allowlisted and the class recoverable; the manifest carries it and the step
 * table is unchanged; the tool's checks.json report is read fail-closed.
 */
import { describe, expect, it } from "vitest";
import { checkAndCompile } from "../../engine/src/domain/compile.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import {
  RestoreReportError,
  restoreReportOf,
  restoreStepOf,
} from "../../engine/src/domain/restore-state.ts";
import type { Release } from "../../engine/src/domain/types.ts";
import { goodRecipe } from "./recipe-fixture.ts";

const compiled = (r: RecipeInput) => {
  const res = checkAndCompile(r);
  if (!res.ok) throw new Error(JSON.stringify(res.problems));
  return res;
};
const problemsOf = (r: unknown) => {
  const res = checkAndCompile(r);
  if (res.ok) throw new Error("expected problems");
  return res.problems;
};
const TOOL = {
  tool: "restore-sqlite",
  inputs: { database: "/srv/f.db", table: "features", snapshots: "/srv/snaps" },
};

describe("restore_state rules", () => {
  it("a recoverable recipe with only restore_state compiles; the table is unchanged and the manifest names the tool", () => {
    const plain = compiled({ ...goodRecipe(), recovery_class: "recoverable", restore: "x" });
    const m = compiled({
      ...goodRecipe(),
      recovery_class: "recoverable",
      restore_state: TOOL,
    }).manifest;
    expect(m.recovery).toEqual({ class: "recoverable", restore_state: TOOL });
    expect(m.steps).toEqual(plain.manifest.steps);
    // The restore step is one past the table, backward, with the point the run asks for.
    const r = { manifest: m, restore: null } as unknown as Release;
    const step = restoreStepOf(r);
    expect(step).toMatchObject({ index: m.steps.length, name: "restore_state", kind: "runner" });
    expect(step?.backward).toMatchObject({
      tool: "restore-sqlite",
      args: { point: "latest", inputs: TOOL.inputs },
    });
  });

  it.each([
    [
      { recovery_class: "reversible", restore_state: TOOL },
      "restore_state",
      /recovery_class: recoverable/,
    ],
    [
      { recovery_class: "recoverable", restore_state: { tool: "curl-sh" } },
      "restore_state.tool",
      /allowlisted tool/,
    ],
    [
      { recovery_class: "recoverable", restore_state: { ...TOOL, point: "../x" } },
      "restore_state.point",
      /restore point/,
    ],
    [{ recovery_class: "recoverable" }, "restore", /restore_state: \{tool/],
  ])("refuses %j at %s, naming the fix", (extra, path, fix) => {
    const ps = problemsOf({ ...goodRecipe(), ...extra });
    const p = ps.find((x) => x.path === path);
    expect(p, JSON.stringify(ps)).toBeDefined();
    expect(`${p?.message} ${p?.fix}`).toMatch(fix);
  });

  it("reads the tool's report fail-closed", () => {
    const restore = {
      name: "restore",
      status: "ok",
      point: "snap-1",
      point_at: 1000,
      rows_lost: 2,
      rpo_ms: 50,
      rows_restored: 3,
    };
    expect(restoreReportOf([restore, { name: "verify", status: "ok" }])).toEqual({
      point: "snap-1",
      point_at: 1000,
      rows_lost: 2,
      rpo_ms: 50,
      rows_restored: 3,
      verified: true,
    });
    expect(restoreReportOf([restore])?.verified).toBe(false);
    expect(restoreReportOf([{ ...restore, status: "failed" }])).toBeNull();
    expect(restoreReportOf(null)).toBeNull();
    expect(() => restoreReportOf([{ ...restore, rows_lost: -1 }])).toThrow(RestoreReportError);
    expect(() => restoreReportOf([{ ...restore, point: "" }])).toThrow(/names no point/);
  });
});
