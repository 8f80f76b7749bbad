/** The runner tools the engine may dispatch, and the fix a recipe naming another one gets. */

/**
 * Names of the runner tools the engine may dispatch (the keys of scripts/release/allowlist.json).
 * The test-only `noop` tool is not one of them: tests and benchmarks name it in their own
 * allowlist (test/support/tools-allowlist.json).
 */
export const TOOL_ALLOWLIST: readonly string[] = [
  "attach-queue-lane",
  "inspect-lane",
  "migrate-table",
  "restore-queue-lane",
  "restore-sqlite",
  "run-smoke",
];

/** The fix for tool `tool` missing from `allowlist`: the tools it has, or how to add one. */
export function allowlistFix(tool: string, allowlist: readonly string[] = TOOL_ALLOWLIST): string {
  return `Use an allowlisted tool (${allowlist.join(", ")}), or add \`${tool}\` to scripts/release/allowlist.json and TOOL_ALLOWLIST after review.`;
}
