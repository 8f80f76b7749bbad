/**
 * zod's issue texts in plain words, for every place that shows a schema's problems to a person
 * (the engine's API answers, the release-step action's annotations).
 */
const ZOD_TYPE = /^Invalid input: expected (\w+), received (\w+)$/;
const ZOD_OPTION = /^Invalid option: expected one of (.*)$/;
const ZOD_PATTERN = /^Invalid string: must match pattern (.*)$/;
const ZOD_RANGE =
  /^Too (small|big): expected (\w+) to (?:be|have) ([<>]=?)(-?[\d.e+]+)(?: (\w+))?$/;

/**
 * zod's texts in plain words: "Invalid input: expected object, received array" -> "must be a
 * JSON object, not an array"; "Too small: expected number to be >=0" -> "must be 0 or more";
 * "Too big: expected string to have <=64 characters" -> "must be at most 64 characters";
 * 'Invalid option: expected one of "pass"|"fail"' -> 'must be one of "pass", "fail"'.
 */
export function plainZodMessage(message: string): string {
  const range = ZOD_RANGE.exec(message);
  if (range) {
    const [, , type = "", op = "", n = "", unit] = range;
    const at = op.endsWith("=");
    // zod's safe-integer bound: a whole number past 2^53-1 has lost its exact value in JSON.
    if (type === "int" && op.startsWith("<"))
      return `must be a whole number of at most ${n}, not a number too large to be exact`;
    if (type === "number" || type === "bigint" || type === "date" || type === "int")
      return op.startsWith(">")
        ? `must be ${at ? `${n} or more` : `more than ${n}`}`
        : `must be ${at ? `${n} or less` : `less than ${n}`}`;
    const count = op.startsWith(">")
      ? at
        ? Number(n)
        : Number(n) + 1
      : at
        ? Number(n)
        : Number(n) - 1;
    const things = (unit ?? "items").replace(/s$/, count === 1 ? "" : "s");
    return op.startsWith(">")
      ? `must have at least ${count} ${things}`
      : `must be at most ${count} ${things}`;
  }
  const option = ZOD_OPTION.exec(message);
  if (option) return `must be one of ${(option[1] ?? "").split("|").join(", ")}`;
  const pattern = ZOD_PATTERN.exec(message);
  if (pattern) return `must match the pattern ${pattern[1]}`;
  const m = ZOD_TYPE.exec(message);
  if (!m) {
    const literal = /^Invalid input: expected ([^,]+)$/.exec(message);
    if (literal) return `must be ${literal[1]}`;
    return message.replace(/^Invalid (input|string|value): /, "must be valid: ");
  }
  const [, expected = "", received = ""] = m;
  // zod names a required field of unknown type `nonoptional`: no type to name.
  if (received === "undefined")
    return expected === "nonoptional"
      ? "is missing"
      : `is missing; it must be ${typeWords(expected)}`;
  if (received === "Infinity")
    return `must be ${expected === "number" ? "a finite number" : typeWords(expected)}, not a number too large to be finite (such as 1e309)`;
  return `must be ${typeWords(expected)}, not ${received === "NaN" ? "something that is not a number" : typeWords(received)}`;
}

function typeWords(t: string): string {
  if (t === "object" || t === "record") return "a JSON object";
  if (t === "array") return "an array";
  if (t === "null") return "null";
  return /^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`;
}
