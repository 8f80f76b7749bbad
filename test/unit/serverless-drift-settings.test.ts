/** BATON_DRIFT_INTERVAL_MS on the serverless entries: default, off, and a bad value named. */
import { describe, expect, it } from "vitest";
import { serverlessSettings } from "../../engine/src/entries/serverless.ts";
import { eventLeaseMs } from "../../engine/src/service/drift.ts";

const env = {
  DATABASE_URL: "postgres://u@127.0.0.1:1/db",
  BATON_PUBLIC_URL: "https://baton.example.org",
  BATON_CALLBACK_SECRETS: "s".repeat(32),
  BATON_OPERATOR_TOKEN: "o".repeat(32),
  BATON_CONTROL_PLANE_URL: "https://cp.example.org",
  BATON_CONTROL_PLANE_TOKEN: "c".repeat(32),
  GITHUB_REPOSITORY: "acme/models",
  GITHUB_TOKEN: "t",
};

describe("serverless drift settings", () => {
  it("observes every 60 s by default; 0 turns it off; 300000 is five minutes", () => {
    expect(serverlessSettings(env).BATON_DRIFT_INTERVAL_MS).toBe(60_000);
    expect(
      serverlessSettings({ ...env, BATON_DRIFT_INTERVAL_MS: "0" }).BATON_DRIFT_INTERVAL_MS,
    ).toBe(0);
    expect(
      serverlessSettings({ ...env, BATON_DRIFT_INTERVAL_MS: "300000" }).BATON_DRIFT_INTERVAL_MS,
    ).toBe(300_000);
  });

  it.each(["soon", "500", "-1", "1.5", "90000000"])(
    "BATON_DRIFT_INTERVAL_MS=%s is refused naming the variable and the allowed values",
    (v) => {
      expect(() => serverlessSettings({ ...env, BATON_DRIFT_INTERVAL_MS: v })).toThrow(
        /BATON_DRIFT_INTERVAL_MS: must be (a number|a whole number|0 \(off\) or at least 1000|at most 86400000)/,
      );
    },
  );

  it("an event's lease ends a tenth of the interval early, at most 10 s: a per-minute schedule hits every 5th minute with 300000", () => {
    expect(eventLeaseMs(60_000)).toBe(54_000);
    expect(eventLeaseMs(300_000)).toBe(290_000);
    expect(eventLeaseMs(1_000)).toBe(900);
    // Events every 60 s, the first at 0 (observes): the next to observe is the 5th after it.
    const starts = Array.from({ length: 11 }, (_, i) => i * 60_000);
    let until = -1;
    const observed: number[] = [];
    for (const t of starts) {
      if (until < t) {
        observed.push(t / 60_000);
        until = t + eventLeaseMs(300_000);
      }
    }
    expect(observed).toEqual([0, 5, 10]);
  });
});

describe("serverless secrets", () => {
  it("refuses an operator token equal to a callback secret, naming both variables and never the token", () => {
    const shared = "x".repeat(40);
    let text = "";
    try {
      serverlessSettings({
        ...env,
        BATON_CALLBACK_SECRETS: `${"s".repeat(32)},${shared}`,
        BATON_OPERATOR_TOKEN: shared,
      });
    } catch (e) {
      text = (e as Error).message;
    }
    expect(text).toMatch(/BATON_OPERATOR_TOKEN equals one of BATON_CALLBACK_SECRETS/);
    expect(text).toMatch(/fix: give each operator token a value of its own/);
    expect(text).not.toContain(shared);
  });
});
