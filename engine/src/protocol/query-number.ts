/**
 * The one rule for a number given in a URL query (`cursor`, `limit`, `before`, `after`): decimal
 * digits only (no sign, spaces, `0x`/`0b`/`0o` prefix, exponent, point, or empty value), at most
 * 15 of them (exact as a JavaScript number), within the parameter's range. A value breaking it
 * is refused with the rule in words; the caller answers 400 naming the parameter.
 */
import * as z from "zod";

/** Decimal digits only, 1 to 15 of them. */
export const QUERY_NUMBER_PATTERN = /^[0-9]{1,15}$/;

/**
 * A zod schema for one numeric query parameter: the text, checked with `QUERY_NUMBER_PATTERN`,
 * read as a whole number in `min..max`.
 * @param range inclusive bounds; `max` absent for no upper bound.
 * @param words what the number is, for the message (e.g. "a whole number of epoch milliseconds").
 */
export function queryNumber(range: { min: number; max?: number }, words = "a whole number") {
  const bounds = range.max === undefined ? `${range.min} or more` : `${range.min}..${range.max}`;
  const message = `must be ${words} written in decimal digits only, ${bounds}`;
  return (
    z
      .string({ error: message })
      // Not digits: one problem, not a second one about the count of digits.
      .regex(/^[0-9]+$/, { error: message, abort: true })
      .regex(QUERY_NUMBER_PATTERN, `${message}; it has more than 15 digits`)
      .transform(Number)
      .pipe(
        range.max === undefined
          ? z.number().min(range.min, message)
          : z.number().min(range.min, message).max(range.max, message),
      )
  );
}
