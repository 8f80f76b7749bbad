/**
 * Dispatch pacing under GitHub's secondary rate limits (engine/src/adapters/github/pacer.ts):
 * slots per minute and per hour, first come first served, one booking per dispatch, GitHub's
 * own retry-after honoured; and the transition keeps a throttled dispatch `dispatching`.
 */
import { describe, expect, it } from "vitest";
import {
  DispatchPacer,
  GITHUB_SECONDARY_LIMITS,
  rateLimitedUntil,
} from "../../engine/src/adapters/github/pacer.ts";
import { transition } from "../../engine/src/domain/transition.ts";
import type { Release } from "../../engine/src/domain/types.ts";
import type { StepSpec } from "../support/manifest-fixture.ts";
import { ok, release } from "../support/sim/drive.ts";

const T0 = 1_800_000_000_000;

function clock(t = T0) {
  const c = { t, now: () => c.t };
  return c;
}

describe("DispatchPacer", () => {
  it("sends 80 at once, then books the 81st one minute after the first", () => {
    const c = clock();
    const p = new DispatchPacer(GITHUB_SECONDARY_LIMITS, c.now);
    for (let i = 0; i < 80; i++) expect(p.take(`k${i}`)).toEqual({ now: true });
    const slot = p.take("k80");
    expect(slot).toMatchObject({ now: false, at: T0 + 60_000 });
    expect(p.waiting).toBe(1);
  });

  it("keeps a booking: asking again before the slot gives the same time, at the slot sends", () => {
    const c = clock();
    const p = new DispatchPacer({ perMinute: 1, perHour: 100, maxConcurrent: 1 }, c.now);
    expect(p.take("a")).toEqual({ now: true });
    const b1 = p.take("b");
    const b2 = p.take("b");
    expect(b1).toEqual(b2);
    expect(b1).toMatchObject({ now: false, at: T0 + 60_000 });
    c.t = T0 + 60_000;
    expect(p.take("b")).toEqual({ now: true });
    expect(p.waiting).toBe(0);
  });

  it("is first come, first served: a later dispatch never jumps a booked one", () => {
    const c = clock();
    const p = new DispatchPacer({ perMinute: 2, perHour: 100, maxConcurrent: 1 }, c.now);
    p.take("a");
    p.take("b");
    const cSlot = p.take("c");
    const dSlot = p.take("d");
    const eSlot = p.take("e");
    expect(cSlot).toMatchObject({ at: T0 + 60_000 });
    expect(dSlot).toMatchObject({ at: T0 + 60_000 });
    expect(eSlot).toMatchObject({ at: T0 + 120_000 });
  });

  it("never books more than 80 in any minute nor 500 in any hour over 1,000 dispatches", () => {
    const c = clock();
    const p = new DispatchPacer(GITHUB_SECONDARY_LIMITS, c.now);
    const times: number[] = [];
    for (let i = 0; i < 1000; i++) {
      const s = p.take(`k${i}`);
      times.push(s.now ? c.t : s.at);
    }
    times.sort((a, b) => a - b);
    for (let i = 0; i < times.length; i++) {
      const t = times[i] ?? 0;
      expect(times.filter((x) => x > t - 60_000 && x <= t).length).toBeLessThanOrEqual(80);
      expect(times.filter((x) => x > t - 3_600_000 && x <= t).length).toBeLessThanOrEqual(500);
    }
    // 1,000 at 500/h and 80/min: 500 in the first hour's first minutes, the rest an hour later.
    expect(times[499]).toBeLessThan(T0 + 10 * 60_000);
    expect(times[500]).toBeGreaterThanOrEqual(T0 + 3_600_000);
    expect(times[999]).toBeLessThan(T0 + 3_600_000 + 10 * 60_000);
  });

  it("honours GitHub's block: nothing is sent before it ends, bookings move after it", () => {
    const c = clock();
    const p = new DispatchPacer(GITHUB_SECONDARY_LIMITS, c.now);
    p.block(T0 + 30_000, "HTTP 403 secondary rate limit");
    const s = p.take("a");
    expect(s).toMatchObject({ now: false, at: T0 + 30_000, why: "HTTP 403 secondary rate limit" });
    c.t = T0 + 30_000;
    expect(p.take("a")).toEqual({ now: true });
  });

  it("refuses a limit that is not a positive integer", () => {
    expect(() => new DispatchPacer({ perMinute: 0, perHour: 1, maxConcurrent: 1 })).toThrow(
      /perMinute must be a positive integer/,
    );
  });
});

describe("rateLimitedUntil", () => {
  it("reads retry-after seconds", () => {
    expect(rateLimitedUntil(403, { "retry-after": "42" }, T0)).toBe(T0 + 42_000);
    expect(rateLimitedUntil(429, { "retry-after": "1" }, T0)).toBe(T0 + 1_000);
  });
  it("reads x-ratelimit-reset when the primary budget is spent", () => {
    const reset = Math.floor(T0 / 1000) + 90;
    expect(
      rateLimitedUntil(
        403,
        { "x-ratelimit-remaining": "0", "x-ratelimit-reset": String(reset) },
        T0,
      ),
    ).toBe(reset * 1000);
  });
  it("waits a minute on a 429 without headers, and is null for other answers", () => {
    expect(rateLimitedUntil(429, {}, T0)).toBe(T0 + 60_000);
    expect(rateLimitedUntil(403, {}, T0)).toBeNull();
    expect(rateLimitedUntil(500, { "retry-after": "5" }, T0)).toBeNull();
  });
});

describe("transition: a throttled dispatch", () => {
  const specs: StepSpec[] = [{ name: "attach_queue_lane", kind: "runner", backward: true }];
  const S0 = "sr_17_0_f";
  const started = (): Release => ok(release(specs), { type: "start" }).release;

  it("stays dispatching, is not a try, and is sent again at its slot with a history line", () => {
    const r0 = started();
    const at = r0.updated_at + 45_000;
    const res = transition(
      r0,
      {
        type: "dispatch_failed",
        step_run_id: S0,
        dispatch: 1,
        retryable: true,
        message: "[github] held back: pacing",
        throttled_until: at,
      },
      r0.updated_at + 1,
    );
    if (!res.ok) throw new Error(res.reason);
    const run = res.release.step_runs.find((s) => s.id === S0);
    expect(run?.state).toBe("dispatching");
    expect(run?.tries).toBe(r0.step_runs.find((s) => s.id === S0)?.tries);
    expect(res.effects).toEqual([expect.objectContaining({ type: "dispatch", not_before: at })]);
    expect(res.history.map((h) => h.message).join("\n")).toMatch(/throttled .* sent at /);
    expect(res.release.high_water_mark).toBe(r0.high_water_mark);
  });

  it("a thousand throttles never turn the step run unknown", () => {
    let r = started();
    for (let i = 0; i < 1000; i++) {
      r = ok(r, {
        type: "dispatch_failed",
        step_run_id: S0,
        dispatch: 1,
        retryable: true,
        message: "HTTP 403: secondary rate limit",
        throttled_until: r.updated_at + 60_000,
      }).release;
    }
    expect(r.step_runs.find((s) => s.id === S0)?.state).toBe("dispatching");
    expect(r.state).toBe("running");
  });
});
