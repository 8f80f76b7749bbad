/**
 * Traffic weights: absolute per-lane integer percents that always sum to 100.
 * Integer arithmetic only, so the same inputs give the same weights on every machine.
 */

/**
 * Splits `total` units over `shares` by the largest remainder method (Hamilton): each part
 * gets `floor(total * share / sum)`, then the units left over go one each to the parts with
 * the largest remainders, ties to the earlier part. All-zero shares split equally.
 * Returns one non-negative integer per share, summing to `total`.
 * Throws `RangeError` for a negative or non-integer `total` or share, or an empty `shares`
 * with a non-zero `total`.
 */
export function largestRemainder(total: number, shares: readonly number[]): number[] {
  if (!Number.isSafeInteger(total) || total < 0) {
    throw new RangeError(`[recipe] total must be a non-negative integer, got ${total}`);
  }
  for (const s of shares) {
    if (!Number.isSafeInteger(s) || s < 0) {
      throw new RangeError(`[recipe] shares must be non-negative integers, got ${s}`);
    }
  }
  if (shares.length === 0) {
    if (total === 0) return [];
    throw new RangeError(`[recipe] cannot split ${total} over no parts`);
  }
  const sum = shares.reduce((a, b) => a + b, 0);
  const eff = sum === 0 ? shares.map(() => 1) : shares;
  const effSum = sum === 0 ? shares.length : sum;
  const parts = eff.map((s) => Math.floor((total * s) / effSum));
  const rema = eff.map((s, i) => ({ i, r: (total * s) % effSum }));
  let left = total - parts.reduce((a, b) => a + b, 0);
  rema.sort((a, b) => b.r - a.r || a.i - b.i);
  for (const { i } of rema) {
    if (left === 0) break;
    parts[i] = (parts[i] ?? 0) + 1;
    left -= 1;
  }
  return parts;
}

/** A lane as weights need it: its id and its baseline weight (%). */
export interface WeightedLane {
  id: string;
  baseline_weight: number;
}

/**
 * Weights after a wave: the `deployed` lanes share `percent` and the other lanes share
 * `100 - percent`, each group in proportion to the lanes' baseline weights (equal split when
 * a group's baselines are all 0), by largest remainder. Returns lane id -> integer %, in
 * `lanes` order, summing to 100.
 * Throws `RangeError` when `percent` is outside 0..100, or when a group is empty but must
 * carry traffic (e.g. percent < 100 with every lane deployed: no stable lane remains).
 */
export function trafficWeights(
  lanes: readonly WeightedLane[],
  deployed: ReadonlySet<string>,
  percent: number,
): Record<string, number> {
  if (!Number.isInteger(percent) || percent < 0 || percent > 100) {
    throw new RangeError(`[recipe] traffic percent must be an integer 0..100, got ${percent}`);
  }
  const inWave = lanes.filter((l) => deployed.has(l.id));
  const stable = lanes.filter((l) => !deployed.has(l.id));
  if (inWave.length === 0 && percent > 0) {
    throw new RangeError(`[recipe] ${percent}% of traffic needs a deployed lane; none is`);
  }
  if (stable.length === 0 && percent < 100) {
    throw new RangeError(
      `[recipe] ${100 - percent}% of traffic needs a stable lane, but every lane is deployed`,
    );
  }
  const a = largestRemainder(
    percent,
    inWave.map((l) => l.baseline_weight),
  );
  const b = largestRemainder(
    100 - percent,
    stable.map((l) => l.baseline_weight),
  );
  const byId = new Map<string, number>();
  inWave.forEach((l, i) => {
    byId.set(l.id, a[i] ?? 0);
  });
  stable.forEach((l, i) => {
    byId.set(l.id, b[i] ?? 0);
  });
  const out: Record<string, number> = {};
  for (const l of lanes) out[l.id] = byId.get(l.id) ?? 0;
  return out;
}

/** Baseline weights when the recipe gives none: 100 split equally over `n` lanes. */
export function equalBaseline(n: number): number[] {
  return largestRemainder(
    100,
    Array.from({ length: n }, () => 1),
  );
}
