/**
 * Numbers as people read them in gate reasons, `baton status` and the dashboard: counts with
 * thousands separators and at most one decimal (`36,000`, `174.4`: Prometheus's `increase()`
 * extrapolates, so its counts are fractional), shares as percents, differences of shares in
 * percentage points. Pure; no locale is read (the separator is always `,`).
 */

/** `36,000`; a fractional count keeps one decimal: `174.4`; `—` when not finite. */
export function count(v: number): string {
  if (!Number.isFinite(v)) return "—";
  const rounded = Math.round(v * 10) / 10;
  const whole = Number.isInteger(rounded);
  const [int, frac] = Math.abs(rounded)
    .toFixed(whole ? 0 : 1)
    .split(".") as [string, string | undefined];
  const grouped = int.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${rounded < 0 ? "-" : ""}${grouped}${frac ? `.${frac}` : ""}`;
}

/** A share as a percent: `5.78%` (two decimals; one below 0.01% would round to 0.00%). */
export function percent(share: number, digits = 2): string {
  if (!Number.isFinite(share)) return "—";
  return `${(share * 100).toFixed(digits)}%`;
}

/**
 * A share difference in percentage points, without sign: `2.0` for 0.02, `0.50` for 0.005,
 * `0.012` for 0.00012 (two significant digits below one point, one decimal above).
 */
export function points(v: number): string {
  if (!Number.isFinite(v)) return "—";
  const x = Math.abs(v) * 100;
  if (x === 0) return "0";
  return x >= 1 ? x.toFixed(1) : x.toPrecision(2);
}

/** `x/n` of a share, counts formatted: `62/1,059`. */
export function fraction(x: number, n: number): string {
  return `${count(x)}/${count(n)}`;
}
