/**
 * `npm run drill` refuses what it cannot do before the drill runs (engine/src/demo/drill.ts
 * drillStartProblem): an option it does not take, a BATON_DRILL_RECORD it cannot write (the
 * drill's measures would be lost at the end).
 */
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { drillStartProblem } from "../../engine/src/demo/drill.ts";

describe("drillStartProblem", () => {
  it("refuses options and unwritable record paths, naming them and the fix", () => {
    expect(drillStartProblem(["--bogus"], undefined)).toContain(
      "npm run drill takes no options (got --bogus)",
    );
    for (const bad of ["/nonexistent-dir/drill.json", tmpdir()]) {
      const p = drillStartProblem([], bad);
      expect(p).toContain(`BATON_DRILL_RECORD=${bad} cannot be written (`);
      expect(p).toContain("fix: name a file in a folder this user can write");
    }
  });

  it("takes no options and a writable record path", () => {
    expect(drillStartProblem([], undefined)).toBeNull();
    expect(drillStartProblem([], join(tmpdir(), "baton-drill-record.json"))).toBeNull();
  });
});
