/**
 * The portable core imports no Node-only module: scripts/check-portable.mjs bundles it for a
 * neutral platform. The checker must also fail where it should (the Node composition).
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const check = (entry: string) =>
  spawnSync(process.execPath, ["scripts/check-portable.mjs", entry], { encoding: "utf8" });

describe("portable core", () => {
  it("engine/src/core.ts bundles with no node: import and no native module", () => {
    const r = check("engine/src/core.ts");
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });

  it("the checker refuses the Node composition, naming the node: imports", () => {
    const r = check("engine/src/engine.ts");
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("node:child_process");
  });
});
