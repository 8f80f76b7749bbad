/**
 * Text every store can hold. Postgres refuses two things a JS string (and SQLite) can carry:
 * U+0000 (NUL) in `text` and `jsonb`, and lone UTF-16 surrogates (`\ud800` without its pair)
 * in `jsonb`. A runner's log or checks may hold either (a login banner printing a NUL byte is
 * enough), so every store writes such strings with U+FFFD in their place: the same bytes on
 * SQLite and Postgres, deterministic, and never a failed write that strands a release.
 * Recipes are refused instead (`unstorablePaths`): a field the operator wrote should not
 * change silently.
 */

/** A NUL, or any surrogate (paired ones are filtered out by `LONE`). Cheap pre-test. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is what this module is about
const SUSPECT = /[\u0000\ud800-\udfff]/;
/** NUL, or a surrogate not part of a high+low pair. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is what this module is about
const LONE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** True when `s` holds a NUL or a lone surrogate. */
export function unstorable(s: string): boolean {
  if (!SUSPECT.test(s)) return false;
  LONE.lastIndex = 0;
  const hit = LONE.test(s);
  LONE.lastIndex = 0;
  return hit;
}

/** `s` with every NUL and lone surrogate replaced by U+FFFD; `s` itself when clean. */
export function storableText(s: string): string {
  if (!SUSPECT.test(s)) return s;
  return s.replace(LONE, "\ufffd");
}

/**
 * `value` with `storableText` applied to every string and object key, deep. Returns the same
 * object when nothing changed (no copy on the hot path). Bounded: nesting deeper than
 * `maxDepth` is returned as is (the HTTP edge refuses such bodies long before).
 */
export function storableValue<T>(value: T, maxDepth = 256): T {
  return clean(value, maxDepth) as T;
}

function clean(v: unknown, depth: number): unknown {
  if (typeof v === "string") return storableText(v);
  if (v === null || typeof v !== "object" || depth <= 0) return v;
  if (Array.isArray(v)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < v.length; i++) {
      const c = clean(v[i], depth - 1);
      if (c !== v[i] && out === null) out = v.slice(0, i);
      if (out !== null) out.push(c);
    }
    return out ?? v;
  }
  const entries = Object.entries(v as Record<string, unknown>);
  let changed = false;
  const next: [string, unknown][] = [];
  for (const [k, x] of entries) {
    const ck = storableText(k);
    const cx = clean(x, depth - 1);
    if (ck !== k || cx !== x) changed = true;
    next.push([ck, cx]);
  }
  return changed ? Object.fromEntries(next) : v;
}

/**
 * Dotted paths (`lanes.0.id`, or the key's own path for a bad key) of every string or key in
 * `value` that holds a NUL or a lone surrogate. Iterative and bounded (`maxNodes`).
 */
export function unstorablePaths(value: unknown, maxNodes = 100_000): string[] {
  const out: string[] = [];
  const stack: [unknown, string][] = [[value, ""]];
  for (let n = 0; stack.length > 0 && n < maxNodes; n++) {
    const [v, path] = stack.pop()!;
    if (typeof v === "string") {
      if (unstorable(v)) out.push(path);
      continue;
    }
    if (v === null || typeof v !== "object") continue;
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      const p = path === "" ? k : `${path}.${k}`;
      if (unstorable(k)) out.push(p);
      else stack.push([x, p]);
    }
  }
  return out.sort();
}

const JSON_SHORT: Readonly<Record<string, string>> = {
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
};

/**
 * `s` safe to print on a terminal: every control, format, unassigned or private-use character
 * and every lone surrogate (Unicode category C: NUL, ESC, a bidirectional override…) written
 * as its JSON escape (`\n`, `\u0000`, `\u202e`); other characters, backslashes and quotes as
 * they are, so text already escaped is not escaped twice. For problems that echo what a
 * recipe holds (`lane "lane\u0000a"`).
 */
export function escapeControls(s: string): string {
  return s.replace(
    /\p{C}/gu,
    (c) =>
      JSON_SHORT[c] ??
      // A character past U+FFFF (private use in plane 15…) as its two UTF-16 units, as JSON does.
      [...Array(c.length).keys()]
        .map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, "0")}`)
        .join(""),
  );
}
