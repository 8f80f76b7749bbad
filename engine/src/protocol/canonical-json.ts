/**
 * Canonical JSON: the bytes a manifest digest is taken over.
 *
 * Rule (the JSON Canonicalization Scheme, RFC 8785, for the values a manifest holds):
 * object keys sorted by UTF-16 code units (JavaScript's default string order), no whitespace
 * anywhere, strings and numbers written as `JSON.stringify` writes them, arrays in order.
 * `undefined`, functions, symbols, bigints, NaN and ±Infinity are refused rather than
 * dropped or turned into `null`, so two different manifests can never share bytes.
 */

/**
 * Serialises `value` canonically (see the module comment). Returns a string without
 * whitespace. Throws `TypeError` naming the path of a value JSON cannot carry.
 */
export function canonicalJson(value: unknown): string {
  return write(value, "$");
}

function write(value: unknown, path: string): string {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "string":
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) {
        throw new TypeError(`[recipe] canonical JSON: ${path} is ${value}, not a finite number`);
      }
      // JSON.stringify writes -0 as 0 and uses the shortest round-trip form (RFC 8785 §3.2.2.3).
      return JSON.stringify(value);
    case "object": {
      if (Array.isArray(value)) {
        return `[${value.map((v, i) => write(v, `${path}.${i}`)).join(",")}]`;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        throw new TypeError(`[recipe] canonical JSON: ${path} is not a plain object`);
      }
      const rec = value as Record<string, unknown>;
      const keys = Object.keys(rec).sort();
      return `{${keys.map((k) => `${JSON.stringify(k)}:${write(rec[k], `${path}.${k}`)}`).join(",")}}`;
    }
    default:
      throw new TypeError(`[recipe] canonical JSON: ${path} is ${typeof value}, not JSON`);
  }
}
