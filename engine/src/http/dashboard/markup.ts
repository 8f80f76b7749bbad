/**
 * A tagged template for markup built only from strings, numbers and other markup, for the
 * dashboard's long, repeated parts (rows by the hundred), where a JSX node per element costs
 * more than the page's own work. Every interpolated string is escaped by hono's own escaper,
 * the one its JSX uses, so the markup is what the same JSX gives, byte for byte. The result is
 * hono's escaped string: JSX and `c.html` take it as it is.
 *
 * Not hono's `html` helper: that one also takes promises and callbacks, and pays for it per
 * value (an array per interpolation, a `String` object per fragment), which on a long page
 * was a tenth of its render time. Here nested markup stays a plain string until the end.
 */
import { escapeToBuffer, type HtmlEscapedString, raw } from "hono/utils/html";

/** Markup made by `markup`: a string whose text is already escaped. */
export class Markup {
  constructor(readonly text: string) {}
}

/** What may be interpolated: escaped if a string; skipped if null, undefined or false. */
export type MarkupValue = string | number | null | undefined | false | Markup | MarkupValue[];

function append(out: [string], v: MarkupValue): void {
  if (typeof v === "string") escapeToBuffer(v, out);
  else if (typeof v === "number") out[0] += String(v);
  else if (v instanceof Markup) out[0] += v.text;
  else if (Array.isArray(v)) for (const x of v) append(out, x);
}

/** `markup\`<td>${text}</td>\`` escapes `text`; nested markup and arrays of it are kept. */
export function markup(strings: TemplateStringsArray, ...values: MarkupValue[]): Markup {
  const out: [string] = [strings[0] ?? ""];
  for (let i = 0; i < values.length; i++) {
    append(out, values[i]);
    out[0] += strings[i + 1] ?? "";
  }
  return new Markup(out[0]);
}

/** `m` for JSX or `c.html`: hono's escaped string, inserted without escaping it again. */
export function toHtml(m: Markup): HtmlEscapedString {
  return raw(m.text);
}
