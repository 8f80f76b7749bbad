/**
 * `npm run check:claims` (scripts/check-claims.mjs) on small fixture trees: a tied claim passes;
 * an untied claim, a reference to a missing file and a reference to a missing test title are
 * each reported and fail the check; and the real docs pass.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const script = join(root, "scripts/check-claims.mjs");
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const testFile = `import { it } from "vitest";
it("rule 1: evidence from another generation never satisfies a guard", () => {});
it.skipIf(false)("F17 compensation waits for the restore", () => {});
`;

/** Runs the checker on a tree holding `docs` (path → text) and one test file. */
function check(docs: Record<string, string>): { status: number | null; out: string } {
  const dir = mkdtempSync(join(tmpdir(), "baton-claims-"));
  dirs.push(dir);
  mkdirSync(join(dir, "docs"));
  mkdirSync(join(dir, "test/unit"), { recursive: true });
  writeFileSync(join(dir, "test/unit/rules.test.ts"), testFile);
  for (const [path, text] of Object.entries(docs)) writeFileSync(join(dir, path), text);
  const r = spawnSync(process.execPath, [script, "--root", dir], { encoding: "utf8" });
  return { status: r.status, out: r.stdout + r.stderr };
}

const rules = (rule1: string) =>
  `# Machine\n\n## Rules\n\n1. A guard holds.\n   Tests: ${rule1}\n\n## Other\n\n1. Not a rule.\n`;

describe("check:claims", () => {
  it("passes tied claims: an F-case, a rule, a G-row with a testing row, a prose Tests: line", () => {
    const r = check({
      "docs/failure-cases.md":
        "# F\n\n- **F17 a rollback.** It waits. Tests:\n  `test/unit/rules.test.ts > F17 compensation`.\n",
      "docs/state-machine.md": rules('`test/unit/rules.test.ts > "rule 1:"`'),
      "docs/guarantees.md":
        "# G\n\n## The promises\n\n| # | p |\n|---|---|\n| G1 | **Nothing is lost.** |\n\n## How\n\n| promise | test |\n|---|---|\n| G1 G5 | `test/unit/rules.test.ts` |\n",
      "README.md":
        "# Baton\n\nIt rolls back.\nTests: `test/unit/rules*.ts`.\n\nIt is fast. Mark a claim with `Tests:`.\n",
    });
    expect(r.out).toContain("claims 4, tied 4");
    expect(r.status).toBe(0);
  });

  it("reports an untied claim: an F-case, a rule and a G-row with no test, and fails", () => {
    const r = check({
      "docs/failure-cases.md": "# F\n\n- **F18 a gate.** It gates.\n",
      "docs/state-machine.md": rules("none yet"),
      "docs/guarantees.md": "# G\n\n## The promises\n\n| # | p |\n|---|---|\n| G2 | **Once.** |\n",
    });
    expect(r.out).toContain("docs/failure-cases.md:3 F18: no test named");
    expect(r.out).toContain("docs/state-machine.md:5 rule 1: no test named");
    expect(r.out).toContain("docs/guarantees.md:7 G2: no test named");
    expect(r.out).toContain("claims 3, tied 0");
    expect(r.status).toBe(1);
  });

  it("reports a reference to a missing file", () => {
    const r = check({
      "docs/failure-cases.md":
        "# F\n\n- **F19 evidence.** Bound. Tests: `test/unit/rules.test.ts`, `test/unit/gone.test.ts`.\n",
    });
    expect(r.out).toContain("docs/failure-cases.md:3 F19: test/unit/gone.test.ts: no such file");
    expect(r.out).toContain("claims 1, tied 0");
    expect(r.status).toBe(1);
  });

  it("reports a reference to a test title the file does not have", () => {
    const r = check({ "docs/state-machine.md": rules("`test/unit/rules.test.ts > rule 2:`") });
    expect(r.out).toContain('rule 1: test/unit/rules.test.ts: no test titled "rule 2:…"');
    expect(r.out).toContain("claims 1, tied 0");
    expect(r.status).toBe(1);
  });

  it("passes on this repository's README.md and docs/", () => {
    const r = spawnSync(process.execPath, [script], { encoding: "utf8" });
    expect(r.stdout).toMatch(/^claims (\d+), tied \1$/m);
    expect(r.status).toBe(0);
  });
});
