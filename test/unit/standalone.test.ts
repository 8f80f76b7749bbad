/**
 * The repository stands alone: no code, test, script or doc points at design notes, style
 * notes or case lists that live outside it (a user of the repository never has them). Rules
 * are in docs/state-machine.md, words in docs/glossary.md, the failure cases in
 * docs/failure-cases.md.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SKIP = new Set([
  "node_modules",
  "dist",
  ".git",
  "test-results",
  ".tmp",
  "dist-worker",
  "dist-lambda",
]);
const TEXT = /\.(ts|tsx|mjs|cjs|js|json|md|ya?ml|sh|toml)$|^run$/;
// Built from parts so this file does not match itself.
const OUTSIDE = [
  ["DESIGN", ".md"],
  ["STYLE", ".md"],
  ["field", " case"],
  ["field", "-case"],
  ["..", "/shared"],
].map(([a, b]) => `${a}${b}`);

function* files(dir: string, depth = 0): Generator<string> {
  if (depth > 12) return;
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const p = join(dir, name);
    const st = statSync(p);
    if (st.isDirectory()) yield* files(p, depth + 1);
    else if (st.isFile() && st.size < 2_000_000 && TEXT.test(name)) yield p;
  }
}

describe("the repository stands alone", () => {
  it("no file refers to design notes, style notes or case lists outside the repository", () => {
    const hits: string[] = [];
    let seen = 0;
    for (const f of files(ROOT)) {
      if (f.endsWith("package-lock.json")) continue;
      seen++;
      const lines = readFileSync(f, "utf8").split("\n");
      lines.forEach((line, i) => {
        const low = line.toLowerCase();
        for (const o of OUTSIDE) {
          if (low.includes(o.toLowerCase()))
            hits.push(`${relative(ROOT, f)}:${i + 1}: ${line.trim()}`);
        }
      });
    }
    expect(seen).toBeGreaterThan(100);
    expect(hits).toEqual([]);
  });
});
