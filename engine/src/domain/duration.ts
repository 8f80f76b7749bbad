/**
 * Durations as a recipe writes them (`30m`, `12h`, `7d`): the pattern, the rollback window's
 * default and the conversion to ms. Pure; imports nothing.
 */

/** A duration as a recipe writes it: a whole number of minutes, hours or days. */
export const DURATION_PATTERN = /^([1-9][0-9]{0,5})(m|h|d)$/;

/** The rollback window of a release whose recipe declares none. */
export const DEFAULT_ROLLBACK_WINDOW = "7d";

/** ms per unit of a duration. */
export const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** The longest rollback window a recipe may declare, in days (one year). */
export const MAX_ROLLBACK_WINDOW_DAYS = 365;

/**
 * Why `text` is no rollback window, naming the problem and the fix, or null when it is one:
 * a whole number (no sign, no leading zero) of minutes, hours or days (`30m`, `12h`, `7d`),
 * at least 1 minute and at most `MAX_ROLLBACK_WINDOW_DAYS` days.
 */
export function rollbackWindowProblem(text: string): string | null {
  const m = /^([0-9]+)(m|h|d)$/.exec(text);
  if (!m)
    return `rollback_window ${JSON.stringify(text.slice(0, 40))} is not a whole number of minutes, hours or days; write it like 30m, 12h or 7d`;
  const [, digits = "", unit = "m"] = m;
  if (/^0+$/.test(digits))
    return `rollback_window ${text} is zero: a rollback could never be admitted; give at least 1m (or leave it out for the default ${DEFAULT_ROLLBACK_WINDOW})`;
  if (digits.startsWith("0"))
    return `rollback_window ${text} has a leading zero; write ${Number(digits)}${unit}`;
  const ms = Number(digits) * UNIT_MS[unit as keyof typeof UNIT_MS];
  if (ms > MAX_ROLLBACK_WINDOW_DAYS * UNIT_MS.d)
    return `rollback_window ${text} is longer than the longest allowed, ${MAX_ROLLBACK_WINDOW_DAYS}d (${MAX_ROLLBACK_WINDOW_DAYS * 24}h); give ${MAX_ROLLBACK_WINDOW_DAYS}d or less`;
  return null;
}

/** `30m` / `12h` / `7d` in ms. @throws Error when `text` does not match `DURATION_PATTERN`. */
export function durationMs(text: string): number {
  const m = DURATION_PATTERN.exec(text);
  if (!m)
    throw new Error(`[recipe] ${JSON.stringify(text)} is not a duration such as 30m, 12h or 7d`);
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
}
