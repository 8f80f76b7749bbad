import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { TOOL_ALLOWLIST } from "../../engine/src/domain/catalogue.ts";

// The engine's contract check and the runner's allowlist file are two halves of one rule:
// a tool the engine may dispatch must be one the action may run, and nothing more.
describe("tool allowlist", () => {
  it("names the same tools in the engine catalogue and scripts/release/allowlist.json", () => {
    const file = JSON.parse(readFileSync("scripts/release/allowlist.json", "utf8")) as Record<
      string,
      string
    >;
    expect([...TOOL_ALLOWLIST].sort()).toEqual(Object.keys(file).sort());
  });

  it("does not name the test-only noop tool in production (tests use test/support/tools-allowlist.json)", () => {
    const file = JSON.parse(readFileSync("scripts/release/allowlist.json", "utf8")) as object;
    expect(Object.keys(file)).not.toContain("noop");
    expect(TOOL_ALLOWLIST).not.toContain("noop");
    const test = JSON.parse(readFileSync("test/support/tools-allowlist.json", "utf8")) as object;
    expect(Object.keys(test).sort()).toEqual([...TOOL_ALLOWLIST, "noop"].sort());
  });
});
