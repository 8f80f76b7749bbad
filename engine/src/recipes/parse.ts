/**
 * Reads a recipe file's text (YAML, or JSON, which is YAML 1.2) into a plain value, with
 * parse errors that name the file, line and column instead of a stack trace.
 */
import { Alias, type Document, isNode, Lexer, parseAllDocuments, parseDocument, visit } from "yaml";
import { BatonError } from "../domain/errors.ts";

/** Largest recipe text accepted (bytes of UTF-8): a 256-lane recipe is well under 200 KB. */
export const RECIPE_MAX_BYTES = 1024 * 1024;

/** Deepest nesting of `[` / `{` accepted in a recipe (a real one nests 4 levels). */
export const RECIPE_MAX_NESTING = 64;

/**
 * Refuses text whose flow collections (`[`, `{`; JSON is YAML flow) nest deeper than
 * `RECIPE_MAX_NESTING`, before any parser builds a tree of it: 100,000 nested `[` (a 200 KB
 * file) ran the YAML library out of memory. Uses the YAML lexer (a flat token stream, so
 * brackets inside quoted strings are not counted) and stops at the first level too deep.
 * Block nesting needs indentation, which the size limit already bounds.
 * A "body too complex" refusal, answered like an alias bomb (`yamlToJs`): a syntax-level
 * problem of the text, not of the recipe's fields.
 * @throws BatonError `bad_request` (400) with one problem naming `<filename>:<line>:<col>`.
 */
export function assertRecipeNesting(text: string, filename: string): void {
  let depth = 0;
  for (const { token, offset } of lexed(text)) {
    if (token === "[" || token === "{") {
      depth++;
      if (depth > RECIPE_MAX_NESTING) {
        throw bad(
          filename,
          position(lineStarts(text), offset),
          `brackets are nested deeper than ${RECIPE_MAX_NESTING} levels`,
          `Close the brackets: a recipe nests a few levels (lanes, waves); more than ${RECIPE_MAX_NESTING} is not a recipe.`,
        );
      }
    } else if (token === "]" || token === "}") {
      depth = Math.max(0, depth - 1);
    }
  }
}

/**
 * Refuses the first YAML tag in `text` (`!!python/object:...`, `!foo`, `!!str`, `!<...>`, a
 * `%TAG` handle's `!e!x`, the bare `!`): recipes are plain YAML. The YAML library resolves an
 * unknown tag to a plain string with only a warning and a known one (`!!binary`, `!!set`) to a
 * value no recipe field takes, so a tag is refused where it is written rather than guessed at.
 * Uses the YAML lexer: a `!` inside quotes, block scalars, comments or a plain word is no tag.
 * @throws BatonError `bad_request` (400) naming the tag and `<filename>:<line>:<col>`.
 */
export function assertNoYamlTags(text: string, filename: string): void {
  for (const { token, offset } of lexed(text)) {
    if (!token.startsWith("!")) continue;
    const pos = position(lineStarts(text), offset);
    const tag = token.length > 80 ? `${token.slice(0, 80)}…` : token;
    throw bad(
      filename,
      pos,
      `the YAML tag \`${tag}\` is not allowed`,
      `Remove \`${tag}\`: recipes are plain YAML: no tags (\`!name\`, \`!!type\`). Write the value itself; quote it ("...") if it must stay a string.`,
    );
  }
}

/** The YAML lexer's tokens of `text`, each with its offset in `text`. */
function* lexed(text: string): Generator<{ token: string; offset: number }> {
  let offset = 0;
  for (const token of new Lexer().lex(text)) {
    yield { token, offset };
    // The lexer adds one-character control tokens (document start, scalar) not in the text.
    const control = token.length === 1 && token.charCodeAt(0) < 0x20 && !/[\t\n\r]/.test(token);
    if (!control) offset += token.length;
  }
}

/** A parsed recipe file: its value and a way to find where a path is in the text. */
export interface ParsedRecipeText {
  value: unknown;
  /** 1-based line and column of the node at `path` (or its nearest present parent). */
  locate(path: readonly (string | number)[]): { line: number; col: number } | null;
}

/**
 * Parses `text` as YAML 1.2 (JSON included). Duplicate keys, several documents, unresolved
 * aliases and alias bombs are errors. Throws `BatonError` `bad_request` (400) whose message is
 * `[recipe] <filename>:<line>:<col>: <what is wrong>` and whose one problem carries the fix.
 */
/**
 * The key a `DUPLICATE_KEY` error points at (`offset`: the error's first position), as
 * written: a quoted key without its quotes, a plain key up to its colon; at most 80
 * characters. Null when nothing key-like is there.
 */
export function duplicateKeyAt(text: string, offset: number): string | null {
  const m = /^(?:"((?:[^"\\\n]|\\.){1,80})"|'([^'\n]{1,80})'|([^:#\n]{1,80}?))\s*:/.exec(
    text.slice(offset, offset + 200),
  );
  const key = m?.[1] ?? m?.[2] ?? m?.[3]?.trim();
  return key ? key : null;
}

export function parseRecipeText(text: string, filename: string): ParsedRecipeText {
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > RECIPE_MAX_BYTES) {
    throw bad(
      filename,
      null,
      `recipe is ${bytes} bytes, over the ${RECIPE_MAX_BYTES}-byte limit`,
      "Split the rollout into several recipes.",
    );
  }
  assertRecipeNesting(text, filename);
  assertNoYamlTags(text, filename);
  // Count documents first: `parseDocument` reports a second one as "use
  // YAML.parseAllDocuments()", which reads like a bug in Baton rather than in the file.
  const docs = parseAllDocuments(text, { merge: false });
  const count = Array.isArray(docs) ? docs.length : 0;
  if (count > 1) {
    const message = `[recipe] ${filename} holds ${count} YAML documents; a recipe file holds exactly one (remove the \`---\` separators)`;
    return throwMulti(message);
  }
  const doc = parseDocument(text, {
    prettyErrors: true,
    uniqueKeys: true,
    merge: false,
    strict: true,
  });
  const err = doc.errors[0];
  if (err) {
    const pos = err.linePos?.[0] ?? null;
    const what = (err.message.split("\n")[0] ?? err.message).replace(
      / at line \d+, column \d+:?$/,
      "",
    );
    const dup = err.code === "DUPLICATE_KEY" ? duplicateKeyAt(text, err.pos[0]) : null;
    const fix =
      err.code === "DUPLICATE_KEY"
        ? `Give ${dup ? `\`${dup}\`` : "each key"} once: remove or rename the repeated key.`
        : `Fix the ${filename.endsWith(".json") ? "JSON" : "YAML"} syntax there: check the indentation (spaces, not tabs), that every key is followed by \`: \`, and that brackets and quotes are closed.`;
    throw bad(filename, pos, dup ? `the key \`${dup}\` appears twice in one mapping` : what, fix);
  }
  const value = yamlToJs(doc, text, filename);
  const lineCounterStarts = lineStarts(text);
  return {
    value,
    locate(path) {
      for (let n = path.length; n >= 0; n--) {
        const node = doc.getIn(path.slice(0, n), true);
        if (isNode(node) && node.range) return position(lineCounterStarts, node.range[0]);
      }
      return null;
    },
  };
}

/** Alias expansions a recipe may make (the YAML library's `maxAliasCount`). */
export const RECIPE_MAX_ALIASES = 100;

/**
 * `doc.toJS()` with at most `RECIPE_MAX_ALIASES` alias expansions. An alias bomb ("billion
 * laughs": anchors of aliases of anchors…) or an alias before its anchor is refused at the
 * alias that tipped it over, as `<filename>:<line>:<col>`: the library's own error names no
 * place. Each alias node's `toJSON` is wrapped for this one conversion to know which alias
 * was being resolved when the library threw.
 * @throws BatonError `bad_request` (400) with one problem carrying the fix.
 */
export function yamlToJs(doc: Document, text: string, filename: string): unknown {
  const active: Alias[] = [];
  visit(doc, {
    Alias(_key, node) {
      const own = (arg: unknown, ctx: unknown) => {
        active.push(node);
        const res = Alias.prototype.toJSON.call(node, arg as string, ctx as never);
        active.pop();
        return res;
      };
      Object.defineProperty(node, "toJSON", { value: own, configurable: true });
    },
  });
  try {
    return doc.toJS({ maxAliasCount: RECIPE_MAX_ALIASES });
  } catch (e) {
    const alias = active.at(-1);
    const pos = alias?.range ? position(lineStarts(text), alias.range[0]) : null;
    const msg = e instanceof Error ? e.message : String(e);
    if (/Excessive alias count/.test(msg)) {
      throw bad(
        filename,
        pos,
        `the alias ${alias ? `*${alias.source}` : ""} expands into too much: aliases of anchors that hold aliases multiply (an "alias bomb"), and a recipe may expand at most ${RECIPE_MAX_ALIASES}`,
        `Do not use anchors and aliases (&name / *name) in a recipe: write the values out. A recipe may expand at most ${RECIPE_MAX_ALIASES} aliases, and never an alias of something that holds aliases.`,
      );
    }
    throw bad(
      filename,
      pos,
      msg.replace(
        /^Unresolved alias \(the anchor must be set before the alias\)/,
        "unresolved alias",
      ),
      "Define each anchor (&name) before its alias (*name), or write the value out instead of the alias.",
    );
  } finally {
    visit(doc, {
      Alias(_key, node) {
        delete (node as { toJSON?: unknown }).toJSON;
      },
    });
  }
}

function throwMulti(message: string): never {
  throw new BatonError("bad_request", message, [
    {
      path: "",
      message,
      fix: "Keep one recipe per file: delete the `---` lines (and split other rollouts into their own files).",
    },
  ]);
}

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === "\n") starts.push(i + 1);
  return starts;
}

function position(starts: number[], offset: number): { line: number; col: number } {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((starts[mid] ?? 0) <= offset) lo = mid;
    else hi = mid - 1;
  }
  return { line: lo + 1, col: offset - (starts[lo] ?? 0) + 1 };
}

function bad(
  filename: string,
  pos: { line: number; col: number } | null,
  what: string,
  fix: string,
): BatonError {
  const where = pos ? `${filename}:${pos.line}:${pos.col}` : filename;
  const message = `[recipe] ${where}: ${what}${pos ? ` (line ${pos.line}, column ${pos.col})` : ""}`;
  return new BatonError("bad_request", message, [{ path: "", message, fix }]);
}
