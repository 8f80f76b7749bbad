/**
 * Every image the docs show exists, and every image in docs/images is shown somewhere
 * (README.md or docs/*.md); every screenshot scripts/docs-screenshots.mjs copies is one of them.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";

/** What scripts/docs-screenshots.mjs copies: docs/images/<image> ← test-results/<from>. */
const SCREENSHOTS = JSON.parse(readFileSync("scripts/docs-screenshots.json", "utf8")) as {
  image: string;
  from: string;
  test: string;
}[];

const DOCS = [
  "README.md",
  ...readdirSync("docs")
    .filter((f) => f.endsWith(".md"))
    .map((f) => join("docs", f)),
];

/** Local image paths a Markdown file shows (`![alt](path)` and `<img src="path">`), resolved. */
function imagesOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const paths = [
    ...[...text.matchAll(/!\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!),
    ...[...text.matchAll(/<img[^>]*\bsrc="([^"]+)"/g)].map((m) => m[1]!),
  ].filter((p) => !/^[a-z]+:/i.test(p));
  return paths.map((p) => normalize(join(dirname(file), p)));
}

describe("docs images", () => {
  const shown = new Map<string, string>();
  for (const f of DOCS) for (const p of imagesOf(f)) shown.set(p, f);

  it("every image a doc shows exists", () => {
    const missing = [...shown].filter(([p]) => !existsSync(p)).map(([p, f]) => `${f}: ${p}`);
    expect(missing).toEqual([]);
    expect(shown.size).toBeGreaterThan(5);
  });

  it("every image in docs/images is shown by a doc", () => {
    const files = readdirSync("docs/images").map((f) => normalize(join("docs/images", f)));
    expect(files.filter((f) => !shown.has(f))).toEqual([]);
  });

  it("every screenshot the copy script writes is in docs/images", () => {
    const files = new Set(readdirSync("docs/images"));
    expect(SCREENSHOTS.map((s) => s.image).filter((n) => !files.has(n))).toEqual([]);
  });
});
