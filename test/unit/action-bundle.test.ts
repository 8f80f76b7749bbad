/**
 * What each step of the bundled action compiles before it runs: every step is a fresh Node
 * process on the runner, so the bytes its entry loads statically (the entry and the chunks it
 * imports, not those behind `import()`) are paid on every step of every release. A work count,
 * not a timing: the limits sit about twice above the sizes when set (main ~151 KB, post ~17 KB),
 * well under what a regression adds (undici with the OIDC client: ~430 KB; zod and the protocol
 * in the post step: ~110 KB). Raising one is a reviewed change with its reason.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";

const DIST = join(import.meta.dirname, "../../actions/release-step/dist");

/** Most bytes each entry may load before its first line runs. */
const STATIC_BYTES_LIMIT = { "index.js": 300_000, "post.js": 40_000 } as const;

/** The entry and every file it imports statically (`from "./…"`, `import "./…"`), transitively. */
function staticClosure(entry: string): string[] {
  const seen = new Set<string>();
  const todo = [entry];
  for (let f = todo.pop(); f !== undefined; f = todo.pop()) {
    if (seen.has(f)) continue;
    seen.add(f);
    const src = readFileSync(join(DIST, f), "utf8");
    for (const m of src.matchAll(/(?:from|import)\s*"(\.\.?\/[^"]+)"/g))
      todo.push(normalize(join(dirname(f), m[1] as string)));
  }
  return [...seen];
}

const bytes = (files: string[]) => files.reduce((n, f) => n + statSync(join(DIST, f)).size, 0);

describe("the action's steps load only what they use", () => {
  it.each(Object.entries(STATIC_BYTES_LIMIT))(
    "%s loads at most its limit of bytes statically",
    (entry, limit) => {
      const files = staticClosure(entry);
      expect(files.length).toBeGreaterThan(1);
      expect(bytes(files), files.join(", ")).toBeLessThanOrEqual(limit);
    },
  );

  it("undici (the OIDC client's HTTP library) is in the bundle, loaded only on demand", () => {
    const all = [...staticClosure("index.js"), ...staticClosure("post.js")];
    const withUndici = (f: string) => readFileSync(join(DIST, f), "utf8").includes("undici");
    expect(all.filter(withUndici)).toEqual([]);
    const chunks = readdirSync(join(DIST, "chunks")).map((f) => `chunks/${f}`);
    expect(chunks.filter(withUndici)).toHaveLength(1);
  });
});
