/**
 * Pacing of content-creating requests to GitHub (a `repository_dispatch` creates content), so
 * the engine stays under GitHub's secondary rate limits instead of running into them.
 *
 * Source: GitHub REST docs, "Rate limits for the REST API" → "About secondary rate limits":
 * no more than 100 concurrent requests; no more than 80 content-generating requests per minute
 * and no more than 500 per hour; when exceeded GitHub answers 403 or 429, with `retry-after`
 * (seconds) or, when `x-ratelimit-remaining` is 0, `x-ratelimit-reset` (epoch seconds).
 *
 * The pacer books a send time ("slot") per dispatch: a dispatch with no free slot now is told
 * when its slot is, and its slot stays booked for it, so a queue of N dispatches is paced in
 * order and each one is held back at most once. Limits are per engine process: several engines
 * sharing one GitHub App should divide the budget (docs/engine.md "Dispatch pacing").
 */

/** Budgets for content-creating requests. Counts per window; `maxConcurrent` requests at once. */
export interface PacingLimits {
  perMinute: number;
  perHour: number;
  maxConcurrent: number;
}

/** GitHub's documented secondary limits (see the module comment). */
export const GITHUB_SECONDARY_LIMITS: PacingLimits = {
  perMinute: 80,
  perHour: 500,
  maxConcurrent: 100,
};

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;

/** The answer for one dispatch: send it now, or not before `at` (epoch ms). */
export type Slot = { now: true } | { now: false; at: number; why: string };

/**
 * Books send times under per-minute and per-hour budgets, and honours a block set from
 * GitHub's own `retry-after` / `x-ratelimit-reset`. Not thread-shared: one per process.
 */
export class DispatchPacer {
  /** Booked or used send times (epoch ms), ascending, within the last hour. */
  private readonly times: number[] = [];
  /** key -> booked time not yet used. */
  private readonly booked = new Map<string, number>();
  private blockedUntil = 0;
  private blockedWhy = "";

  /** @throws RangeError when a limit is not a positive integer. */
  constructor(
    readonly limits: PacingLimits,
    private readonly now: () => number = Date.now,
  ) {
    for (const [k, v] of Object.entries(limits)) {
      if (!Number.isSafeInteger(v) || v < 1) {
        throw new RangeError(`[github] pacing limit ${k} must be a positive integer, got ${v}`);
      }
    }
  }

  /**
   * The slot of the dispatch named `key` (e.g. step run id and dispatch sequence). Books one if
   * it has none; a slot that has come is used up by this call (the caller sends now).
   */
  take(key: string): Slot {
    const now = this.now();
    this.forget(now);
    const mine = this.booked.get(key);
    if (mine !== undefined) {
      if (mine <= now && now >= this.blockedUntil) {
        this.booked.delete(key);
        return { now: true };
      }
      if (now < this.blockedUntil) {
        // GitHub told us to wait after this slot was booked: book again after the block.
        this.unbook(key);
      } else {
        return { now: false, at: mine, why: this.why(mine) };
      }
    }
    const at = this.earliest(Math.max(now, this.blockedUntil));
    insertSorted(this.times, at);
    if (at <= now) return { now: true };
    this.booked.set(key, at);
    return { now: false, at, why: this.why(at) };
  }

  /**
   * GitHub refused a request for rate (403/429): no dispatch is sent before `until` (epoch ms).
   * The refused request's slot was used; its next try books a new one.
   */
  block(until: number, why: string): void {
    if (until > this.blockedUntil) {
      this.blockedUntil = until;
      this.blockedWhy = why;
    }
  }

  /** Dispatches booked and waiting for their slot (for diagnostics). */
  get waiting(): number {
    return this.booked.size;
  }

  private why(at: number): string {
    if (at <= this.blockedUntil) return this.blockedWhy;
    return `pacing under GitHub's secondary rate limits (${this.limits.perMinute}/min, ${this.limits.perHour}/h)`;
  }

  /**
   * Earliest t >= from, and not before any slot already booked (first come, first served), at
   * which both windows ending at t hold fewer sends than their budget. Every kept time is then
   * <= t, so only the windows ending at t need checking; two rounds settle both.
   */
  private earliest(from: number): number {
    const last = this.times[this.times.length - 1];
    let t = last === undefined ? from : Math.max(from, last);
    for (let round = 0; round < 4; round++) {
      const next = Math.max(
        this.clearAt(t, MINUTE_MS, this.limits.perMinute),
        this.clearAt(t, HOUR_MS, this.limits.perHour),
      );
      if (next <= t) return t;
      t = next;
    }
    return t;
  }

  /** t, or the time the budget-th most recent send leaves the window ending at t. */
  private clearAt(t: number, window: number, budget: number): number {
    const n = this.times.length;
    if (n < budget) return t;
    const kth = this.times[n - budget] ?? 0;
    return kth > t - window ? kth + window : t;
  }

  private unbook(key: string): void {
    const at = this.booked.get(key);
    this.booked.delete(key);
    if (at === undefined) return;
    const i = this.times.indexOf(at);
    if (i >= 0) this.times.splice(i, 1);
  }

  /** Drops send times older than an hour and bookings nobody came back for within an hour. */
  private forget(now: number): void {
    let drop = 0;
    while (drop < this.times.length && (this.times[drop] ?? 0) <= now - HOUR_MS) drop++;
    if (drop > 0) this.times.splice(0, drop);
    for (const [k, at] of this.booked) if (at <= now - HOUR_MS) this.booked.delete(k);
  }
}

function insertSorted(xs: number[], x: number): void {
  let i = xs.length;
  while (i > 0 && (xs[i - 1] ?? 0) > x) i--;
  xs.splice(i, 0, x);
}

/**
 * When GitHub says a rate-limited request may be retried (epoch ms), from its headers:
 * `retry-after` (seconds), else `x-ratelimit-reset` (epoch seconds) when
 * `x-ratelimit-remaining` is 0, else one minute (GitHub's advice for secondary limits).
 * Returns null when the answer is not a rate limit (not 429, and not a 403 with those headers).
 */
export function rateLimitedUntil(
  status: number,
  headers: Record<string, string | undefined>,
  now: number,
): number | null {
  const retryAfter = headers["retry-after"];
  const remaining = headers["x-ratelimit-remaining"];
  const reset = headers["x-ratelimit-reset"];
  const limited = status === 429 || (status === 403 && (!!retryAfter || remaining === "0"));
  if (!limited) return null;
  const seconds = retryAfter !== undefined ? Number(retryAfter) : Number.NaN;
  if (Number.isFinite(seconds) && seconds >= 0) return now + Math.ceil(seconds * 1000);
  const resetAt = reset !== undefined ? Number(reset) * 1000 : Number.NaN;
  if (remaining === "0" && Number.isFinite(resetAt)) return Math.max(now, resetAt);
  return now + MINUTE_MS;
}
