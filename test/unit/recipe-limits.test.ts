/**
 * Field length limits of the recipe and the compile-time dispatch size check: an oversize
 * recipe is refused by the contract check (what `baton check` runs) naming the field, instead
 * of passing and then failing every runner step with `dispatch_failed`. Also: a file with
 * several YAML documents gets a message that says so.
 */
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { checkAndCompile } from "../../engine/src/domain/compile.ts";
import {
  checkRecipe,
  checkStepTable,
  MAX_RUNNER_ARGS_BYTES,
} from "../../engine/src/domain/contract-check.ts";
import { BatonError, type Problem } from "../../engine/src/domain/errors.ts";
import { RECIPE_LIMITS } from "../../engine/src/domain/recipe.ts";
import { GITHUB_DISPATCH_LIMITS } from "../../engine/src/protocol/messages.ts";
import { compileRecipeText } from "../../engine/src/recipes/compile-text.ts";
import { parseRecipeText } from "../../engine/src/recipes/parse.ts";
import { goodRecipe, NEW_DIGEST } from "./recipe-fixture.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests break recipes in arbitrary ways
type Mutable = Record<string, any>;

function problemsOf(mutate: (r: Mutable) => void): Problem[] {
  const r = structuredClone(goodRecipe()) as Mutable;
  mutate(r);
  const res = checkRecipe(r);
  if (res.ok) throw new Error("expected the contract check to fail");
  return res.problems;
}

const pathsOf = (ps: Problem[]) => ps.map((p) => p.path);

describe("recipe field limits", () => {
  const cases: [string, (r: Mutable) => void, string, RegExp][] = [
    [
      "host",
      (r) => (r.lanes[0].host = `${"a".repeat(250)}.example`),
      "lanes.0.host",
      /at most 253/,
    ],
    ["user", (r) => (r.lanes[0].user = "u".repeat(33)), "lanes.0.user", /at most 32/],
    ["lane id", (r) => (r.lanes[0].id = "l".repeat(65)), "lanes.0.id", /at most 64/],
    ["queue", (r) => (r.lanes[0].queue = "q".repeat(129)), "lanes.0.queue", /at most 128/],
    [
      "capability",
      (r) => (r.lanes[0].capabilities = ["c".repeat(65)]),
      "lanes.0.capabilities.0",
      /at most 64 characters/,
    ],
    [
      "capabilities",
      (r) => (r.lanes[0].capabilities = Array.from({ length: 65 }, (_, i) => `cap-${i}`)),
      "lanes.0.capabilities",
      /at most 64 capabilities/,
    ],
    [
      "health_url (70 KB)",
      (r) => (r.lanes[0].health_url = `http://gpu-0.example/${"x".repeat(70_000)}`),
      "lanes.0.health_url",
      /at most 400/,
    ],
    ["model", (r) => (r.model = "m".repeat(65)), "model", /at most 64/],
    ["name", (r) => (r.name = "n".repeat(129)), "name", /1–128/],
  ];
  it.each(cases)("refuses an oversize %s naming the field with a fix", (_, mutate, path, msg) => {
    const ps = problemsOf(mutate);
    const p = ps.find((x) => x.path === path);
    expect(p, JSON.stringify(ps)).toBeDefined();
    expect(p?.message).toMatch(msg);
    expect(p?.fix.length).toBeGreaterThan(0);
  });

  it("accepts every field at its limit", () => {
    const r = structuredClone(goodRecipe()) as Mutable;
    r.name = "n".repeat(RECIPE_LIMITS.name);
    r.model = "m".repeat(RECIPE_LIMITS.model);
    r.lanes[0].queue = "q".repeat(RECIPE_LIMITS.queue);
    r.lanes[0].capabilities = Array.from({ length: 64 }, (_, i) => `${i}`.padEnd(64, "c"));
    r.lanes[0].health_url = `http://gpu-0.example/${"x".repeat(RECIPE_LIMITS.health_url - 21)}`;
    expect(r.lanes[0].health_url).toHaveLength(RECIPE_LIMITS.health_url);
    const res = checkRecipe(r);
    expect(res.ok, JSON.stringify(res)).toBe(true);
  });

  it("refuses more than 256 lanes", () => {
    const ps = problemsOf((r) => {
      r.lanes = Array.from({ length: 257 }, (_, i) => ({ ...r.lanes[0], id: `lane-${i}` }));
    });
    expect(ps.find((p) => p.path === "lanes")?.message).toMatch(/at most 256 lanes/);
  });
});

describe("dispatch payload size check", () => {
  it("refuses a 70 KB image by its length limit, naming the field", () => {
    // Every field of the runner args is length-capped (protocol/fields.ts); the payload size
    // check stays as the backstop (checkStepTable below).
    const huge = `ghcr.io/acme/${"s".repeat(70_000)}@sha256:${NEW_DIGEST}`;
    const ps = problemsOf((r) => (r.image = huge));
    const p = ps.find((x) => x.path === "image");
    expect(p, JSON.stringify(pathsOf(ps))).toBeDefined();
    expect(p?.message).toMatch(/at most 456 characters/);
    expect(p?.fix).toMatch(/Pin the image by digest/);
  });

  it("keeps the estimate under GitHub's limit with the overhead reserved", () => {
    expect(MAX_RUNNER_ARGS_BYTES).toBe(GITHUB_DISPATCH_LIMITS.client_payload_max_bytes - 2048);
  });

  it("checkStepTable refuses a runner step whose args are too big", () => {
    const c = checkAndCompile(goodRecipe());
    if (!c.ok) throw new Error("good recipe failed");
    const steps = structuredClone(c.manifest.steps);
    const i = steps.findIndex((s) => s.forward.kind === "runner");
    const fwd = steps[i]!.forward;
    if (fwd.kind !== "runner") throw new Error("no runner step");
    fwd.args = { ...fwd.args, pad: "p".repeat(MAX_RUNNER_ARGS_BYTES) };
    const ps = checkStepTable(steps);
    expect(pathsOf(ps)).toContain(`steps.${i}.forward.args`);
    expect(checkStepTable(c.manifest.steps)).toEqual([]);
  });

  it("baton check's compile path refuses a 70 KB health_url with the field and its line", () => {
    const r = structuredClone(goodRecipe()) as Mutable;
    r.lanes[1].health_url = `http://gpu-1.example/${"x".repeat(70_000)}`;
    let err: unknown;
    try {
      compileRecipeText(stringify(r), "big.yaml");
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BatonError);
    const be = err as BatonError;
    expect(be.status).toBe(422);
    expect(pathsOf(be.problems)).toContain("lanes.1.health_url");
  });
});

describe("several YAML documents", () => {
  it("says how many documents the file holds and to remove the separators", () => {
    for (const [text, n] of [
      ["a: 1\n---\nb: 2\n", 2],
      ["---\na: 1\n---\nb: 2\n---\nc: 3\n", 3],
    ] as const) {
      let err: unknown;
      try {
        parseRecipeText(text, "file.yaml");
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(BatonError);
      const be = err as BatonError;
      expect(be.status).toBe(400);
      expect(be.message).toBe(
        `[recipe] file.yaml holds ${n} YAML documents; a recipe file holds exactly one (remove the \`---\` separators)`,
      );
      expect(be.message).not.toMatch(/parseAllDocuments|indentation/);
      expect(be.problems[0]?.fix).not.toMatch(/indentation/);
    }
  });

  it("still accepts one document with a leading --- marker", () => {
    expect(parseRecipeText("---\na: 1\n", "file.yaml").value).toEqual({ a: 1 });
  });
});

describe("mapping keys that are lists or mappings", () => {
  it("are refused where they stand, as the property name they would become is not the text", () => {
    for (const [text, line, col] of [
      ["a: 1\n? [x, y]\n: 2\n", 2, 3],
      ["a:\n  {b: 1}: 2\n", 2, 3],
      ["k: &k [x]\nm:\n  *k : 1\n", 3, 3],
    ] as const) {
      let err: unknown;
      try {
        parseRecipeText(text, "file.yaml");
      } catch (e) {
        err = e;
      }
      expect(err, text).toBeInstanceOf(BatonError);
      const be = err as BatonError;
      expect(be.status).toBe(400);
      expect(be.message).toBe(
        `[recipe] file.yaml:${line}:${col}: a mapping key is itself a list or a mapping; keys are plain values (text or numbers) (line ${line}, column ${col})`,
      );
    }
  });

  it("keys that are plain values, aliases of them and null are read as before", () => {
    expect(parseRecipeText("a: &n 1\nm:\n  *n : x\n  ~: y\n  2: z\n", "file.yaml").value).toEqual({
      a: 1,
      m: { "1": "x", "": "y", "2": "z" },
    });
  });
});
