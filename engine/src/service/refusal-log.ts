/**
 * Bounds what refused protocol requests write. A preflight or callback can
 * be refused (bad credential, duplicate, late, fenced) as often as anyone cares to send it;
 * step-run ids are guessable, so a stranger with no credential could otherwise append one
 * history row per request. Here each refusal has a key (step run, kind, reason code); the first
 * refusal of a key in a window (default one minute) is recorded, the others only counted, and
 * the count (`requests`: refusals since the last recorded row of that key, this one included)
 * rides on the next recorded row. Nothing is hidden, and history grows by at most one row per
 * key per window per engine process.
 *
 * Memory is bounded too: at most `maxKeys` keys are remembered (oldest forgotten first; a
 * forgotten key's next refusal is simply recorded again).
 */

/** Window (ms) in which one row per key is recorded. */
export const REFUSAL_WINDOW_MS = 60_000;
/** Keys remembered at most. */
export const REFUSAL_MAX_KEYS = 10_000;

interface Seen {
  /** Epoch ms of the last recorded row of the key. */
  recordedAt: number;
  /** Refusals counted since then, not yet on a row. */
  pending: number;
}

export class RefusalLog {
  private readonly seen = new Map<string, Seen>();

  constructor(
    private readonly windowMs = REFUSAL_WINDOW_MS,
    private readonly maxKeys = REFUSAL_MAX_KEYS,
  ) {}

  /**
   * Notes one refusal of `key` at `now` (epoch ms). Returns the number of refusals the row to
   * record now stands for, or null when this one is only counted (a row of the key was
   * recorded less than a window ago).
   */
  admit(key: string, now: number): number | null {
    const s = this.seen.get(key);
    if (s && now - s.recordedAt < this.windowMs && now >= s.recordedAt) {
      s.pending++;
      return null;
    }
    const requests = 1 + (s?.pending ?? 0);
    this.seen.delete(key);
    this.seen.set(key, { recordedAt: now, pending: 0 });
    while (this.seen.size > this.maxKeys) {
      const oldest = this.seen.keys().next().value;
      if (oldest === undefined) break;
      this.seen.delete(oldest);
    }
    return requests;
  }

  /** Keys remembered now (for tests). */
  get size(): number {
    return this.seen.size;
  }
}

/** Log lines about refused requests written per window at most; the rest are counted. */
export const REFUSAL_LOG_LINES = 20;

/**
 * Bounds the log lines refused requests write: a stranger can send forged requests to as many
 * distinct step-run ids as they like, and each distinct id is a new key of `RefusalLog`. At
 * most `perWindow` lines are written per window (default one minute); the rest are counted,
 * and the first line of the next window says how many were not written.
 */
export class SampledLog {
  private windowStart = Number.NEGATIVE_INFINITY;
  private written = 0;
  private counted = 0;

  constructor(
    private readonly perWindow = REFUSAL_LOG_LINES,
    private readonly windowMs = REFUSAL_WINDOW_MS,
  ) {}

  /** Writes `message` with `write` unless this window's lines are spent; `now` is epoch ms. */
  line(write: (message: string) => void, message: string, now: number): void {
    if (now - this.windowStart >= this.windowMs || now < this.windowStart) {
      if (this.counted > 0) {
        write(
          `[engine] ${this.counted} more refused requests in the ${Math.round(this.windowMs / 1000)} s before were counted, not logged (at most ${this.perWindow} lines a window)`,
        );
      }
      this.windowStart = now;
      this.written = 0;
      this.counted = 0;
    }
    if (this.written < this.perWindow) {
      this.written++;
      write(message);
    } else {
      this.counted++;
    }
  }
}
