/**
 * The deterministic router: splits N requests over lanes by weight with the largest-remainder
 * method (Hamilton), so every lane gets exactly its share, e.g. 10% of 10,000 is 1,000.
 * Excluded lanes get 0; their share goes to the other lanes in proportion to their weights,
 * because the quotas are taken over the sum of the weights of the lanes that can take traffic.
 */
import type { LaneState, RouteResult } from "./model.ts";

/**
 * Counts per lane (every lane of `lanes` appears, excluded ones with 0) summing to `requests`,
 * or `unrouted = requests` when no lane can take traffic. Ties in the remainder go to the lane
 * with the larger weight, then the smaller id. Pure; `requests` is a non-negative safe integer.
 */
export function route(model: string, lanes: LaneState[], requests: number): RouteResult {
  const counts: Record<string, number> = {};
  for (const lane of lanes) counts[lane.id] = 0;
  const eligible = lanes.filter((l) => !l.excluded && l.weight > 0);
  const total = eligible.reduce((sum, l) => sum + l.weight, 0);
  if (total === 0) return { model, requests, counts, unrouted: requests };

  // Integer arithmetic: quota = floor(N*w/S), remainder numerator = N*w mod S (exact).
  const shares = eligible.map((l) => ({
    lane: l,
    base: Math.floor((requests * l.weight) / total),
    rest: (requests * l.weight) % total,
  }));
  let left = requests - shares.reduce((sum, s) => sum + s.base, 0);
  shares.sort(
    (a, b) =>
      b.rest - a.rest ||
      b.lane.weight - a.lane.weight ||
      (a.lane.id < b.lane.id ? -1 : a.lane.id > b.lane.id ? 1 : 0),
  );
  for (const s of shares) {
    counts[s.lane.id] = s.base + (left > 0 ? 1 : 0);
    if (left > 0) left -= 1;
  }
  return { model, requests, counts, unrouted: 0 };
}
