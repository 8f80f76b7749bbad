/**
 * Where sign-in may send the browser afterwards. Only a same-site path is accepted:
 * browsers treat `//host` and `/\host` as another origin (WHATWG URL: `\` counts as `/`
 * in special schemes), and strip tab/newline characters before parsing, so any of those
 * would be an open redirect.
 */

/** The fallback for a missing or hostile `next`. */
export const DEFAULT_NEXT = "/releases";

/**
 * `v` when it is a same-site path: starts with one `/` (not `//`), holds no backslash,
 * no control or whitespace character, and no `scheme:` before its first `/`; otherwise
 * `/releases`.
 */
export function safeNext(v: unknown): string {
  if (typeof v !== "string" || v.length === 0 || v.length > 2048) return DEFAULT_NEXT;
  if (!v.startsWith("/") || v.startsWith("//")) return DEFAULT_NEXT;
  if (v.includes("\\")) return DEFAULT_NEXT;
  // Control characters (C0, DEL, C1) and any whitespace: browsers drop some of them
  // while parsing, which could turn `/\t/evil` into `//evil`.
  for (const ch of v) {
    const code = ch.codePointAt(0) ?? 0;
    if (code <= 0x20 || (code >= 0x7f && code <= 0x9f) || /\s/u.test(ch)) return DEFAULT_NEXT;
  }
  // Percent-encoded slashes/backslashes at the start may be decoded by a proxy.
  if (/^\/(%2f|%5c)/i.test(v)) return DEFAULT_NEXT;
  // Belt and braces: resolved against a dummy origin it must stay on that origin.
  try {
    const u = new URL(v, "http://baton.invalid");
    if (u.origin !== "http://baton.invalid") return DEFAULT_NEXT;
  } catch {
    return DEFAULT_NEXT;
  }
  return v;
}
