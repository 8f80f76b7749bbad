/**
 * Messages of the contract check (`baton check`, the 422 of POST /v1/releases) on hostile
 * recipes, from a fresh user's review: a fix that answers the problem at hand (too many
 * capabilities is about the count, not the spelling), strings with control characters shown
 * escaped and one problem for one bad lane id (no knock-on problems), and a YAML merge key
 * named as such.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkRecipe } from "../../engine/src/domain/contract-check.ts";
import { BatonError, type Problem } from "../../engine/src/domain/errors.ts";
import { compileRecipeText } from "../../engine/src/recipes/compile-text.ts";
import { baton, ROOT } from "../cli/run-baton.ts";
import { goodRecipe } from "./recipe-fixture.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests break recipes in arbitrary ways
type Mutable = Record<string, any>;

function problemsOf(mutate: (r: Mutable) => void): Problem[] {
  const r = structuredClone(goodRecipe()) as Mutable;
  mutate(r);
  const res = checkRecipe(r);
  if (res.ok) throw new Error("expected the contract check to fail");
  return res.problems;
}

/** Every C0/C1 control character, raw (what must never reach a terminal). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the test looks for them
const RAW_CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

const text = (ps: Problem[]) => ps.map((p) => `${p.path} ${p.message} ${p.fix}`).join(" | ");

/** The example recipe's text with `edit` applied (the edit must change it). */
function exampleWith(edit: (src: string) => string): string {
  const src = readFileSync(path.join(ROOT, "recipes/example.yaml"), "utf8");
  const out = edit(src);
  expect(out).not.toBe(src);
  return out;
}

describe("too many capabilities", () => {
  it("the fix is about the count (keep at most 64, group them), not how to spell one", () => {
    const ps = problemsOf((r) => {
      r.lanes[0].capabilities = Array.from({ length: 20_000 }, (_, i) => `c${i}`);
    });
    expect(ps.map((p) => p.path)).toEqual(["lanes.0.capabilities"]);
    const [p] = ps;
    expect(p?.message).toMatch(/at most 64 capabilities/);
    expect(p?.message).toMatch(/20000/);
    expect(p?.fix).toMatch(/at most 64/);
    expect(p?.fix).toMatch(/group/i);
    expect(p?.fix).not.toMatch(/Write each capability|look-alike|ASCII/);
  });

  it("a badly spelled capability still gets the spelling fix", () => {
    const ps = problemsOf((r) => {
      r.lanes[0].capabilities = ["sum marize"];
    });
    const p = ps.find((x) => x.path === "lanes.0.capabilities.0");
    expect(p?.fix).toMatch(/Write each capability/);
  });
});

describe("a lane id with control characters", () => {
  for (const [what, id, escaped] of [
    ["a NUL", "lane\u0000a", "lane\\u0000a"],
    ["an escape sequence", "lane\u001b[31ma", "lane\\u001b[31ma"],
    ["a newline", "lane\na", "lane\\na"],
  ] as const) {
    it(`${what}: one problem at lanes.0.id, the id shown escaped, nothing raw`, () => {
      const ps = problemsOf((r) => {
        r.lanes[0].id = id;
      });
      expect(ps.map((p) => p.path)).toEqual(["lanes.0.id"]);
      expect(ps[0]?.message).toContain(escaped);
      expect(text(ps)).not.toMatch(RAW_CONTROL);
    });
  }

  it("a wave naming the bad id too: its own field's problem, no knock-on ones", () => {
    const ps = problemsOf((r) => {
      r.lanes[0].id = "lane\u0000a";
      r.rollout.waves[0].lanes = ["lane\u0000a"];
    });
    expect(ps.map((p) => p.path).sort()).toEqual(["lanes.0.id", "rollout.waves.0.lanes.0"]);
    expect(text(ps)).not.toMatch(RAW_CONTROL);
  });

  it("a wave naming a lane that truly does not exist is still reported", () => {
    const ps = problemsOf((r) => {
      r.rollout.waves[0].lanes = ["lane-z\u0007"];
    });
    expect(ps.map((p) => p.path)).toContain("rollout.waves.0.lanes.0");
    expect(text(ps)).not.toMatch(RAW_CONTROL);
    expect(text(ps)).toContain("lane-z\\u0007");
  });

  it("a control character in an unknown key is escaped in path and message", () => {
    const ps = problemsOf((r) => {
      r.lanes[0]["ho\u001bst"] = "x";
    });
    expect(ps).toHaveLength(1);
    expect(text(ps)).not.toMatch(RAW_CONTROL);
    expect(ps[0]?.path).toBe("lanes.0.ho\\u001bst");
  });
});

describe("a YAML merge key", () => {
  it("is named as such at its path, the fields it would merge are not called missing", () => {
    const yaml = exampleWith((s) =>
      s.replace(
        "  - id: lane-a\n    host: gpu-a1.serving.acme.internal\n    user: deploy\n",
        "  - id: lane-a\n    <<: {host: gpu-a1.serving.acme.internal, user: deploy}\n",
      ),
    );
    let err: unknown;
    try {
      compileRecipeText(yaml, "merge.yaml");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BatonError);
    const ps = (err as BatonError).problems;
    expect(ps.map((p) => p.path)).toEqual(["lanes.0.<<"]);
    expect(ps[0]?.message).toMatch(
      /^YAML merge keys \(<<\) are not supported; write the fields out \(merge\.yaml:20:\d+\)$/,
    );
    expect(ps[0]?.message).not.toMatch(/unknown field/);
    expect(ps[0]?.fix).toMatch(/host/);
    expect(ps[0]?.fix).not.toMatch(/Did you mean/);
  });
});

describe("baton check", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "baton-checkmsg-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("prints a NUL lane id escaped, one problem, and exits 1", async () => {
    const file = path.join(dir, "nul.yaml");
    writeFileSync(
      file,
      exampleWith((s) => s.replace("id: lane-a", 'id: "lane\\0a"')),
    );
    const r = await baton(["check", file]);
    const out = r.stdout + r.stderr;
    expect(r.code, out).toBe(1);
    expect(out).toContain("lane\\u0000a");
    expect(out).not.toContain("\u0000");
    expect(out).not.toMatch(/in no wave|unknown lane|problems:/);
  }, 60_000);
});
