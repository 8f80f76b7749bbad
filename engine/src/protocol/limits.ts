/**
 * Every limit on what a request body or a recipe file may hold, in one place (docs/recipes.md
 * "Limits", docs/guarantees.md). Each body is checked against its limits before any parser
 * builds a value of it, in one linear pass that stops at the first limit passed:
 *
 * - `bytes`: size in bytes of UTF-8. Over it: 413 (the engine reads nothing past it).
 * - `depth`: collections open at once (mappings, sequences, JSON objects and arrays, YAML
 *   block collections nested by indentation or by `- ` / `? ` on one line, flow `[` / `{`).
 * - `entries`: mapping keys plus sequence items, counted together over the whole body.
 * - `tokens` (YAML only): the YAML lexer's tokens (each indicator, scalar, comment, run of
 *   spaces and line break). The YAML library reads about 300,000 tokens a second here, so this
 *   bounds how long one recipe holds the engine (JSON is read natively, far faster).
 *
 * Past `depth`, `entries` or `tokens` (or `aliases`, for YAML): 400 `bad_request`, "too complex to read",
 * naming the limit and the line and column where it was passed.
 */
import { CALLBACK_BODY_MAX_BYTES } from "./messages.ts";

/** The limits of one kind of body. */
export interface BodyLimits {
  /** Largest body, in bytes of UTF-8. */
  bytes: number;
  /** Most collections open at once. */
  depth: number;
  /** Most mapping keys plus sequence items in the whole body. */
  entries: number;
}

/**
 * A recipe: `POST /v1/releases`, `…/roll-forward`, `baton check`, the recipe workflow. A
 * 256-lane recipe with 8 capabilities a lane is about 100 KB of YAML, 6,500 entries and
 * 32,000 tokens (with 64 capabilities a lane, 20,000 entries); it nests 4 levels.
 */
export const RECIPE_LIMITS: Readonly<BodyLimits & { tokens: number; aliases: number }> = {
  bytes: 1024 * 1024,
  depth: 64,
  entries: 20_000,
  tokens: 100_000,
  /** YAML alias expansions (the `yaml` library's `maxAliasCount`). */
  aliases: 100,
};

/** A runner's preflight or callback (its `checks` are kept verbatim; its log tail is cut to 256 KiB). */
export const RUNNER_BODY_LIMITS: Readonly<BodyLimits> = {
  bytes: CALLBACK_BODY_MAX_BYTES,
  depth: 64,
  entries: 100_000,
};

/** Everything else: operator verbs' JSON bodies, the sign-in form and the dashboard's forms. */
export const OTHER_BODY_LIMITS: Readonly<BodyLimits> = {
  bytes: 64 * 1024,
  depth: 64,
  entries: 1_000,
};
