import { describe, expect, it } from "vitest";
import { type DashboardTokens, Sessions } from "../../engine/src/http/dashboard/auth.ts";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import { reasonOf } from "../../engine/src/http/dashboard/release-page.tsx";
import type { ReleaseRecord } from "../../engine/src/service/api.ts";
import {
  compensatedRecord,
  FAILING_CHECK,
  fakeApi,
  LATE_REASON,
  succeededRecord,
} from "../support/dashboard-fixtures.ts";

const OP = "op-secret-token";
const VIEW = "view-secret-token";
const BASE = "http://127.0.0.1:8787";

function setup(
  opts: {
    tokens?: DashboardTokens;
    records?: ReleaseRecord[];
    repository?: string;
    publicUrl?: string;
  } = {},
) {
  const api = fakeApi(opts.records);
  const clock = { t: Date.UTC(2026, 10, 29, 12, 0, 0) };
  const app = dashboardApp({
    api,
    tokens: opts.tokens ?? { operator: OP, viewer: VIEW },
    publicUrl: opts.publicUrl ?? BASE,
    repository: opts.repository ?? "acme/models",
    now: () => clock.t,
  });
  /** Signs in with `token` on /login and returns the session cookie (`name=value`). */
  const signIn = async (token: string): Promise<string> => {
    const res = await app.request(`${BASE}/login`, {
      method: "POST",
      body: new URLSearchParams({ token, next: "/releases" }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    const cookie = /^(baton_session=[^;]+)/.exec(res.headers.get("set-cookie") ?? "")?.[1];
    if (!cookie) throw new Error(`sign-in with ${token} set no session cookie`);
    return cookie;
  };
  const cookies = new Map<string, Promise<string>>();
  const sessionOf = (token: string) => {
    let c = cookies.get(token);
    if (!c) {
      c = signIn(token);
      cookies.set(token, c);
    }
    return c;
  };
  const get = async (path: string, token: string | null = VIEW) =>
    app.request(`${BASE}${path}`, {
      headers: token ? { cookie: await sessionOf(token) } : {},
    });
  const post = async (
    path: string,
    form: Record<string, string>,
    token: string | null,
    headers: Record<string, string> = {},
  ) =>
    app.request(`${BASE}${path}`, {
      method: "POST",
      body: new URLSearchParams(form),
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        ...(token ? { cookie: await sessionOf(token) } : {}),
        ...headers,
      },
    });
  /** The CSRF token the engine would put in `token`'s session's form for `action` on `target`. */
  const csrfFor = async (token: string, action: string, target: string) => {
    const tokens = opts.tokens ?? { operator: OP, viewer: VIEW };
    const sessions = new Sessions(tokens, () => clock.t);
    const cookie = (await sessionOf(token)).replace(/^baton_session=/, "");
    const who = await sessions.verify(cookie);
    if (!who) throw new Error("the test's session cookie does not verify");
    return sessions.csrfToken(who, action, target);
  };
  return { api, app, get, post, signIn, clock, csrfFor };
}

const csrfOf = (html: string) => /name="csrf" value="([0-9a-f.]*)"/.exec(html)?.[1] ?? "";

describe("releases list", () => {
  it("shows releases newest first with state, recipe and current step", async () => {
    const { get } = setup();
    const res = await get("/releases");
    expect(res.status).toBe(200);
    const html = await res.text();
    const order = ["r5", "r4", "r3", "r2"].map((id) => html.indexOf(`href="/releases/${id}"`));
    expect(order.every((i) => i > 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(html).toContain("chat-model-v7");
    expect(html).toContain('class="st st-rolled_back">rolled back</span>');
    expect(html).toContain("Filter by state");
  });

  it("filters by state and refuses an unknown state naming the choices", async () => {
    const { get } = setup();
    const html = await (await get("/releases?state=rolled_back")).text();
    expect(html).toContain('href="/releases/r3"');
    expect(html).not.toContain('href="/releases/r2"');
    const bad = await get("/releases?state=exploded");
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("is not a release state; use one of pending, running");
  });

  it("paginates 25 per page with an older-releases cursor", async () => {
    const records = Array.from({ length: 30 }, (_, i) => {
      const r = succeededRecord();
      r.release.id = `r${100 + i}`;
      r.release.created_at += i * 1000;
      return r;
    });
    const { get } = setup({ records });
    const first = await (await get("/releases")).text();
    expect((first.match(/href="\/releases\/r1\d\d"/g) ?? []).length).toBe(25);
    expect(first).toContain('href="/releases/r129"');
    const next = /href="(\/releases\?before=\d+)"/.exec(first)?.[1];
    expect(next).toBeDefined();
    const second = await (await get(next!)).text();
    expect((second.match(/href="\/releases\/r1\d\d"/g) ?? []).length).toBe(5);
    expect(second).toContain('href="/releases/r100"');
    expect(second).not.toContain("Older releases");
  });
});

describe("release page", () => {
  it("shows the manifest summary, forward and backward rows, run links and the high-water mark", async () => {
    const { get } = setup();
    const html = await (await get("/releases/r3")).text();
    const rec = compensatedRecord();
    expect(html).toContain(rec.release.manifest_digest);
    expect(html).toContain(rec.release.manifest.image);
    expect(html).toContain("lane-1");
    expect(html).toContain('href="/step-runs/sr_3_1_b"');
    expect(html).toContain("← Undo");
    expect(html).toContain('<tr class="bwd" id="step-2">');
    expect(html).toContain("https://github.com/acme/models/actions/runs/9002/attempts/2");
    expect(html).toContain("https://github.com/acme/models/actions/runs/9002/attempts/1");
    expect(html).toMatch(/class="hwm"><td colspan="5">▲ high-water mark: step 3/);
    // The high-water mark row sits after step 2's row and before step 3's.
    const hwm = html.indexOf('class="hwm"');
    expect(html.indexOf('href="/step-runs/sr_3_2_f"')).toBeLessThan(hwm);
    expect(html.indexOf("advertise capabilities", html.indexOf('id="part-steps"'))).toBeGreaterThan(
      hwm,
    );
    expect(html).toContain("1 m 49 s"); // sr_3_2_f: 91 s .. 200 s
  });

  it("builds no run link without a repository", async () => {
    const { get } = setup({ repository: "not a repo" });
    const html = await (await get("/releases/r3")).text();
    expect(html).not.toContain("github.com");
    expect(html).toContain("run 9002 · attempt 2");
  });

  it("labels refused events with their reason in the timeline", async () => {
    const { get } = setup();
    // Refused events are hidden by default (noise at 2am); `only=all` shows them.
    const main = await (await get("/releases/r3")).text();
    expect(main).not.toContain("refused: late");
    expect(main).toContain("the housekeeping refused events are hidden");
    const html = await (await get("/releases/r3?only=all")).text();
    expect(html).toContain("refused: late");
    expect(html).toContain(LATE_REASON);
    expect(html).toContain("refused: fenced");
    expect(html).toContain("14 events, 2 refused");
    const only = await (await get("/releases/r3?only=refused")).text();
    expect(only).toContain("Events 1–2 of 2");
    expect(only).not.toContain("release r3 started");
  });

  it("paginates a long timeline, newest first", async () => {
    const rec = compensatedRecord();
    const base = rec.history[0]!;
    rec.history = Array.from({ length: 250 }, (_, i) => ({
      ...base,
      at: base.at + i,
      message: `[engine] event number ${i}`,
    }));
    const { get } = setup({ records: [rec] });
    const html = await (await get("/releases/r3")).text();
    expect(html).toContain("Events 1–100 of 250, newest first");
    expect(html).toContain("event number 249<");
    expect(html).not.toContain("event number 149<");
    expect(html.indexOf("event number 249<")).toBeLessThan(html.indexOf("event number 248<"));
    const older = await (await get("/releases/r3?ev=200")).text();
    expect(older).toContain("Events 201–250 of 250");
    expect(older).toContain("event number 0<");
  });

  it("is live while running (SSE script and a no-JS refresh), static once terminal", async () => {
    const { get } = setup();
    const running = await (await get("/releases/r4")).text();
    expect(running).toContain('<noscript><meta http-equiv="refresh" content="10"/></noscript>');
    expect(running).toContain("new EventSource(");
    expect(running).toContain('data-live="1"');
    const done = await (await get("/releases/r3")).text();
    expect(done).not.toContain("EventSource(");
    expect(done).not.toContain('http-equiv="refresh"');
  });

  it("streams change and end events for a release", async () => {
    const { get } = setup();
    const res = await get("/releases/r3/events?v=old");
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const text = await res.text();
    expect(text).toContain("event: change");
    expect(text).toContain('"state":"rolled_back"');
    expect(text).toContain("event: end");
  });

  it("offers abort on a running release and resume and retry on a paused one", async () => {
    const { get } = setup();
    const running = await (await get("/releases/r4")).text();
    expect(running).toContain('href="/releases/r4/abort"');
    expect(running).not.toContain('href="/releases/r4/resume"');
    const paused = await (await get("/releases/r5")).text();
    expect(paused).toContain('href="/releases/r5/resume"');
    expect(paused).toContain('href="/step-runs/sr_5_1_f/retry"');
    expect(paused).toContain("dispatch lost");
  });

  it("answers 404 with one sentence for unknown or malformed ids", async () => {
    const { get } = setup();
    const missing = await get("/releases/r99");
    expect(missing.status).toBe(404);
    expect(await missing.text()).toContain("[engine] release r99 not found");
    const bad = await get("/releases/xyz");
    expect(bad.status).toBe(404);
    expect(await bad.text()).toContain("is not a release id; ids look like r17");
    const sr = await get("/step-runs/sr_x");
    expect(sr.status).toBe(404);
    expect(await sr.text()).not.toMatch(/at .*\.ts:\d+/);
  });

  it("escapes text from the engine", async () => {
    const rec = compensatedRecord();
    rec.release.reason = "<img src=x onerror=alert(1)>";
    const { get } = setup({ records: [rec] });
    const html = await (await get("/releases/r3")).text();
    expect(html).not.toContain("<img src=x");
    expect(html).toContain("&lt;img src=x onerror=alert(1)&gt;");
  });
});

describe("retry model panel", () => {
  it("defaults p to the step's observed success rate and q to 0, at time 0", async () => {
    const { get } = setup();
    const html = await (await get("/releases/r3?model=1")).text();
    expect(html).toContain("observed per-attempt success rate: 1 of 1 = 1");
    expect(html).toContain(
      'id="mk-q" name="mq" type="number" min="0" max="1" step="any" value="0"',
    );
    expect(html).toContain("P(completed after 0 steps) = 0");
    expect(html).toContain("says nothing about whether an unsafe intermediate");
    expect(html).toMatch(/Absorbing/);
  });

  it("picks the failed step by default and counts a fenced attempt as a try", async () => {
    const { get } = setup();
    const html = await (await get("/releases/r3")).text();
    expect(html).toContain("observed per-attempt success rate: 0 of 2 = 0");
  });

  it("recomputes without JavaScript from the form's query", async () => {
    const { get } = setup();
    const a = await (await get("/releases/r3?model=2&mp=0.25&mq=0&mt=3")).text();
    expect(a).toContain("P(completed after 3 steps) = 0.578125");
    const b = await (await get("/releases/r3?model=2&mp=1&mq=1&mt=2")).text();
    expect(b).toContain("P(completed after 2 steps) = 0");
    expect(b).toContain("Alternating forever");
    const c = await (await get("/releases/r3?mp=0&mq=0&mt=4")).text();
    expect(c).toContain("every distribution is stationary (p = q = 0)");
  });

  it("has Step, Play, Pause and Reset controls with accessible names", async () => {
    const { get } = setup();
    const html = await (await get("/releases/r3")).text();
    for (const name of [
      "Step: advance one attempt",
      "Play: two steps a second",
      "Pause playback",
      "Reset: default p and q, time 0",
    ]) {
      expect(html).toContain(`aria-label="${name}"`);
    }
    expect(html).toContain('<label for="mk-p">');
  });
});

describe("step-run page", () => {
  it("renders checks.json failing first, the log tail, download link, raw callback and preflight", async () => {
    const { get } = setup();
    const html = await (await get("/step-runs/sr_3_2_f")).text();
    const failing = html.indexOf(`<td>${FAILING_CHECK}</td>`);
    expect(failing).toBeGreaterThan(0);
    expect(failing).toBeLessThan(html.indexOf("<td>pull</td>"));
    expect(html).toContain('class="failing"');
    expect(html).toContain("GET /health answered 503");
    expect(html).toContain("3 checks, 1 failing (failing first)");
    expect(html).toContain("line 400: probing");
    expect(html).not.toContain("line 100: probing");
    expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(html).toContain('href="/step-runs/sr_3_2_f/attempts/2/log"');
    expect(html).toContain("Raw callback");
    expect(html).toContain("&quot;step_run_id&quot;:&quot;sr_3_2_f&quot;");
    expect(html).toContain("Preflight record");
    expect(html).toContain("https://github.com/acme/models/actions/runs/9002/attempts/2");
  });

  it("downloads the full stored log", async () => {
    const { get } = setup();
    const res = await get("/step-runs/sr_3_2_f/attempts/2/log");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-disposition")).toContain(
      'attachment; filename="sr_3_2_f-attempt-2.log"',
    );
    const text = await res.text();
    expect(text).toContain("line 1: probing");
    expect(text).toContain("line 400: probing");
    expect((await get("/step-runs/sr_3_2_f/attempts/1/log")).status).toBe(404);
  });

  it("says so when an attempt has no callback", async () => {
    const { get } = setup();
    const html = await (await get("/step-runs/sr_3_2_f?attempt=1")).text();
    expect(html).toContain("No callback stored for attempt 1.");
  });
});

describe("sign-in and operator actions", () => {
  it("sends readers without a token to sign in, and accepts the viewer token", async () => {
    const { get, post } = setup();
    const res = await get("/releases/r3", null);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/login?next=%2Freleases%2Fr3");
    expect((await get("/releases/r3/events", null)).status).toBe(401);
    const wrong = await post("/login", { token: "nope", next: "/releases/r3" }, null);
    expect(wrong.status).toBe(401);
    expect(await wrong.text()).toContain(
      "that token is not your own (BATON_OPERATORS), the operator or the viewer token",
    );
    const ok = await post("/login", { token: VIEW, next: "/releases/r3" }, null);
    expect(ok.status).toBe(303);
    expect(ok.headers.get("location")).toBe("/releases/r3");
    expect(ok.headers.get("set-cookie")).toMatch(/baton_session=[^;]+;.*HttpOnly.*SameSite=Strict/);
    const evil = await post("/login", { token: VIEW, next: "//evil.example" }, null);
    expect(evil.headers.get("location")).toBe("/releases");
  });

  it("refuses a viewer's retry, then accepts the operator's and shows the new state", async () => {
    const { get, post, api } = setup();
    const vPage = await (await get("/step-runs/sr_5_1_f/retry", VIEW)).text();
    expect(vPage).toContain("viewer token, which only reads");
    const refused = await post(
      "/step-runs/sr_5_1_f/retry",
      { csrf: csrfOf(vPage), confirm: "yes" },
      VIEW,
    );
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain(
      "the viewer token only reads; retry needs the operator token",
    );
    expect(api.calls).toEqual([]);

    const oPage = await (await get("/step-runs/sr_5_1_f/retry", OP)).text();
    expect(oPage).toContain("Yes, retry sr_5_1_f");
    const accepted = await post(
      "/step-runs/sr_5_1_f/retry",
      { csrf: csrfOf(oPage), confirm: "yes" },
      OP,
    );
    expect(accepted.status).toBe(200);
    const html = await accepted.text();
    expect(html).toContain("retry of sr_5_1_f accepted");
    expect(html).toContain('Release r5 is now <span class="st st-running">running</span>');
    expect(api.calls).toEqual([
      { method: "retry", target: "sr_5_1_f", actor: "dashboard (operator token)" },
    ]);
  });

  it("a person signs in with their own token: each action is recorded as theirs, never as the shared token", async () => {
    const MARIA = "maria-token-0123456789abcdef";
    const LEE = "lee-token-0123456789abcdefgh";
    const people = [
      { name: "maria", token: MARIA },
      { name: "lee", token: LEE },
    ];
    const { get, post, api, signIn, clock } = setup({
      tokens: { operator: OP, viewer: VIEW, people },
    });
    const page = await (await get("/step-runs/sr_5_1_f/retry", MARIA)).text();
    expect(page).toContain("Yes, retry sr_5_1_f");
    expect(page).toContain("signed in as maria (operator)");
    const accepted = await post(
      "/step-runs/sr_5_1_f/retry",
      { csrf: csrfOf(page), confirm: "yes" },
      MARIA,
    );
    expect(accepted.status).toBe(200);
    expect(api.calls).toEqual([{ method: "retry", target: "sr_5_1_f", actor: "operator:maria" }]);
    // lee's form token is lee's: maria's does not carry over to lee's session, nor back.
    const leePage = await (await get("/releases/r4/abort", LEE)).text();
    expect(
      (await post("/releases/r4/abort", { csrf: csrfOf(page), confirm: "yes" }, LEE)).status,
    ).toBe(403);
    const aborted = await post(
      "/releases/r4/abort",
      { csrf: csrfOf(leePage), confirm: "yes", reason: "p99 doubled" },
      LEE,
    );
    expect(aborted.status).toBe(200);
    expect(api.calls.at(-1)).toEqual({ method: "abort", target: "r4", actor: "operator:lee" });
    // A person's session is signed with their own token: another engine that knows only the
    // shared tokens (or a changed token for maria) does not take it.
    const cookie = (await signIn(MARIA)).replace(/^baton_session=/, "");
    const at = () => clock.t;
    expect(await new Sessions({ operator: OP, viewer: VIEW }, at).verify(cookie)).toBeNull();
    const changed = [{ name: "maria", token: `${LEE}x` }];
    expect(await new Sessions({ operator: OP, people: changed }, at).verify(cookie)).toBeNull();
    expect(await new Sessions({ operator: OP, people }, at).verify(cookie)).toMatchObject({
      role: "operator",
      person: "maria",
    });
  });

  it("refuses a missing or foreign CSRF token, an unconfirmed form and another site's origin", async () => {
    const { get, post, api } = setup();
    const page = await (await get("/releases/r4/abort", OP)).text();
    const csrf = csrfOf(page);
    expect(csrf).toMatch(/^[0-9]+\.[0-9a-f]{64}$/);
    expect((await post("/releases/r4/abort", { confirm: "yes" }, OP)).status).toBe(403);
    // A token minted for another target does not carry over.
    expect((await post("/releases/r5/abort", { csrf, confirm: "yes" }, OP)).status).toBe(403);
    expect((await post("/releases/r4/abort", { csrf }, OP)).status).toBe(400);
    const foreign = await post("/releases/r4/abort", { csrf, confirm: "yes" }, OP, {
      origin: "https://evil.example",
    });
    expect(foreign.status).toBe(403);
    expect(await foreign.text()).toContain("posted from another site");
    expect(api.calls).toEqual([]);
    const ok = await post(
      "/releases/r4/abort",
      { csrf, confirm: "yes", reason: "bad canary" },
      OP,
      { origin: BASE },
    );
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain("st-compensating");
  });

  it("abort asks for the operator's reason: the field starts empty and required, an empty one is sent nowhere", async () => {
    const { get, post, api } = setup();
    const page = await (await get("/releases/r4/abort", OP)).text();
    const input = /<input[^>]*name="reason"[^>]*>/.exec(page)?.[0] ?? "";
    expect(input).toContain("required");
    // No reason invented for the operator: no pre-filled value.
    expect(input).not.toMatch(/value=/);
    expect(page).not.toContain("aborted from the dashboard");
    const csrf = csrfOf(page);
    for (const reason of [undefined, "", "   "]) {
      const res = await post(
        "/releases/r4/abort",
        reason === undefined ? { csrf, confirm: "yes" } : { csrf, confirm: "yes", reason },
        OP,
      );
      expect(res.status).toBe(422);
      const html = await res.text();
      expect(html).toContain("abort of r4 not sent: the reason is empty");
      expect(html).toContain('href="/releases/r4/abort"');
    }
    // Nothing reached the engine; the release is as it was.
    expect(api.calls).toEqual([]);
    expect((await api.get("r4")).release.state).toBe("running");
  });

  it("shows the engine's refusal with its status", async () => {
    const { get, post, csrfFor } = setup();
    // The confirmation page offers no form for it (409); a form posted anyway (a page opened
    // before the release ended) gets the engine's refusal.
    expect((await get("/releases/r3/abort", OP)).status).toBe(409);
    const csrf = await csrfFor(OP, "abort", "r3");
    const res = await post("/releases/r3/abort", { csrf, confirm: "yes" }, OP);
    expect(res.status).toBe(409);
    expect(await res.text()).toContain("a finished release cannot be aborted");
  });

  it("with no tokens configured, reads are open and every action is refused", async () => {
    const { get, post, api } = setup({ tokens: {} });
    expect((await get("/releases/r3", null)).status).toBe(200);
    const res = await post("/releases/r4/abort", { confirm: "yes" }, null);
    expect(res.status).toBe(403);
    expect(await res.text()).toContain("none is configured; set BATON_OPERATOR_TOKEN");
    expect(api.calls).toEqual([]);
  });
});

describe("sessions", () => {
  it("the cookie holds a signed session, never the token: HttpOnly, SameSite=Strict, 8 h, Secure behind https", async () => {
    const { app } = setup({ publicUrl: "https://baton.example.org" });
    const res = await app.request("https://baton.example.org/login", {
      method: "POST",
      body: new URLSearchParams({ token: OP, next: "/releases" }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(res.status).toBe(303);
    const set = res.headers.get("set-cookie") ?? "";
    expect(set).toMatch(/^baton_session=/);
    expect(set).toMatch(/HttpOnly/);
    expect(set).toMatch(/SameSite=Strict/);
    expect(set).toMatch(/Secure/);
    expect(set).toMatch(/Max-Age=28800/);
    const value = /^baton_session=([^;]+)/.exec(set)?.[1] ?? "";
    expect(value).not.toContain(OP);
    expect(Buffer.from(value.split(".")[1] ?? "", "base64url").toString()).not.toContain(OP);
    // The raw token as a cookie is no longer a way in.
    const raw = await app.request("https://baton.example.org/releases", {
      headers: { cookie: `baton_session=${OP}; baton_token=${OP}` },
    });
    expect(raw.status).toBe(303);
  });

  it("two sign-ins are two sessions; signing out ends the session for the cookie's every copy", async () => {
    const { app, signIn } = setup();
    const a = await signIn(OP);
    const b = await signIn(OP);
    expect(a).not.toBe(b);
    const page = (cookie: string, path = "/releases") =>
      app.request(`${BASE}${path}`, { headers: { cookie } });
    expect((await page(a)).status).toBe(200);
    const out = await app.request(`${BASE}/logout`, { method: "POST", headers: { cookie: a } });
    expect(out.status).toBe(303);
    expect(out.headers.get("set-cookie")).toMatch(/baton_session=;.*Max-Age=0/);
    // A copy of the old cookie (replayed, stolen) is refused after sign-out ...
    const replay = await page(a);
    expect(replay.status).toBe(303);
    expect(replay.headers.get("location")).toMatch(/^\/login/);
    // ... and the other session is unaffected.
    expect((await page(b)).status).toBe(200);
  });

  it("a session and its CSRF tokens expire after 8 hours", async () => {
    const { app, signIn, clock, api } = setup();
    const cookie = await signIn(OP);
    const form = await (
      await app.request(`${BASE}/releases/r4/abort`, { headers: { cookie } })
    ).text();
    const csrf = csrfOf(form);
    clock.t += 8 * 3600 * 1000 + 1000;
    expect((await app.request(`${BASE}/releases`, { headers: { cookie } })).status).toBe(303);
    const late = await app.request(`${BASE}/releases/r4/abort`, {
      method: "POST",
      body: new URLSearchParams({ csrf, confirm: "yes" }),
      headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    });
    expect(late.status).toBe(403);
    expect(api.calls).toEqual([]);
  });

  it("a CSRF token is bound to its session: another session of the same token cannot use it", async () => {
    const { app, signIn, api } = setup();
    const a = await signIn(OP);
    const b = await signIn(OP);
    const csrf = csrfOf(
      await (await app.request(`${BASE}/releases/r4/abort`, { headers: { cookie: a } })).text(),
    );
    const res = await app.request(`${BASE}/releases/r4/abort`, {
      method: "POST",
      body: new URLSearchParams({ csrf, confirm: "yes" }),
      headers: { "content-type": "application/x-www-form-urlencoded", cookie: b },
    });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain("CSRF token is missing or stale");
    expect(api.calls).toEqual([]);
  });

  it("a changed operator token ends the sessions signed under the old one", async () => {
    const first = setup();
    const cookie = await first.signIn(OP);
    const rotated = setup({ tokens: { operator: "op-rotated-token", viewer: VIEW } });
    const res = await rotated.app.request(`${BASE}/releases`, { headers: { cookie } });
    expect(res.status).toBe(303);
  });

  it("a bearer caller's CSRF token lasts an hour", async () => {
    const { app, clock, api } = setup();
    const auth = { authorization: `Bearer ${OP}` };
    const csrf = csrfOf(
      await (await app.request(`${BASE}/releases/r4/abort`, { headers: auth })).text(),
    );
    clock.t += 3600 * 1000 + 1000;
    const res = await app.request(`${BASE}/releases/r4/abort`, {
      method: "POST",
      body: new URLSearchParams({ csrf, confirm: "yes" }),
      headers: { "content-type": "application/x-www-form-urlencoded", ...auth },
    });
    expect(res.status).toBe(403);
    expect(api.calls).toEqual([]);
  });
});

describe("refusal reasons", () => {
  const base = {
    release_id: "r1",
    at: 0,
    kind: "callback",
    step_run_id: "sr_1_1_f",
    outcome: "refused" as const,
  };
  it("reads data.reason first, then a word of the engine's message", () => {
    expect(reasonOf({ ...base, message: "x", data: { reason: "bad signature" } })).toBe(
      "bad signature",
    );
    expect(
      reasonOf({
        ...base,
        message: "[engine] callback for sr_1_1_f attempt 1 is late: the step run is unknown",
        data: {},
      }),
    ).toBe("late");
    expect(
      reasonOf({
        ...base,
        message: "[engine] step run sr_1_1_f is fenced: attempt 1 < 2",
        data: {},
      }),
    ).toBe("fenced");
    expect(
      reasonOf({
        ...base,
        message: "[engine] deadline for sr_1_1_b ignored: release r1 is rolled_back",
        data: {},
      }),
    ).toBe("ignored");
    expect(reasonOf({ ...base, message: "something else", data: null })).toBe("refused");
  });
});

describe("retry is offered only where the release waits", () => {
  it("hides retry on a failed step run of a finished release and shows it on a paused one", async () => {
    const { get } = setup();
    expect(await (await get("/step-runs/sr_3_2_f")).text()).not.toContain(
      "/step-runs/sr_3_2_f/retry",
    );
    expect(await (await get("/step-runs/sr_5_1_f")).text()).toContain(
      'href="/step-runs/sr_5_1_f/retry"',
    );
  });
});
