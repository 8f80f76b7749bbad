/**
 * Reads a recipe file's text (YAML, or JSON, which is YAML 1.2) into a plain value within the
 * recipe limits (protocol/limits.ts), with errors that name the file, line and column instead
 * of a stack trace.
 */
import {
  Alias,
  Composer,
  CST,
  type Document,
  isAlias,
  isMap,
  isNode,
  isScalar,
  isSeq,
  Lexer,
  LineCounter,
  Parser,
  visit,
} from "yaml";
import { BatonError } from "../domain/errors.ts";
import { type BodyLimits, RECIPE_LIMITS } from "../protocol/limits.ts";

/** Largest recipe text accepted (bytes of UTF-8): `RECIPE_LIMITS.bytes`. */
export const RECIPE_MAX_BYTES = RECIPE_LIMITS.bytes;

/** Most collections open at once in a recipe: `RECIPE_LIMITS.depth`. */
export const RECIPE_MAX_NESTING = RECIPE_LIMITS.depth;

/** Alias expansions a recipe may make: `RECIPE_LIMITS.aliases`. */
export const RECIPE_MAX_ALIASES = RECIPE_LIMITS.aliases;

/** CST token types that open a collection (what `depth` counts). */
const COLLECTIONS: ReadonlySet<string> = new Set(["block-map", "block-seq", "flow-collection"]);

/** Lexical tokens that begin an entry: `- `, `? `, `: `, `,`, and a flow `[` / `{`. */
const ENTRY_STARTS: ReadonlySet<string> = new Set([
  "seq-item-ind",
  "explicit-key-ind",
  "map-value-ind",
  "comma",
  "flow-seq-start",
  "flow-map-start",
]);

/** Bytes of `text` as UTF-8 (no Buffer: the core also runs on Workers). */
export function utf8Bytes(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** What to say about problems whose wording differs between a recipe file and a request body. */
export interface YamlWording {
  /** A syntax error of the YAML library at `pos`. */
  syntax(what: string, pos: { line: number; col: number } | null, code: string): BatonError;
  /** A key given twice in one mapping. */
  duplicate(key: string, pos: { line: number; col: number } | null): BatonError;
}

/** A YAML document read within limits, and where its lines start. */
export interface BoundedYaml {
  doc: Document.Parsed;
  value: unknown;
  /** 1-based line and column of an offset in the text. */
  at(offset: number): { line: number; col: number };
}

/**
 * Reads YAML text (JSON included) within `limits`, parsing it exactly once. One pass of the
 * YAML library's lexer feeds its CST parser token by token; before the composer builds any
 * node it refuses, at the first token past a limit: more than `limits.depth` collections open
 * at once (counted on the parser's own stack, so nesting by indentation, by `- ` / `? ` on one
 * line and by brackets all count), more than `limits.entries` entries (counted from the
 * indicators that begin them: `- `, `? `, `: `, `,`, `[`, `{`), more than `limits.tokens`
 * lexical tokens, a YAML tag, several documents.
 * Then it composes the tokens already parsed, refuses a key given twice in one mapping (one
 * set per mapping: linear) and converts with at most `RECIPE_LIMITS.aliases` alias expansions.
 * Time and memory are linear in the text's length.
 * @throws BatonError `bad_request` (400) naming `<filename>:<line>:<col>` and the fix; syntax
 *   errors and duplicate keys as `wording` says.
 */
export function readBoundedYaml(
  text: string,
  filename: string,
  wording: YamlWording,
  limits: BodyLimits & { tokens: number } = RECIPE_LIMITS,
): BoundedYaml {
  const bytes = utf8Bytes(text);
  if (bytes > limits.bytes) {
    throw new BatonError(
      "payload_too_large",
      `[recipe] ${filename}: recipe is ${bytes} bytes, over the ${limits.bytes}-byte limit`,
      [
        {
          path: "",
          message: `is ${bytes} bytes, over the ${limits.bytes}-byte limit`,
          fix: "Split the rollout into several recipes.",
        },
      ],
    );
  }
  refuseEncoding(text, filename);
  const lines = new LineCounter();
  const at = (offset: number) => {
    const p = lines.linePos(offset);
    return { line: p.line, col: p.col };
  };
  const parser = new Parser(lines.addNewLine);
  lines.addNewLine(0);
  const tokens: CST.Token[] = [];
  let documents = 0;
  let entries = 0;
  let lexemes = 0;
  const take = (t: CST.Token) => {
    tokens.push(t);
    if (t.type === "document") documents++;
  };
  for (const lexeme of new Lexer().lex(text)) {
    const offset = parser.offset;
    if (++lexemes > limits.tokens) {
      throw tooComplex(
        filename,
        at(offset),
        `holds more than ${limits.tokens} YAML tokens (indicators, values, comments, spaces, line breaks)`,
        `A recipe is a few thousand tokens; at most ${limits.tokens} are read. Remove blank lines and comments the recipe does not need, or split the rollout into several recipes.`,
      );
    }
    const type = CST.tokenType(lexeme);
    if (type === "tag") throw tagRefused(lexeme, filename, at(offset));
    if (type === "directive-line" && YAML_1_1.test(lexeme)) {
      throw yaml11Refused(lexeme, filename, at(offset));
    }
    if (type && ENTRY_STARTS.has(type) && ++entries > limits.entries) {
      throw tooComplex(
        filename,
        at(offset),
        `holds more than ${limits.entries} entries (mapping keys and list items)`,
        `A recipe holds a few hundred entries; at most ${limits.entries} are read. Remove what the recipe does not need, or split the rollout into several recipes.`,
      );
    }
    for (const t of parser.next(lexeme)) take(t);
    if (parser.stack.length > limits.depth && openCollections(parser.stack) > limits.depth) {
      throw tooComplex(
        filename,
        at(offset),
        `is nested deeper than ${limits.depth} levels (collections open at once, by indentation, \`- \`, \`? \` or brackets)`,
        `Nest less: a recipe nests a few levels (lanes, waves); more than ${limits.depth} is not a recipe.`,
      );
    }
  }
  for (const t of parser.end()) take(t);
  if (documents > 1) {
    const message = `[recipe] ${filename} holds ${documents} YAML documents; a recipe file holds exactly one (remove the \`---\` separators)`;
    return throwMulti(message);
  }
  // Duplicate keys are found below with one set per mapping: the library's own check
  // (`uniqueKeys`) compares each key with every earlier one, which 40,000 keys made take 9 s.
  const composer = new Composer({ uniqueKeys: false, merge: false, strict: true });
  let doc: Document.Parsed | undefined;
  for (const d of composer.compose(tokens, true, text.length)) doc ??= d;
  if (!doc) throw wording.syntax("the text holds no YAML document", null, "EMPTY");
  const err = doc.errors[0];
  if (err) {
    const what = (err.message.split("\n")[0] ?? err.message).replace(
      / at line \d+, column \d+:?$/,
      "",
    );
    throw wording.syntax(what, at(err.pos[0]), err.code);
  }
  const keyProblem = firstKeyProblem(doc);
  if (keyProblem?.collection) {
    throw wording.syntax(
      "a mapping key is itself a list or a mapping; keys are plain values (text or numbers)",
      keyProblem.offset === null ? null : at(keyProblem.offset),
      "COLLECTION_KEY",
    );
  }
  if (keyProblem) {
    throw wording.duplicate(
      keyProblem.key,
      keyProblem.offset === null ? null : at(keyProblem.offset),
    );
  }
  return { doc, value: yamlToJs(doc, text, filename), at };
}

/** Collections open on the CST parser's stack. */
function openCollections(stack: readonly CST.Token[]): number {
  let n = 0;
  for (const t of stack) if (COLLECTIONS.has(t.type)) n++;
  return n;
}

/**
 * The first key of a mapping that no recipe value can have, with its offset; null when none:
 * a key given twice in one mapping (compared as the property names they become: `1` and `"1"`
 * are the same key), or a key that is itself a list or a mapping (`? [a, b]`, `{a: 1}: x`, or
 * an alias of one), which a property name cannot be (`collection: true`). Iterative: depth is
 * bounded before this runs, but no recursion is needed either.
 */
function firstKeyProblem(
  doc: Document.Parsed,
): { key: string; offset: number | null; collection?: true } | null {
  const stack: unknown[] = [doc.contents];
  while (stack.length > 0) {
    const n = stack.pop();
    if (isMap(n)) {
      const seen = new Set<string>();
      for (const pair of n.items) {
        const k = pair.key;
        const target = isAlias(k) ? k.resolve(doc) : k;
        if (isMap(target) || isSeq(target)) {
          const offset = (isNode(k) ? k.range?.[0] : undefined) ?? null;
          return { key: "", offset, collection: true };
        }
        if (isScalar(k)) {
          const name = String(k.value);
          if (seen.has(name)) return { key: name.slice(0, 80), offset: k.range?.[0] ?? null };
          seen.add(name);
        }
        stack.push(pair.value);
      }
    } else if (isSeq(n)) {
      for (const item of n.items) stack.push(item);
    }
  }
  return null;
}

/**
 * A `%YAML 1.1` directive: it would switch the document to YAML 1.1's schema, where `yes`, `no`,
 * `on` and `off` are booleans, `017` is octal and dates are timestamps. Recipes are read as
 * YAML 1.2 (`%YAML 1.2`, or no directive), so one text means one thing.
 */
const YAML_1_1 = /^%YAML[ \t]+1\.1(?![\d.])/;

function yaml11Refused(token: string, filename: string, pos: { line: number; col: number }) {
  return bad(
    filename,
    pos,
    `the \`${token.slice(0, 80)}\` directive is not allowed: recipes are read as YAML 1.2`,
    "Remove the `%YAML 1.1` line (and its `---` if nothing else needs it): in YAML 1.2, yes/no/on/off are text, 017 is 17 and dates are text. Write true/false for booleans.",
  );
}

function tagRefused(token: string, filename: string, pos: { line: number; col: number }) {
  const tag = token.length > 80 ? `${token.slice(0, 80)}…` : token;
  return bad(
    filename,
    pos,
    `the YAML tag \`${tag}\` is not allowed`,
    `Remove \`${tag}\`: recipes are plain YAML: no tags (\`!name\`, \`!!type\`). Write the value itself; quote it ("...") if it must stay a string.`,
  );
}

/** A "too complex to read" refusal: 400, naming the limit passed and where. */
function tooComplex(
  filename: string,
  pos: { line: number; col: number },
  what: string,
  fix: string,
): BatonError {
  return bad(filename, pos, `too complex to read: the text ${what}`, fix);
}

/** A parsed recipe file: its value and a way to find where a path is in the text. */
export interface ParsedRecipeText {
  value: unknown;
  /** 1-based line and column of the node at `path` (or its nearest present parent). */
  locate(path: readonly (string | number)[]): { line: number; col: number } | null;
}

/** How a recipe file's syntax errors and duplicate keys are worded (`baton check`, the workflow). */
function fileWording(filename: string): YamlWording {
  return {
    syntax: (what, pos) =>
      bad(
        filename,
        pos,
        what,
        `Fix the ${filename.endsWith(".json") ? "JSON" : "YAML"} syntax there: check the indentation (spaces, not tabs), that every key is followed by \`: \`, and that brackets and quotes are closed.`,
      ),
    duplicate: (key, pos) =>
      bad(
        filename,
        pos,
        `the key \`${key}\` appears twice in one mapping`,
        `Give \`${key}\` once: remove or rename the repeated key.`,
      ),
  };
}

/**
 * Parses a recipe file's `text` as YAML 1.2 (JSON included) within `RECIPE_LIMITS`
 * (`readBoundedYaml`). Duplicate keys, several documents, tags, unresolved aliases and alias
 * bombs are errors.
 * @throws BatonError `bad_request` (400) whose message is `[recipe] <filename>:<line>:<col>:
 *   <what is wrong>` and whose one problem carries the fix; `payload_too_large` (413) over
 *   `RECIPE_LIMITS.bytes`.
 */
export function parseRecipeText(text: string, filename: string): ParsedRecipeText {
  const { doc, value, at } = readBoundedYaml(text, filename, fileWording(filename));
  return {
    value,
    locate(path) {
      for (let n = path.length; n >= 0; n--) {
        const node = doc.getIn(path.slice(0, n), true);
        if (isNode(node) && node.range) return at(node.range[0]);
      }
      return null;
    },
  };
}

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

/**
 * Refuses text that is not a UTF-8 recipe with LF or CRLF line endings, before YAML reads it
 * (it would misread it as one string or no value at all): a UTF-16/UTF-32 byte-order mark
 * (decoded from bytes as UTF-8 it is U+FFFD U+FFFD, or U+FEFF followed by NUL), NUL bytes
 * (UTF-16/UTF-32 text without a mark), or a CR not followed by LF (classic Mac line endings).
 * @throws BatonError `bad_request` (400) naming the place and the fix.
 */
function refuseEncoding(text: string, filename: string): void {
  const nul = text.indexOf("\u0000");
  const bomLike = text.startsWith("\uFFFD\uFFFD") || text.startsWith("\uFFFE");
  if (bomLike || nul >= 0) {
    const pos = bomLike ? { line: 1, col: 1 } : position(lineStarts(text), nul);
    throw bad(
      filename,
      pos,
      bomLike
        ? "the recipe is not UTF-8: it begins with a UTF-16 or UTF-32 byte-order mark"
        : "the recipe is not UTF-8: it holds NUL bytes (UTF-16 or UTF-32 text, or a binary file)",
      "Save the recipe as UTF-8.",
    );
  }
  const cr = /\r(?!\n)/.exec(text);
  if (cr) {
    throw bad(
      filename,
      position(lineStarts(text), cr.index),
      "a line ends with CR alone (classic Mac line endings); YAML would read the recipe as one line",
      "Use LF or CRLF line endings.",
    );
  }
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
