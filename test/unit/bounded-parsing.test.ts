/**
 * Bounded parsing (protocol/limits.ts): every recipe (request body, signed start's text,
 * `baton check`'s file) and every JSON body is checked for size, depth and entries before a
 * parser builds a value of it. A 2 KB recipe of `"- "` × 1000 ran the YAML library out of stack
 * and then memory (the process exited 134); 40,000 keys took 9 s to refuse.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import * as yaml from "yaml";
import { runCli } from "../../engine/src/cli/program.ts";
import { readRecipeFile } from "../../engine/src/demo/recipe.ts";
import { checkAndCompile } from "../../engine/src/domain/compile.ts";
import { BatonError } from "../../engine/src/domain/errors.ts";
import { UNKNOWN_KEYS_TOLD } from "../../engine/src/domain/schema-problems.ts";
import { bodyLimitFor } from "../../engine/src/http/body-limit.ts";
import { assertJsonBounds } from "../../engine/src/http/bounded-json.ts";
import { parseRecipeBody, parseStartBody } from "../../engine/src/http/routes/releases.ts";
import { RECIPE_LIMITS, RUNNER_BODY_LIMITS } from "../../engine/src/protocol/limits.ts";
import { parseRecipeText } from "../../engine/src/recipes/parse.ts";
import { readRecipeFileText } from "../../engine/src/recipes/read-file.ts";
import { goodRecipe } from "./recipe-fixture.ts";

function thrown(f: () => unknown): BatonError {
  try {
    f();
  } catch (e) {
    if (e instanceof BatonError) return e;
    throw e;
  }
  throw new Error("expected a BatonError");
}

const seq = (n: number) => `${"- ".repeat(n)}x`;
const keyNest = (n: number) => `${"? ".repeat(n)}x`;
const indented = (n: number) =>
  `${Array.from({ length: n }, (_, i) => `${" ".repeat(i)}k${i}:`).join("\n")} x\n`;
const brackets = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;
const manyKeys = (n: number) => {
  const o: Record<string, unknown> = { ...goodRecipe() };
  for (let i = 0; i < n; i++) o[`k${i}`] = i;
  return o;
};

describe("nesting, by the YAML parser's own structure", () => {
  const deep: [string, string][] = [
    ['"- " × 1000 then x', seq(1000)],
    ['"? " × 1000 then x', keyNest(1000)],
    ["mappings nested by indentation, 70 levels", indented(70)],
    ['"- " × 65', seq(65)],
    ["brackets × 65", brackets(65)],
  ];
  it.each(deep)("%s: 400 too complex, naming the limit and line:column", (_, text) => {
    for (const read of [
      () => parseRecipeText(text, "deep.yaml"),
      () => parseRecipeBody(text, "application/yaml"),
      () => parseRecipeBody(text, undefined),
    ]) {
      const e = thrown(read);
      expect(e.status).toBe(400);
      expect(e.code).toBe("bad_request");
      expect(e.message).toMatch(/too complex to read: the text is nested deeper than 64 levels/);
      expect(e.message).toMatch(/:\d+:\d+: /);
      expect(e.problems[0]?.fix).toMatch(/nest less/i);
    }
  });

  it("64 levels are read (the limit itself is allowed)", () => {
    expect(() => parseRecipeBody(seq(64), "application/yaml")).not.toThrow();
    expect(() => parseRecipeBody(brackets(64), "application/json")).not.toThrow();
    expect(() => parseRecipeBody(indented(63), "application/yaml")).not.toThrow();
  });

  it("wrapped as a signed start's recipe text: the same refusal at body.recipe", () => {
    for (const text of [seq(1000), keyNest(1000)]) {
      const e = thrown(() => parseStartBody(JSON.stringify({ recipe: text }), "application/json"));
      expect(e.status).toBe(400);
      expect(e.problems[0]?.path).toBe("body.recipe");
      expect(e.message).toMatch(/nested deeper than 64 levels/);
    }
  });
});

describe("entries and tokens", () => {
  it("more keys than the limit, JSON or YAML: 400 naming the limit, before composing", () => {
    const compose = vi.spyOn(yaml.Composer.prototype, "compose");
    try {
      const n = RECIPE_LIMITS.entries + 10;
      for (const [text, type] of [
        [JSON.stringify(manyKeys(n)), "application/json"],
        [yaml.stringify(manyKeys(n)), "application/yaml"],
      ] as const) {
        const e = thrown(() => parseRecipeBody(text, type));
        expect(e.status, type).toBe(400);
        expect(e.message, type).toMatch(/too complex to read: the text holds more than/);
      }
      expect(compose).not.toHaveBeenCalled();
    } finally {
      compose.mockRestore();
    }
  });

  it("a flow mapping of bare keys counts every key", () => {
    const text = `{${Array.from({ length: RECIPE_LIMITS.entries + 1 }, (_, i) => `k${i}`).join(",")}}`;
    expect(thrown(() => parseRecipeText(text, "flow.yaml")).message).toMatch(
      new RegExp(`more than ${RECIPE_LIMITS.entries} entries`),
    );
  });

  it("more YAML tokens than the limit (blank lines count): 400 naming the limit", () => {
    const text = `name: x\n${"\n".repeat(RECIPE_LIMITS.tokens)}`;
    const e = thrown(() => parseRecipeText(text, "blank.yaml"));
    expect(e.status).toBe(400);
    expect(e.message).toMatch(new RegExp(`more than ${RECIPE_LIMITS.tokens} YAML tokens`));
  });

  it("under the limits, a duplicate among thousands of keys is still found (one set per mapping)", () => {
    const o = manyKeys(5_000);
    const text = `${yaml.stringify(o)}k17: again\n`;
    expect(thrown(() => parseRecipeText(text, "dup.yaml")).message).toMatch(
      /the key `k17` appears twice/,
    );
    const json = `${JSON.stringify(o).slice(0, -1)},"k17":1}`;
    expect(thrown(() => parseRecipeBody(json, "application/json")).problems[0]?.message).toMatch(
      /duplicate key "k17"/,
    );
  });
});

describe("parsed once", () => {
  it("a YAML request body is lexed once (the duplicate check reads the same tree)", () => {
    const lex = vi.spyOn(yaml.Lexer.prototype, "lex");
    try {
      parseRecipeBody(yaml.stringify(goodRecipe()), "application/yaml");
      expect(lex).toHaveBeenCalledTimes(1);
      lex.mockClear();
      parseRecipeText(yaml.stringify(goodRecipe()), "r.yaml");
      expect(lex).toHaveBeenCalledTimes(1);
    } finally {
      lex.mockRestore();
    }
  });
});

describe("size", () => {
  it("a recipe text over the byte limit is 413", () => {
    const e = thrown(() => parseRecipeText(`# ${"x".repeat(RECIPE_LIMITS.bytes)}\n`, "big.yaml"));
    expect(e.status).toBe(413);
    expect(e.message).toMatch(/over the 1048576-byte limit/);
  });
});

describe("JSON bodies", () => {
  const where = { component: "[engine]", where: "callback body", path: "body" };
  it("refuses nesting past the depth and entries past the limit, naming line and column", () => {
    const deep = `{"checks": ${brackets(65)}}`;
    const e = thrown(() => assertJsonBounds(deep, RUNNER_BODY_LIMITS, where));
    expect(e.message).toMatch(
      /^\[engine\] callback body:1:\d+: too complex to read: .*deeper than 64/,
    );
    const wide = `[${"0,".repeat(RUNNER_BODY_LIMITS.entries)}0]`;
    expect(thrown(() => assertJsonBounds(wide, RUNNER_BODY_LIMITS, where)).message).toMatch(
      /more than 100000 entries/,
    );
    expect(() =>
      assertJsonBounds(`{"a": ${brackets(63)}}`, RUNNER_BODY_LIMITS, where),
    ).not.toThrow();
  });

  it("brackets and quotes inside strings are not structure", () => {
    const text = JSON.stringify({ log: "[".repeat(5_000), k: '"{"' });
    expect(() => assertJsonBounds(text, RUNNER_BODY_LIMITS, where)).not.toThrow();
  });

  it("finds a key given twice, escaped or not, only within one object", () => {
    const dup = (key: string) => new Error(`dup ${key}`);
    expect(() =>
      assertJsonBounds('{"a": {"x": 1}, "b": {"x": 2}}', RUNNER_BODY_LIMITS, where, dup),
    ).not.toThrow();
    expect(() =>
      assertJsonBounds('{"a": 1, "\\u0061": 2}', RUNNER_BODY_LIMITS, where, dup),
    ).toThrow("dup a");
  });
});

describe("baton check", () => {
  const dir = mkdtempSync(join(tmpdir(), "baton-bounded-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const io = () => {
    let out = "";
    const sink = {
      write: (s: string) => {
        out += s;
        return true;
      },
    };
    return { io: { out: sink, err: sink }, text: () => out };
  };

  it.each([
    ["seq.yaml", seq(1000), /nested deeper than 64 levels/],
    ["key.yaml", keyNest(1000), /nested deeper than 64 levels/],
    ["big.yaml", `# ${"x".repeat(RECIPE_LIMITS.bytes + 1)}\n`, /over the 1048576-byte limit/],
  ])("%s: FAIL naming the limit, exit 1, no crash", async (name, text, msg) => {
    const file = join(dir, name);
    writeFileSync(file, text);
    const o = io();
    // biome-ignore lint/suspicious/noExplicitAny: a minimal writable for the CLI's io
    const code = await runCli(["check", file], o.io as any);
    expect(code).toBe(1);
    expect(o.text()).toMatch(msg);
    expect(o.text()).not.toMatch(/FATAL|out of memory|\n\s+at /);
  });

  it("a device (/dev/zero, which never ends): refused before any read as not a regular file, exit 2", async () => {
    const o = io();
    // biome-ignore lint/suspicious/noExplicitAny: a minimal writable for the CLI's io
    const code = await runCli(["check", "/dev/zero"], o.io as any);
    expect(code).toBe(2);
    expect(o.text()).toContain("/dev/zero (a device, not a regular file)");
    expect(o.text()).not.toMatch(/FATAL|out of memory|\n\s+at /);
  });

  it("the demo reads a recipe through the same read: a device is refused naming the file", () => {
    expect(() => readRecipeFile("/dev/zero")).toThrow(
      "[demo] cannot read recipe /dev/zero: a device, not a regular file",
    );
  });

  it("readRecipeFileText stops one byte past the limit and reads a small file whole", () => {
    const file = join(dir, "small.yaml");
    writeFileSync(file, "0123456789");
    expect(readRecipeFileText(file, 10)).toBe("0123456789");
    expect(() => readRecipeFileText(file, 9)).toThrow(/over the 9-byte limit/);
    expect(() => readRecipeFileText(dir, 10)).toThrow("a folder, not a regular file");
  });
});

describe("body limits by route", () => {
  it("a roll forward's fixed recipe gets the recipe's byte limit, like a start", () => {
    expect(bodyLimitFor("POST", "/v1/releases")).toBe(RECIPE_LIMITS.bytes);
    expect(bodyLimitFor("POST", "/v1/releases/r7/roll-forward")).toBe(RECIPE_LIMITS.bytes);
    expect(bodyLimitFor("POST", "/v1/releases/r7/abort")).toBe(64 * 1024);
  });
});

describe("unknown keys within the limits", () => {
  it("thousands of unknown keys: the first 20 named, one problem counts the rest (the answer stays small)", () => {
    const res = checkAndCompile(manyKeys(5_000));
    expect(res.ok).toBe(false);
    if (res.ok) return;
    const unknown = res.problems.filter((p) => /unknown field/.test(p.message));
    expect(unknown).toHaveLength(UNKNOWN_KEYS_TOLD + 1);
    expect(unknown[0]?.message).toBe(
      `${5_000 - UNKNOWN_KEYS_TOLD} more unknown fields in the recipe (5000 in all; the first ${UNKNOWN_KEYS_TOLD} are listed)`,
    );
    expect(JSON.stringify(res.problems).length).toBeLessThan(20_000);
  });
});
