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

/**
 * Which group a lane is in at one point of a release (docs/state-machine.md "Exposure"):
 * `candidate` serves the new image, `baseline` serves the image it ran before the release,
 * `out` takes no traffic (being redeployed, or excluded when the release started).
 */
export type LaneGroup = "candidate" | "baseline" | "out";

/**
 * Per-version group weights: the candidate group carries `percent`, the baseline group
 * `100 - percent`, each split over its lanes by baseline weight (largest remainder, equal split
 * when a group's baselines are all 0); `out` lanes carry 0. So the candidate image's share of
 * the model's traffic at the router is exactly `percent` (the router routes over lanes that are
 * not excluded and have weight > 0, and those weights sum to 100).
 * Returns lane id -> integer %, keys in `lanes` order, summing to 100.
 * Throws `RangeError` when `percent` is outside 0..100 or a group that must carry traffic
 * has no lane.
 */
export function groupWeights(
  lanes: readonly WeightedLane[],
  groupOf: (id: string) => LaneGroup,
  percent: number,
): Record<string, number> {
  if (!Number.isInteger(percent) || percent < 0 || percent > 100) {
    throw new RangeError(`[recipe] traffic percent must be an integer 0..100, got ${percent}`);
  }
  const cand = lanes.filter((l) => groupOf(l.id) === "candidate");
  const base = lanes.filter((l) => groupOf(l.id) === "baseline");
  if (cand.length === 0 && percent > 0) {
    throw new RangeError(
      `[recipe] ${percent}% of traffic needs a lane on the new image; none serves`,
    );
  }
  if (base.length === 0 && percent < 100) {
    throw new RangeError(
      `[recipe] ${100 - percent}% of traffic needs a lane on the previous image; none serves`,
    );
  }
  const a = largestRemainder(
    percent,
    cand.map((l) => l.baseline_weight),
  );
  const b = largestRemainder(
    100 - percent,
    base.map((l) => l.baseline_weight),
  );
  const byId = new Map<string, number>();
  cand.forEach((l, i) => {
    byId.set(l.id, a[i] ?? 0);
  });
  base.forEach((l, i) => {
    byId.set(l.id, b[i] ?? 0);
  });
  const out: Record<string, number> = {};
  for (const l of lanes) out[l.id] = byId.get(l.id) ?? 0;
  return out;
}

/**
 * Exposure of a weights map: the % of the model's traffic the router sends to `candidates`,
 * over the lanes that can take traffic (not in `excluded`, weight > 0). 0 when none can.
 * Exact rational as a number (e.g. 10 for 1,000 of 10,000).
 */
export function exposureOf(
  weights: Record<string, number>,
  candidates: ReadonlySet<string>,
  excluded: ReadonlySet<string> = new Set(),
): number {
  let total = 0;
  let cand = 0;
  for (const [id, w] of Object.entries(weights)) {
    if (excluded.has(id) || w <= 0) continue;
    total += w;
    if (candidates.has(id)) cand += w;
  }
  return total === 0 ? 0 : (cand * 100) / total;
}

/** Baseline weights when the recipe gives none: 100 split equally over `n` lanes. */
export function equalBaseline(n: number): number[] {
  return largestRemainder(
    100,
    Array.from({ length: n }, () => 1),
  );
}
