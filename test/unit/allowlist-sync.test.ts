import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { TOOL_ALLOWLIST } from "../../engine/src/domain/allowlist.ts";
import { checkAndCompile } from "../../engine/src/domain/compile.ts";
import { goodRecipe } from "./recipe-fixture.ts";

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

  it("every field naming a tool outside the allowlist gets one fix: the allowlisted tools, or how to add that tool", () => {
    const T = "drop-db";
    const c = checkAndCompile({
      ...goodRecipe(),
      recovery_class: "recoverable",
      restore_state: { tool: T },
      credentials: [{ ref: "vault://kv/x/key", revoke_tool: T }],
      custom_steps: [
        { name: "warm", forward: T, backward: T, placement: { before: "drain_wave" } },
      ],
    });
    expect(c.ok).toBe(false);
    const fixes = c.ok ? [] : c.problems.filter((p) => p.message.includes(`\`${T}\``));
    expect(fixes.map((p) => p.path).sort()).toEqual([
      "credentials.0.revoke_tool",
      "custom_steps.0.backward",
      "custom_steps.0.forward",
      "restore_state.tool",
    ]);
    for (const p of fixes)
      expect(p.fix).toBe(
        `Use an allowlisted tool (${TOOL_ALLOWLIST.join(", ")}), or add \`${T}\` to scripts/release/allowlist.json and TOOL_ALLOWLIST after review.`,
      );
  });

  it("a badly named revoke_tool is told the naming rule, not an example tool that is not allowlisted", () => {
    const c = checkAndCompile({
      ...goodRecipe(),
      credentials: [{ ref: "vault://kv/x/key", revoke_tool: "Revoke Tool" }],
    });
    const p = c.ok ? undefined : c.problems.find((x) => x.path === "credentials.0.revoke_tool");
    expect(p?.message).toContain("lowercase letters, digits and '-'");
    expect(JSON.stringify(p)).not.toContain("revoke-vault-token");
  });
});
