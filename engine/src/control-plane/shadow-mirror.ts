/**
 * The shadow router's decision (docs/control-plane.md "The router as a shadow router"): which
 * requests of a model are mirrored to a candidate lane while a shadow phase is in force, and to
 * which lane. One rule for the HTTP proxy (router-proxy.ts) and the traffic generator
 * (traffic.ts). In order, a request is mirrored only when:
 *
 * 1. it is authorized (checked by the caller before any copy is made);
 * 2. a shadow lane exists: declared shadow-safe, serving the candidate, not excluded, weight 0
 *    (a lane with real traffic is exposed, not shadowed);
 * 3. the share cap holds: mirrored ≤ ⌊seen × share / 100⌋ over the model's requests seen while
 *    a shadow phase was in force;
 * 4. the rate cap holds: at most `rate_per_s` mirrored in each whole second of the clock.
 *
 * Each request that is not mirrored is counted under the first rule it failed.
 */
import type { LaneState } from "./model.ts";

/** A shadow phase's caps (the manifest wave's `shadow`). */
export interface ShadowCaps {
  /** Percent of the model's requests mirrored at most, 1..100. */
  share: number;
  /** Requests mirrored per second at most (≥ 1). */
  rate_per_s: number;
}

/** Why a request was not mirrored. */
export type ShadowSkip = "unauthorized" | "no_lane" | "share" | "rate";

/** What the shadow router counted for one model since it started. */
export interface ShadowCounts {
  /** Requests of the model seen while a shadow phase was in force. */
  requests: number;
  /** Requests admitted for mirroring (each sent to one shadow lane). */
  mirrored: number;
  /** Requests not mirrored, by the first rule they failed. */
  skipped: Record<ShadowSkip, number>;
  /** Mirrored requests per shadow lane. */
  lanes: Record<string, number>;
}

/** One decision: the shadow lane to copy the request to, or why not. */
export type ShadowDecision = { lane: string } | { skip: ShadowSkip };

/**
 * Lanes that may take mirrored requests now: shadow-safe, serving the candidate, not excluded
 * and carrying weight 0, in id order. Pure.
 */
export function shadowLanes(
  lanes: readonly LaneState[],
  safe: (lane: string) => boolean,
  candidate: (lane: string) => boolean,
): string[] {
  return lanes
    .filter((l) => !l.excluded && l.weight === 0 && safe(l.id) && candidate(l.id))
    .map((l) => l.id)
    .sort();
}

interface ModelState {
  counts: ShadowCounts;
  second: number;
  inSecond: number;
  next: number;
}

const empty = (): ShadowCounts => ({
  requests: 0,
  mirrored: 0,
  skipped: { unauthorized: 0, no_lane: 0, share: 0, rate: 0 },
  lanes: {},
});

/** See the module comment. Keeps counts per model in memory. */
export class ShadowMirror {
  private readonly models = new Map<string, ModelState>();

  /** `now`: epoch ms (the rate cap's seconds are whole seconds of this clock). */
  constructor(private readonly now: () => number = Date.now) {}

  /**
   * Decides one request of `model` under `caps`, and counts it. `authorized`: the request's
   * authorization was checked and holds. `lanes`: {@link shadowLanes} now.
   */
  decide(model: string, caps: ShadowCaps, authorized: boolean, lanes: string[]): ShadowDecision {
    const m = this.state(model);
    const c = m.counts;
    c.requests++;
    const skip = (why: ShadowSkip): ShadowDecision => {
      c.skipped[why]++;
      return { skip: why };
    };
    if (!authorized) return skip("unauthorized");
    if (lanes.length === 0) return skip("no_lane");
    if ((c.mirrored + 1) * 100 > caps.share * c.requests) return skip("share");
    const second = Math.floor(this.now() / 1000);
    if (second !== m.second) {
      m.second = second;
      m.inSecond = 0;
    }
    if (m.inSecond >= caps.rate_per_s) return skip("rate");
    m.inSecond++;
    c.mirrored++;
    const lane = lanes[m.next++ % lanes.length] as string;
    c.lanes[lane] = (c.lanes[lane] ?? 0) + 1;
    return { lane };
  }

  /** A copy of what was counted for `model` (zeros before its first request). */
  counts(model: string): ShadowCounts {
    const c = this.models.get(model)?.counts ?? empty();
    return { ...c, skipped: { ...c.skipped }, lanes: { ...c.lanes } };
  }

  private state(model: string): ModelState {
    let m = this.models.get(model);
    if (!m) {
      m = { counts: empty(), second: Number.NaN, inSecond: 0, next: 0 };
      this.models.set(model, m);
    }
    return m;
  }
}
