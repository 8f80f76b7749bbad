/**
 * Recipe in, release plan out, for the engine's `POST /v1/releases` and the CLI: parse,
 * contract check, compile, digest.
 */
import { checkAndCompile, type ObservedLane } from "../domain/compile.ts";
import { BatonError, type Problem } from "../domain/errors.ts";
import type { Recipe } from "../domain/recipe.ts";
import type { Manifest } from "../domain/types.ts";
import { manifestDigest } from "./digest.ts";
import { type ParsedRecipeText, parseRecipeText } from "./parse.ts";

/** A recipe that passed the contract check, compiled and digested. */
export interface CompiledRecipe {
  recipe: Recipe;
  manifest: Manifest;
  /** Canonical JSON of `manifest`: the bytes `manifest_digest` is taken over. */
  canonical: string;
  /** sha256 hex of `canonical`. */
  manifest_digest: string;
}

/**
 * Checks and compiles a recipe already parsed (e.g. a JSON request body), against the observed
 * baseline when given (docs/state-machine.md "The observed baseline").
 * Throws `BatonError` `contract_failed` (422) listing every problem with path and fix.
 */
export function compileRecipeInput(
  input: unknown,
  baseline?: readonly ObservedLane[],
): CompiledRecipe {
  const result = checkAndCompile(input, baseline);
  if (!result.ok) throw failed(result.problems, null, "");
  const { recipe, manifest, canonical } = result;
  return { recipe, manifest, canonical, manifest_digest: manifestDigest(canonical) };
}

/**
 * Parses (YAML or JSON), checks and compiles a recipe file's text. Problems name the line of
 * the field they concern. Throws `BatonError` `bad_request` (400) for a syntax error with
 * file, line and column, or `contract_failed` (422) listing every problem.
 */
export function compileRecipeText(text: string, filename: string): CompiledRecipe {
  const parsed = parseRecipeText(text, filename);
  const result = checkAndCompile(parsed.value);
  if (!result.ok) throw failed(result.problems, parsed, filename);
  const { recipe, manifest, canonical } = result;
  return { recipe, manifest, canonical, manifest_digest: manifestDigest(canonical) };
}

/** A problem with the 1-based line and column of its value in the recipe file, when known. */
export type LocatedProblem = Problem & { line?: number; column?: number };

function failed(
  problems: Problem[],
  parsed: ParsedRecipeText | null,
  filename: string,
): BatonError {
  const located = problems.map((p): LocatedProblem => {
    if (!parsed) return p;
    const path =
      p.path === "" ? [] : p.path.split(".").map((k) => (/^\d+$/.test(k) ? Number(k) : k));
    const pos = parsed.locate(path);
    return pos
      ? {
          ...p,
          message: `${p.message} (${filename}:${pos.line}:${pos.col})`,
          line: pos.line,
          column: pos.col,
        }
      : p;
  });
  const first = located[0];
  const more = located.length > 1 ? ` (and ${located.length - 1} more)` : "";
  return new BatonError(
    "contract_failed",
    `[recipe] ${filename || "recipe"} failed the contract check: ${first ? `${first.path || "recipe"}: ${first.message}` : ""}${more}`,
    located,
  );
}
