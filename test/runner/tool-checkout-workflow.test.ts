// The release-step workflow checks a tools repository out at the commit the committed allowlist
// pins, before the action runs: the step shapes, and scripts/release/tool-checkout.mjs (which
// drives the checkout step) run as the workflow runs it, on throwaway allowlists.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { checkToolAllowlist, toolCheckoutDir } from "../../engine/src/protocol/tool-allowlist.ts";
import { parseFileCommands } from "../support/run-action.ts";
import { REPO } from "../support/standin-target.ts";

const SCRIPT = join(REPO, "scripts/release/tool-checkout.mjs");
const SHA = "0123456789abcdef0123456789abcdef01234567";
const dir = mkdtempSync(join(tmpdir(), "baton-tool-checkout-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A workflow expression as written in YAML: `${{ e }}`. */
const expr = (e: string) => `$${"{{"} ${e} }}`;

type Step = {
  id?: string;
  name?: string;
  if?: string;
  uses?: string;
  run?: string;
  with?: Record<string, string>;
};

function pins(allowlist: unknown) {
  const file = join(dir, `allow-${Math.random().toString(16).slice(2)}.json`);
  const output = `${file}.out`;
  writeFileSync(file, JSON.stringify(allowlist));
  writeFileSync(output, "");
  const r = spawnSync(process.execPath, [SCRIPT, file], {
    encoding: "utf8",
    env: { PATH: process.env.PATH, GITHUB_OUTPUT: output },
    timeout: 30_000,
  });
  return {
    code: r.status,
    stdout: r.stdout,
    outputs: parseFileCommands(readFileSync(output, "utf8")),
  };
}

describe("release-step.yml: tools from other repositories", () => {
  const wf = parse(readFileSync(join(REPO, ".github/workflows/release-step.yml"), "utf8")) as {
    jobs: Record<string, { steps: Step[] }>;
  };
  const steps = Object.values(wf.jobs)[0]?.steps ?? [];

  it("checks the pinned tools repository out before the action, without keeping credentials", () => {
    const read = steps.findIndex((s) => s.id === "tools");
    const checkout = steps.findIndex((s) => s.with?.repository !== undefined);
    const action = steps.findIndex((s) => s.uses === "./actions/release-step");
    expect(read).toBeGreaterThan(0);
    expect(steps[read]?.run).toBe(
      "node scripts/release/tool-checkout.mjs scripts/release/allowlist.json",
    );
    expect(read).toBeLessThan(checkout);
    expect(checkout).toBeLessThan(action);
    const step = steps[checkout] as Step;
    expect(step.uses).toMatch(/^actions\/checkout@[0-9a-f]{40}$/);
    expect(step.if).toBe("steps.tools.outputs.repository != ''");
    expect(step.with).toEqual({
      repository: expr("steps.tools.outputs.repository"),
      ref: expr("steps.tools.outputs.ref"),
      path: expr("steps.tools.outputs.path"),
      token: expr("secrets.BATON_TOOLS_TOKEN || github.token"),
      "persist-credentials": false,
    });
  });

  it("outputs the repository, the pinned commit and the action's checkout directory", () => {
    const r = pins({
      "attach-queue-lane": { repository: "acme/fleet-tools", ref: SHA, path: "bin/attach" },
      "restore-queue-lane": { repository: "acme/fleet-tools", ref: SHA, path: "bin/restore" },
      "run-smoke": "scripts/release/dist/run-smoke.mjs",
    });
    expect(r.code, r.stdout).toBe(0);
    expect(r.outputs).toEqual({
      repository: "acme/fleet-tools",
      ref: SHA,
      path: toolCheckoutDir("acme/fleet-tools"),
    });
  });

  it("outputs nothing to check out for the production allowlist (every tool is in this repository)", () => {
    const prod = JSON.parse(readFileSync(join(REPO, "scripts/release/allowlist.json"), "utf8"));
    expect(checkToolAllowlist(prod)).toEqual([]);
    const r = pins(prod);
    expect(r.code).toBe(0);
    expect(r.outputs).toEqual({ repository: "", ref: "", path: "" });
  });

  it.each([
    [
      { a: { repository: "acme/t", ref: "main", path: "x" } },
      /a\.ref "main" is not a full 40-hex commit sha/,
    ],
    [
      { a: { repository: "acme/t", ref: SHA.slice(0, 7), path: "x" } },
      /a\.ref "0123456" is not a full/,
    ],
    [
      {
        a: { repository: "acme/t", ref: SHA, path: "x" },
        b: { repository: "acme/u", ref: SHA, path: "x" },
      },
      /names 2 tools repositories \(acme\/t, acme\/u\); this workflow checks out one/,
    ],
  ])("refuses %j with an error annotation and no outputs", (allowlist, message) => {
    const r = pins(allowlist);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^::error title=tool allowlist::/);
    expect(r.stdout).toMatch(message);
    expect(r.outputs).toEqual({});
  });
});
