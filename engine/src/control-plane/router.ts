/**
 * The deterministic router: splits N requests over lanes by weight with the largest-remainder
 * method (Hamilton), so every lane gets exactly its share, e.g. 10% of 10,000 is 1,000.
 * Excluded lanes get 0; their share goes to the other lanes in proportion to their weights,
 * because the quotas are taken over the sum of the weights of the lanes that can take traffic.
 */
import { createHash } from "node:crypto";
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

/** Hash of a unit id to [0, 1): the first 32 bits of its sha256 over 2³². Pure. */
export function unitPosition(unitId: string): number {
  return createHash("sha256").update(unitId).digest().readUInt32BE(0) / 2 ** 32;
}

/** Candidate or control: which image a lane serves in a gated wave. */
export type Arm = "candidate" | "control";

/** Where {@link stickyLane} puts one unit. */
export interface StickyPick {
  lane: string;
  arm: Arm;
  /** The candidate's cumulative share the unit's position was compared with, in [0, 1]. */
  candidateShare: number;
}

/**
 * The lane of one assignment unit under sticky assignment, or null when no lane takes traffic.
 *
 * The unit's position h = unitPosition(`<salt>\0<key>`) in [0, 1) is compared with the
 * candidate's cumulative share c (the weights of the candidate lanes that can take traffic over
 * the weights of every lane that can): h < c is the candidate arm, otherwise the control. So the
 * arm depends only on the unit's key, the salt and c: a unit stays on its arm while c holds, and
 * while c only widens a unit on the candidate stays there (h < c ≤ c′); the units that move are
 * those with c ≤ h < c′, from the control to the candidate. Within its arm the unit's lane is
 * chosen by a second position (of `<salt>\0<key>\0lane`) over the arm's lanes' weights in id
 * order, so it also keeps its lane while those weights hold. Pure.
 */
export function stickyLane(
  lanes: readonly LaneState[],
  armOf: (lane: string) => Arm,
  salt: string,
  key: string,
): StickyPick | null {
  const eligible = lanes
    .filter((l) => !l.excluded && l.weight > 0)
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const total = eligible.reduce((s, l) => s + l.weight, 0);
  if (total === 0) return null;
  const candidates = eligible.filter((l) => armOf(l.id) === "candidate");
  const candidateShare = candidates.reduce((s, l) => s + l.weight, 0) / total;
  const arm: Arm = unitPosition(`${salt}\u0000${key}`) < candidateShare ? "candidate" : "control";
  const pool = arm === "candidate" ? candidates : eligible.filter((l) => !candidates.includes(l));
  const poolTotal = pool.reduce((s, l) => s + l.weight, 0);
  const x = unitPosition(`${salt}\u0000${key}\u0000lane`) * poolTotal;
  let acc = 0;
  for (const l of pool) {
    acc += l.weight;
    if (x < acc) return { lane: l.id, arm, candidateShare };
  }
  return { lane: (pool[pool.length - 1] as LaneState).id, arm, candidateShare };
}
