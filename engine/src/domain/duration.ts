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

/** `30m` / `12h` / `7d` in ms. @throws Error when `text` does not match `DURATION_PATTERN`. */
export function durationMs(text: string): number {
  const m = DURATION_PATTERN.exec(text);
  if (!m)
    throw new Error(`[recipe] ${JSON.stringify(text)} is not a duration such as 30m, 12h or 7d`);
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
}
