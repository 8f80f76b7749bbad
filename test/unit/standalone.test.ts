/**
 * The repository stands alone: no code, test, script or doc points at design notes, style
 * notes or case lists that live outside it (a user of the repository never has them). Rules
 * are in docs/state-machine.md, words in docs/glossary.md, the failure cases in
 * docs/failure-cases.md. Nor does anything cite the tracker or a work session ("issue 14",
 * "session 8"): comments explain the code as it is, docs give the current figures; git keeps
 * the history.
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

/** A citation of the tracker or of a work session: issue 14, issues 6 and 14, session 8, (#26). */
const CITATION = new RegExp(
  ["\\bissues? #?\\d+", "\\bsession \\d+\\b", "\\(#\\d+\\)"].join("|"),
  "i",
);

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

  it("no comment or doc cites an issue number or a work session", () => {
    // The matcher itself, on lines it must and must not take.
    const sample = ["(issue 14 item 3)", "Issues 6 and 14:", "(session 8)", "see (#26)"];
    expect(sample.filter((l) => CITATION.test(l))).toEqual(sample);
    expect(CITATION.test("a session cookie; sha256:#2a; issues a token")).toBe(false);
    const hits: string[] = [];
    for (const f of files(ROOT)) {
      if (f.endsWith("package-lock.json") || f.endsWith(".json")) continue;
      if (f === fileURLToPath(import.meta.url)) continue;
      readFileSync(f, "utf8")
        .split("\n")
        .forEach((line, i) => {
          if (CITATION.test(line)) hits.push(`${relative(ROOT, f)}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(hits).toEqual([]);
  });
});
