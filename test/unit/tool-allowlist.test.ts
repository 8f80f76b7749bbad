// The tool allowlist's contract check (engine/src/protocol/tool-allowlist.ts): a tool from
// another repository is pinned to one full commit sha; anything that can move is refused with
// the field and the fix.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { checkToolAllowlist, toolCheckoutDir } from "../../engine/src/protocol/tool-allowlist.ts";

const SHA = "0123456789abcdef0123456789abcdef01234567";
const pinned = (ref: unknown, extra: Record<string, unknown> = {}) => ({
  "attach-queue-lane": { repository: "acme/fleet-tools", ref, path: "bin/attach", ...extra },
});

describe("tool allowlist contract check", () => {
  it("accepts the production and the test allowlists", () => {
    for (const f of ["scripts/release/allowlist.json", "test/support/tools-allowlist.json"])
      expect(checkToolAllowlist(JSON.parse(readFileSync(f, "utf8")))).toEqual([]);
  });

  it("accepts a tool of another repository pinned to a full commit sha", () => {
    expect(
      checkToolAllowlist({ ...pinned(SHA), "run-smoke": "scripts/release/dist/run-smoke.mjs" }),
    ).toEqual([]);
    expect(toolCheckoutDir("acme/fleet-tools")).toBe(".baton-tools/acme/fleet-tools");
  });

  it.each([
    ["main", /a branch or tag name/],
    ["refs/heads/main", /a branch or tag name/],
    ["v1.4.2", /a tag/],
    ["refs/tags/release", /a tag/],
    ["0123456", /a short commit sha/],
    [SHA.slice(0, 39), /a short commit sha/],
    [SHA.toUpperCase(), /upper-case/],
    [`${SHA}00`, /not a 40-character commit sha/],
    ["", /a branch or tag name/],
  ])("refuses the unpinned ref %j, naming the field and the fix", (ref, kind) => {
    const problems = checkToolAllowlist(pinned(ref));
    expect(problems).toEqual([
      {
        path: "attach-queue-lane.ref",
        message: expect.stringMatching(kind),
        fix: expect.stringMatching(
          /full 40-character commit sha.*git ls-remote https:\/\/github\.com\/acme\/fleet-tools/,
        ),
      },
    ]);
    expect(problems[0]?.message).toMatch(/must be pinned to one commit/);
  });

  it("refuses a missing ref, a bad repository, an escaping path and unknown fields, all at once", () => {
    const problems = checkToolAllowlist({
      "attach-queue-lane": {
        repository: "https://github.com/acme/tools.git",
        path: "../x",
        branch: "main",
      },
      "run-smoke": "/usr/bin/env",
      "Bad Name": "x",
      "restore-queue-lane": 42,
    });
    expect(problems.map((p) => p.path).sort()).toEqual(
      [
        '"Bad Name"',
        "attach-queue-lane.branch",
        "attach-queue-lane.path",
        "attach-queue-lane.ref",
        "attach-queue-lane.repository",
        "restore-queue-lane",
        "run-smoke",
      ].sort(),
    );
    for (const p of problems) expect(p.fix.length).toBeGreaterThan(10);
  });

  it("refuses one repository pinned to two commits", () => {
    const problems = checkToolAllowlist({
      ...pinned(SHA),
      "run-smoke": { repository: "acme/fleet-tools", ref: "f".repeat(40), path: "bin/smoke" },
    });
    expect(problems).toEqual([
      expect.objectContaining({
        path: "run-smoke.ref",
        message: expect.stringMatching(/one repository has one checkout/),
      }),
    ]);
  });

  it("refuses what is not a JSON object", () => {
    for (const v of [null, [], "x", 3])
      expect(checkToolAllowlist(v)).toEqual([expect.objectContaining({ path: "(allowlist)" })]);
  });
});
