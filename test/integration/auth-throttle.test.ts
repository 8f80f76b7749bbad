/**
 * Credential guessing is throttled per client address (http/auth-throttle.ts): after 10 wrong
 * bearer tokens or failed sign-ins within a minute, every credential from that address gets 429
 * with Retry-After and the time to retry, until the minute is over (a fake clock moves it).
 * Other addresses, requests without a credential and runners' callbacks are not affected.
 * Before: 300 wrong tokens in 3.3 s, all plain 401.
 */
import { afterEach, describe, expect, it } from "vitest";
import { AUTH_THROTTLE } from "../../engine/src/http/auth-throttle.ts";
import { type Harness, makeHarness, OPERATOR, STORE_KINDS, skipStore } from "./service-harness.ts";

const from = (address: string) => ({ incoming: { socket: { remoteAddress: address } } });

describe.each(STORE_KINDS)("auth throttle on %s", (kind) => {
  if (skipStore(kind)) {
    it.skip("Postgres: BATON_TEST_DATABASE_URL is not set", () => {});
    return;
  }
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });
  const get = (g: Harness, token: string, address: string) =>
    g.engine.app.request(
      "/v1/releases",
      { headers: { authorization: `Bearer ${token}` } },
      from(address),
    );

  it("wrong bearer tokens: 401 ten times, then 429 with Retry-After for any token from that address, until the window ends", async () => {
    h = await makeHarness({ kind });
    for (let i = 0; i < AUTH_THROTTLE.failures; i++) {
      expect((await get(h, `guess-${i}-0123456789abcdef`, "203.0.113.7")).status).toBe(401);
    }
    const refused = await get(h, "guess-x-0123456789abcdef", "203.0.113.7");
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("60");
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("too_many_requests");
    expect(body.error.message).toMatch(
      /from 203\.0\.113\.7; nothing was checked; try again in 60 s \(at \d{4}-/,
    );
    // The right token too: an answer must not tell a right guess from a wrong one.
    expect((await get(h, OPERATOR, "203.0.113.7")).status).toBe(429);
    // Another address, and requests without a credential, are not affected.
    expect((await get(h, OPERATOR, "198.51.100.1")).status).toBe(200);
    expect((await h.engine.app.request("/healthz", {}, from("203.0.113.7"))).status).toBe(200);
    h.clock.advance(30_000);
    expect((await get(h, OPERATOR, "203.0.113.7")).headers.get("retry-after")).toBe("30");
    h.clock.advance(30_000);
    expect((await get(h, OPERATOR, "203.0.113.7")).status).toBe(200);
  });

  it("failed sign-ins on /login count the same way", async () => {
    h = await makeHarness({ kind });
    const signIn = (g: Harness, token: string) =>
      g.engine.app.request(
        "/login",
        {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ token, next: "/releases" }),
        },
        from("203.0.113.8"),
      );
    for (let i = 0; i < AUTH_THROTTLE.failures; i++) {
      expect((await signIn(h, `wrong-${i}`)).status).toBe(401);
    }
    const r = await signIn(h, OPERATOR);
    expect(r.status).toBe(429);
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("a right token never counts; runners' callbacks are not throttled here", async () => {
    h = await makeHarness({ kind });
    for (let i = 0; i < AUTH_THROTTLE.failures * 2; i++) {
      expect((await get(h, OPERATOR, "203.0.113.9")).status).toBe(200);
    }
    for (let i = 0; i < AUTH_THROTTLE.failures * 2; i++) {
      const r = await h.engine.app.request(
        "/v1/releases/step-runs/sr_1_0_f/callback",
        {
          method: "POST",
          headers: { authorization: "Bearer nope", "content-type": "application/json" },
          body: "{}",
        },
        from("203.0.113.9"),
      );
      expect(r.status).toBe(401);
    }
  });
});
