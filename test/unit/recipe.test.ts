import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { BatonError } from "../../engine/src/domain/errors.ts";
import { compileRecipeText, type LocatedProblem } from "../../engine/src/recipes/compile-text.ts";
import { formatProblems } from "../../engine/src/recipes/format.ts";
import { RECIPE_SCHEMA_PATH, recipeJsonSchemaText } from "../../engine/src/recipes/json-schema.ts";
import { parseRecipeText, RECIPE_MAX_BYTES } from "../../engine/src/recipes/parse.ts";
import { goodRecipe } from "./recipe-fixture.ts";

function thrown(f: () => unknown): BatonError {
  try {
    f();
  } catch (e) {
    if (e instanceof BatonError) return e;
    throw new Error(`expected a BatonError, got ${String(e)}`);
  }
  throw new Error("expected a throw");
}

const EXAMPLE = "recipes/example.yaml";

describe("recipes/example.yaml", () => {
  it("passes the contract check and compiles: 3 lanes, canary first, 10 -> 50 -> 100", () => {
    const c = compileRecipeText(readFileSync(EXAMPLE, "utf8"), EXAMPLE);
    expect(c.manifest.lanes.map((l) => l.id)).toEqual(["lane-a", "lane-b", "lane-c"]);
    expect(c.manifest.waves.map((w) => [w.lanes, w.traffic])).toEqual([
      [["lane-a"], 10],
      [["lane-b"], 50],
      [["lane-c"], 100],
    ]);
    expect(c.manifest.steps).toHaveLength(24);
    // No pin: a made-up sha would have every preflight refused; the pin is shown commented out.
    expect(c.manifest.tool_revision).toBeNull();
    expect(readFileSync(EXAMPLE, "utf8")).toMatch(/^# tool_revision: /m);
    expect(c.manifest_digest).toMatch(/^[a-f0-9]{64}$/);
  });
});

describe("the recipe JSON Schema", () => {
  it(`is current: ${RECIPE_SCHEMA_PATH} equals what \`npm run schema\` writes`, () => {
    const committed = readFileSync(RECIPE_SCHEMA_PATH, "utf8");
    expect(committed, "the recipe schema changed: run `npm run schema` and commit the file").toBe(
      recipeJsonSchemaText(),
    );
  });

  it("describes the fields editors need, strictly", () => {
    const s = JSON.parse(recipeJsonSchemaText());
    expect(s.required).toEqual(["name", "model", "image", "previous_image", "lanes", "rollout"]);
    expect(s.additionalProperties).toBe(false);
    expect(s.properties.lanes.items.required).toContain("host_key");
    expect(s.properties.lanes.items.properties.port.default).toBe(22);
    expect(new RegExp(s.properties.image.pattern).test(goodRecipe().image)).toBe(true);
    expect(new RegExp(s.properties.image.pattern).test("ghcr.io/acme/summarizer:v7")).toBe(false);
  });
});

describe("parseRecipeText", () => {
  it("reads YAML and JSON to the same value", () => {
    const yaml = parseRecipeText(readFileSync(EXAMPLE, "utf8"), EXAMPLE).value as { name: string };
    expect(yaml.name).toBe("summarizer-v7-rollout");
    const json = parseRecipeText(JSON.stringify(goodRecipe(), null, 2), "r.json").value;
    expect(json).toEqual(goodRecipe());
  });

  it.each([
    ["a YAML syntax error", "name: x\nlanes:\n  - id: a\n   host: b\n", "r.yaml", 4],
    ["an unclosed flow sequence", "name: x\nrollout:\n  waves: [1, 2\nmodel: m\n", "r.yaml", 4],
    ["a duplicate key", "name: x\nmodel: m\nname: y\n", "r.yaml", 3],
    ["a JSON syntax error", '{\n  "name": "x",,\n  "model": "m"\n}\n', "r.json", 2],
  ])("%s gives file:line:column, not a stack trace", (_label, text, file, line) => {
    const e = thrown(() => parseRecipeText(text, file));
    expect(e.status).toBe(400);
    expect(e.message).toMatch(
      new RegExp(`^\\[recipe\\] ${file.replace(".", "\\.")}:${line}:\\d+: `),
    );
    expect(e.message).toContain(`(line ${line}, column`);
    expect(e.message).not.toMatch(/\n\s+at /);
    expect(e.problems[0]?.fix).toMatch(/\S/);
  });

  it.each([
    ["plain", "name: x\nmodel: m\nname: y\n", "name"],
    ["nested", "name: x\nrollout:\n  waves: []\n  waves: []\n", "waves"],
    ["quoted", 'name: x\n"model": m\n"model": n\n', "model"],
    ["in JSON", '{"image": "a", "image": "b"}', "image"],
  ])("a duplicate key (%s) is named in the message and the fix", (_l, text, key) => {
    const e = thrown(() => parseRecipeText(text, "r.yaml"));
    expect(e.message).toContain(`the key \`${key}\` appears twice`);
    expect(e.problems[0]?.fix).toContain(`Give \`${key}\` once`);
  });

  it("refuses an unresolved alias and several documents", () => {
    expect(thrown(() => parseRecipeText("a: *nope\n", "r.yaml")).message).toMatch(
      /^\[recipe\] r\.yaml/,
    );
    expect(thrown(() => parseRecipeText("a: 1\n---\nb: 2\n", "r.yaml")).status).toBe(400);
  });

  it.each([
    [
      "a Python object tag",
      "name: x\nmodel: !!python/object:os.system rm\n",
      "!!python/object:os.system",
      2,
      8,
    ],
    ["a local tag", "name: x\nrollout:\n  waves:\n    - traffic: !foo 5\n", "!foo", 4, 16],
    ["a core tag", "name: !!str x\n", "!!str", 1, 7],
    [
      "a verbatim tag",
      "name: x\nlanes: [a, !<tag:example.com,2000:x> b]\n",
      "!<tag:example.com,2000:x>",
      2,
      12,
    ],
    ["the non-specific tag", "name: ! x\n", "!", 1, 7],
    ["a %TAG handle", "%TAG !e! tag:example.com,2000:\n---\nname: !e!x y\n", "!e!x", 3, 7],
  ])("refuses %s, naming it, its file:line:col and the fix", (_l, text, tag, line, col) => {
    const e = thrown(() => parseRecipeText(text, "r.yaml"));
    expect(e.status).toBe(400);
    expect(e.message).toBe(
      `[recipe] r.yaml:${line}:${col}: the YAML tag \`${tag}\` is not allowed (line ${line}, column ${col})`,
    );
    expect(e.problems[0]?.fix).toContain(`Remove \`${tag}\``);
    expect(e.problems[0]?.fix).toContain("recipes are plain YAML: no tags");
  });

  it("refuses a `%YAML 1.1` directive, naming it and the fix; `%YAML 1.2` reads as without one", () => {
    const e = thrown(() => parseRecipeText("%YAML 1.1\n---\nname: x\nenabled: yes\n", "r.yaml"));
    expect(e.status).toBe(400);
    expect(e.message).toBe(
      "[recipe] r.yaml:1:1: the `%YAML 1.1` directive is not allowed: recipes are read as YAML 1.2 (line 1, column 1)",
    );
    expect(e.problems[0]?.fix).toContain("Remove the `%YAML 1.1` line");
    expect(parseRecipeText("%YAML 1.2\n---\nname: x\nenabled: yes\n", "r.yaml").value).toEqual({
      name: "x",
      enabled: "yes",
    });
  });

  it("a `!` inside quotes, block scalars, comments and plain words is no tag", () => {
    const text = "name: \"!x\"\nmodel: '!y'\nimage: hi!there # !z\nnotes: |\n  !w\n";
    expect(parseRecipeText(text, "r.yaml").value).toEqual({
      name: "!x",
      model: "!y",
      image: "hi!there",
      notes: "!w\n",
    });
  });

  it("refuses an alias bomb", () => {
    const lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
    for (let i = 0; i < 8; i++) {
      const prev = String.fromCharCode(97 + i);
      const cur = String.fromCharCode(98 + i);
      lines.push(`${cur}: &${cur} [${Array(10).fill(`*${prev}`).join(", ")}]`);
    }
    const e = thrown(() => parseRecipeText(`${lines.join("\n")}\n`, "bomb.yaml"));
    expect(e.status).toBe(400);
    // The library's own text names no place; the refusal names the alias that tipped it over.
    expect(e.message).toMatch(
      /^\[recipe\] bomb\.yaml:\d+:\d+: the alias \*[a-i] expands into too much/,
    );
    expect(e.message).not.toContain("resource exhaustion");
    expect(e.problems[0]?.fix).toMatch(/^Do not use anchors and aliases .* at most 100 aliases/);
  });
});

describe("compileRecipeText", () => {
  it("lists every contract problem with the line of the field", () => {
    const text = readFileSync(EXAMPLE, "utf8")
      .replace(/^image: .*$/m, "image: ghcr.io/acme/summarizer:v7")
      .replace("traffic: 50 ", "traffic: 5  ");
    const e = thrown(() => compileRecipeText(text, EXAMPLE));
    expect(e.status).toBe(422);
    expect(e.code).toBe("contract_failed");
    expect(e.message).toMatch(
      /^\[recipe\] recipes\/example\.yaml failed the contract check: image: .* \(and 1 more\)$/,
    );
    const imageLine = text.split("\n").findIndex((l) => l.startsWith("image:")) + 1;
    const image = e.problems.find((p) => p.path === "image");
    expect(image?.message).toContain(`(recipes/example.yaml:${imageLine}:`);
    expect(e.problems.find((p) => p.path === "rollout.waves.1.traffic")?.message).toMatch(
      /goes down from 10% .* \(recipes\/example\.yaml:\d+:\d+\)/,
    );
  });

  it("an empty file is a contract problem, not a crash", () => {
    const e = thrown(() => compileRecipeText("", "empty.yaml"));
    expect(e.status).toBe(422);
    expect(e.problems[0]).toMatchObject({ path: "", fix: expect.stringMatching(/YAML mapping/) });
  });
});

describe("formatProblems", () => {
  const text = readFileSync(EXAMPLE, "utf8").replace(/^image: .*$/m, "image: ghcr.io/acme/x:v7");
  const problems = (() => {
    try {
      compileRecipeText(text, EXAMPLE);
    } catch (e) {
      if (e instanceof BatonError) return e.problems as LocatedProblem[];
    }
    throw new Error("expected a contract failure");
  })();

  it("carries the line and column of each problem", () => {
    const imageLine = text.split("\n").findIndex((l) => l.startsWith("image:")) + 1;
    // The value's position: `image: ` is 7 characters.
    expect(problems[0]).toMatchObject({ path: "image", line: imageLine, column: 8 });
  });

  it("renders text and GitHub annotations", () => {
    expect(formatProblems(problems, EXAMPLE)).toMatch(
      /^recipes\/example\.yaml image: image must be pinned by digest.*\n {2}fix: Pin the image/,
    );
    const gh = formatProblems(problems, EXAMPLE, "github");
    expect(gh).toMatch(
      /^::error file=recipes\/example\.yaml,line=\d+,col=8,title=recipe image::image must be pinned/,
    );
    expect(gh.split("\n")).toHaveLength(problems.length);
  });

  it("refuses a recipe text over the size limit (413, as the engine answers an oversize body)", () => {
    const e = thrown(() => parseRecipeText(`# ${"x".repeat(RECIPE_MAX_BYTES)}\n`, "big.yaml"));
    expect(e.status).toBe(413);
    expect(e.message).toMatch(/over the 1048576-byte limit/);
  });
});
