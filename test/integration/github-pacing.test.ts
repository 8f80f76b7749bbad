/**
 * The GitHub dispatcher paced under GitHub's documented secondary limits, against the stand-in
 * that enforces them (403 + retry-after): 1,000 dispatches queued at once are each delivered
 * exactly once, none refused for rate; and when the stand-in's budget is smaller than the
 * engine's (another client shares it), GitHub's retry-after is honoured and nothing is doubled.
 * Hours of pacing run in seconds on one fake clock shared by the engine side and the stand-in.
 */
import { afterEach, describe, expect, it } from "vitest";
import { GitHubDispatcher } from "../../engine/src/adapters/github/dispatcher.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { type GitHubStandin, startGitHubStandin } from "../support/github-standin.ts";

const T0 = 1_800_000_000_000;
let standin: GitHubStandin | null = null;
afterEach(async () => {
  await standin?.close();
  standin = null;
});

function payload(i: number): DispatchPayload {
  return {
    v: 1,
    step_run_id: `sr_${i}_1_f`,
    tool: "noop",
    args: {},
    callback_url: `http://127.0.0.1:1/v1/releases/step-runs/sr_${i}_1_f/callback`,
    release: {
      id: `r${i}`,
      generation: 1,
      manifest_digest: "a".repeat(64),
      dispatch: 1,
      operation_key: `r${i}:1:fwd:noop`,
    },
  } as unknown as DispatchPayload;
}

/**
 * Sends every payload, re-sending throttled ones at their `retry_at` by moving the clock to the
 * earliest one. Bounded: at most `rounds` clock moves. Returns per step run the number of 204s
 * the dispatcher reported and the number of throttles seen.
 */
async function drain(
  d: GitHubDispatcher,
  clock: { t: number },
  payloads: DispatchPayload[],
  rounds = 5_000,
): Promise<{ accepted: Map<string, number>; throttles: number; rounds: number }> {
  const accepted = new Map<string, number>();
  let pending = payloads.map((p) => ({ p, at: clock.t }));
  let throttles = 0;
  let round = 0;
  for (; round < rounds && pending.length > 0; round++) {
    const due = pending.filter((x) => x.at <= clock.t);
    const later = pending.filter((x) => x.at > clock.t);
    const results = await Promise.all(due.map((x) => d.dispatch(x.p)));
    const again: typeof pending = [];
    results.forEach((r, i) => {
      const x = due[i];
      if (!x) return;
      if (r.ok) accepted.set(x.p.step_run_id, (accepted.get(x.p.step_run_id) ?? 0) + 1);
      else if (r.retry_at !== undefined) {
        throttles++;
        again.push({ p: x.p, at: r.retry_at });
      } else throw new Error(`unexpected failure: ${r.message}`);
    });
    pending = [...later, ...again];
    if (pending.length > 0 && due.length === 0) {
      clock.t = Math.min(...pending.map((x) => x.at));
    } else if (pending.every((x) => x.at > clock.t) && pending.length > 0) {
      clock.t = Math.min(...pending.map((x) => x.at));
    }
  }
  return { accepted, throttles, rounds: round };
}

describe("GitHub dispatcher pacing", () => {
  it("delivers 1,000 dispatches queued at once exactly once, none refused for rate", async () => {
    const clock = { t: T0 };
    const acceptedAt: number[] = [];
    standin = await startGitHubStandin({
      tokens: ["ghp_test"],
      now: () => clock.t,
      onAccepted: () => acceptedAt.push(clock.t),
    });
    const d = new GitHubDispatcher({
      repository: "acme/models",
      auth: { kind: "token", token: "ghp_test" },
      baseUrl: standin.baseUrl,
      // A loaded CI machine may take seconds per request: a timeout here would be a network
      // failure, not the pacing under test.
      timeoutMs: 120_000,
      now: () => clock.t,
    });
    const payloads = Array.from({ length: 1000 }, (_, i) => payload(i + 1));
    const out = await drain(d, clock, payloads);

    expect(out.accepted.size).toBe(1000);
    expect([...out.accepted.values()].every((n) => n === 1)).toBe(true);
    expect(standin.accepted).toHaveLength(1000);
    expect(new Set(standin.accepted.map((a) => a.client_payload.step_run_id)).size).toBe(1000);
    expect(standin.rateLimited).toBe(0);
    expect(standin.maxConcurrentSeen).toBeLessThanOrEqual(100);
    // Paced, not refused: each dispatch held back at most once (its slot is booked).
    expect(out.throttles).toBeLessThanOrEqual(1000 - 80);
    expect(out.throttles).toBeGreaterThan(0);
    acceptedAt.sort((a, b) => a - b);
    for (const t of acceptedAt) {
      expect(acceptedAt.filter((x) => x > t - 60_000 && x <= t).length).toBeLessThanOrEqual(80);
      expect(acceptedAt.filter((x) => x > t - 3_600_000 && x <= t).length).toBeLessThanOrEqual(500);
    }
    // 1,000 at 500 per hour: the second 500 wait for the first hour to pass.
    expect((acceptedAt[999] ?? 0) - T0).toBeGreaterThanOrEqual(3_600_000);
  }, 120_000);

  it("honours GitHub's retry-after when another client spends the budget: nothing doubled", async () => {
    const clock = { t: T0 };
    standin = await startGitHubStandin({
      tokens: ["ghp_test"],
      now: () => clock.t,
      // GitHub's budget is shared with someone else: only 10 per minute are left for us.
      rateLimits: { perMinute: 10, perHour: 500, maxConcurrent: 100 },
    });
    const d = new GitHubDispatcher({
      repository: "acme/models",
      auth: { kind: "token", token: "ghp_test" },
      baseUrl: standin.baseUrl,
      // A loaded CI machine may take seconds per request: a timeout here would be a network
      // failure, not the pacing under test.
      timeoutMs: 120_000,
      now: () => clock.t,
    });
    const out = await drain(
      d,
      clock,
      Array.from({ length: 40 }, (_, i) => payload(i + 1)),
    );
    expect(out.accepted.size).toBe(40);
    expect([...out.accepted.values()].every((n) => n === 1)).toBe(true);
    expect(standin.accepted).toHaveLength(40);
    // The stand-in refused some for rate; after each refusal nothing was sent before
    // GitHub's retry-after had passed.
    expect(standin.rateLimited).toBeGreaterThan(0);
    const sends = standin.seen.filter((s) => s.path.endsWith("/dispatches"));
    for (const refusal of sends.filter((s) => s.status === 403)) {
      const until = refusal.at + (refusal.retry_after ?? 0) * 1000;
      expect(sends.filter((s) => s.at > refusal.at && s.at < until)).toEqual([]);
    }
  }, 60_000);

  it("answers a rate-limited dispatch as throttled with GitHub's retry time, not a failure", async () => {
    const clock = { t: T0 };
    standin = await startGitHubStandin({ tokens: ["ghp_test"], now: () => clock.t });
    standin.behave({ kind: "status", status: 429, headers: { "retry-after": "7" } }, 1);
    const d = new GitHubDispatcher({
      repository: "acme/models",
      auth: { kind: "token", token: "ghp_test" },
      baseUrl: standin.baseUrl,
      // A loaded CI machine may take seconds per request: a timeout here would be a network
      // failure, not the pacing under test.
      timeoutMs: 120_000,
      now: () => clock.t,
    });
    const r = await d.dispatch(payload(1));
    expect(r).toMatchObject({ ok: false, retryable: true, status: 429, retry_at: T0 + 7_000 });
    // Everything waits for GitHub's time, not only the refused dispatch.
    expect(await d.dispatch(payload(2))).toMatchObject({ ok: false, retry_at: T0 + 7_000 });
    clock.t = T0 + 7_000;
    expect(await d.dispatch(payload(1))).toEqual({ ok: true });
  });
});
