/**
 * Runner-supplied text (logs, check names and messages, response excerpts, callback bodies)
 * shown with its invisible characters made visible: C0/C1 control characters other than tab
 * and newline, DEL, and the Unicode bidirectional formatting characters (U+061C, U+200E–U+200F,
 * U+202A–U+202E, U+2066–U+2069; Unicode TR #9). Shown as they are, an ANSI escape repaints a
 * terminal and a right-to-left override makes a line read other than it was written ("Trojan
 * Source", CVE-2021-42574). The stored text is kept verbatim; only what is shown is escaped.
 */

const RANGES =
  "\\u0001-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069";

/**
 * The hidden characters other than NUL (the stores keep NUL as U+FFFD): what an operator's
 * reason may not hold.
 */
export const HIDDEN_EXCEPT_NUL = new RegExp(`[${RANGES}]`, "u");

/** A UTF-16 surrogate without its pair (no text can hold it; stores would change it). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Why `text` cannot be kept as written, or null: it holds NUL (the stores keep it as U+FFFD,
 * so the answer and the history would differ) or a lone UTF-16 surrogate (not text at all).
 * The one rule for every free text people write (reasons, notes, names). Positions count
 * UTF-16 code units from 1.
 */
export function unstorableText(text: string): string | null {
  const nul = text.indexOf("\u0000");
  const lone = LONE_SURROGATE.exec(text);
  if (nul >= 0 && (!lone || nul < lone.index)) {
    return `holds the NUL character (U+0000) at position ${nul + 1}; remove it (text is stored without NUL)`;
  }
  if (lone) {
    const hex = lone[0].charCodeAt(0).toString(16).toUpperCase();
    return `holds a lone UTF-16 surrogate (U+${hex}) at position ${lone.index + 1}; send well-formed UTF-8/UTF-16 text`;
  }
  return null;
}

const HIDDEN_ALL = new RegExp(`[\\u0000${RANGES}]`, "gu");

/** The escape shown for one hidden character: `\x1b` below U+0100, else `\u202e`. */
function escapeOf(ch: string): string {
  const code = ch.codePointAt(0) ?? 0;
  return code < 0x100
    ? `\\x${code.toString(16).padStart(2, "0")}`
    : `\\u${code.toString(16).padStart(4, "0")}`;
}

/**
 * `text` with every hidden character replaced by its escape (`\x1b`, `\u202e`); a backslash
 * is left as it is. Linear in the text's length.
 */
export function visible(text: string): string {
  return text.replace(HIDDEN_ALL, escapeOf);
}

/**
 * `visible(text)` on one line: a newline is shown as `\n` too, for a field printed inside a
 * one-line listing, where a newline would start a line that reads as another entry.
 */
export function visibleOneLine(text: string): string {
  return visible(text).replace(/\n/g, "\\n");
}
