/**
 * Dashboard pages for the lifecycle verbs and the drift banner: rollback of a
 * succeeded release has a confirmation page (lane by lane, which image goes back) and a CSRF
 * form that starts the new release; roll forward explains the CLI command (the dashboard cannot
 * take a recipe); both are offered only where `lifecycleActions` offers them, and refused (409,
 * no form) elsewhere. A release whose history holds a current drift shows a banner naming
 * desired vs observed.
 */
import { describe, expect, it } from "vitest";
import { oldEnvironment } from "../../engine/src/domain/blue-green.ts";
import { supersededWords } from "../../engine/src/domain/lifecycle-states.ts";
import { rollbackWindowClosed } from "../../engine/src/domain/rollback-window.ts";
import type { HistoryEntry } from "../../engine/src/domain/types.ts";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import type { ReleaseRecord } from "../../engine/src/service/api.ts";
import { DRIFT_CLEARED_KIND, DRIFT_KIND, type ModelDrift } from "../../engine/src/service/drift.ts";
import { defaultRecords, fakeApi, succeededRecord } from "../support/dashboard-fixtures.ts";

const OP = "op-secret-token";
const VIEW = "view-secret-token";
const BASE = "http://127.0.0.1:8787";

const NOW = Date.UTC(2026, 10, 29, 12, 0, 0);

function setup(records: ReleaseRecord[] = defaultRecords()) {
  const api = fakeApi(records);
  const app = dashboardApp({
    api,
    tokens: { operator: OP, viewer: VIEW },
    publicUrl: BASE,
    now: () => NOW,
  });
  const cookies = new Map<string, string>();
  const cookieOf = async (token: string) => {
    const had = cookies.get(token);
    if (had) return had;
    const res = await app.request(`${BASE}/login`, {
      method: "POST",
      body: new URLSearchParams({ token, next: "/releases" }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    const cookie = /^(baton_session=[^;]+)/.exec(res.headers.get("set-cookie") ?? "")?.[1];
    if (!cookie) throw new Error(`sign-in with ${token} set no session cookie`);
    cookies.set(token, cookie);
    return cookie;
  };
  const get = async (path: string, token = OP) => {
    const res = await app.request(`${BASE}${path}`, {
      headers: { cookie: await cookieOf(token) },
    });
    return { status: res.status, html: await res.text() };
  };
  const post = async (path: string, form: Record<string, string>, token = OP) => {
    const res = await app.request(`${BASE}${path}`, {
      method: "POST",
      body: new URLSearchParams(form),
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        cookie: await cookieOf(token),
      },
    });
    return { status: res.status, html: await res.text() };
  };
  return { api, get, post };
}

const csrfOf = (html: string) => /name="csrf" value="([0-9a-f.]*)"/.exec(html)?.[1] ?? "";
const text = (html: string) =>
  html
    .replace(/<[^>]+>/g, " ")
    .replace(/\s+/g, " ")
    .replaceAll("&#39;", "'")
    .replaceAll("&quot;", '"')
    .replaceAll("&lt;", "<")
    .replaceAll("&gt;", ">");

describe("rollback from the dashboard", () => {
  it("a succeeded release offers rollback; the page names the image going back on each lane", async () => {
    const { get } = setup();
    const page = await get("/releases/r2");
    expect(page.status).toBe(200);
    expect(page.html).toContain('href="/releases/r2/rollback"');
    expect(page.html).not.toContain('href="/releases/r2/roll-forward"');
    const r2 = defaultRecords()[0]!.release;
    const confirm = await get("/releases/r2/rollback");
    expect(confirm.status).toBe(200);
    const t = text(confirm.html);
    expect(t).toContain("Roll back release r2?");
    for (const lane of r2.manifest.lanes) {
      expect(t).toContain(
        `${lane.id} runs ${r2.manifest.image} now → runs ${r2.manifest.previous_image} again`,
      );
    }
    expect(csrfOf(confirm.html)).not.toBe("");
    expect(confirm.html).toContain('action="/releases/r2/rollback"');
  });

  it("confirming with the CSRF token starts the new release; without it nothing is asked of the engine", async () => {
    const { api, get, post } = setup();
    const csrf = csrfOf((await get("/releases/r2/rollback")).html);
    const stale = await post("/releases/r2/rollback", { csrf: "1.00", confirm: "yes" });
    expect(stale.status).toBe(403);
    const viewer = await post("/releases/r2/rollback", { csrf, confirm: "yes" }, VIEW);
    expect(viewer.status).toBe(403);
    expect(api.calls).toEqual([]);
    const done = await post("/releases/r2/rollback", { csrf, confirm: "yes", reason: "bad p99" });
    expect(done.status).toBe(200);
    expect(api.calls).toEqual([
      { method: "rollback", target: "r2", actor: "dashboard (operator token)" },
    ]);
    const t = text(done.html);
    expect(t).toContain("rollback of r2 accepted: release r6 runs the previous admitted manifest");
    expect(done.html).toContain('href="/releases/r6"');
    // The engine holds the new release; r2 itself is unchanged.
    expect((await api.get("r6")).release.state).toBe("pending");
    expect((await api.get("r2")).release.state).toBe("succeeded");
  });

  it("a succeeded release a later one replaced on the lanes: the rollback page says why, in the API's words", async () => {
    const { api, get } = setup();
    api.lifecycleLookups = async () => ({
      rollbackTo: "r1",
      supersededBy: "r3",
      supersededState: "succeeded",
    });
    expect((await get("/releases/r2")).html).not.toContain('href="/releases/r2/rollback"');
    const confirm = await get("/releases/r2/rollback");
    expect(confirm.status).toBe(409);
    expect(confirm.html).not.toContain('name="csrf"');
    const why = text(confirm.html);
    expect(why).not.toContain("(it is succeeded)");
    // One wording (lifecycleBlocked): the API's 409 superseded says the same.
    expect(why).toContain(
      `The engine does not accept rollback for r2 now: ${supersededWords({ id: "r2", state: "succeeded", model: (await api.get("r2")).release.manifest.model }, "r3", "succeeded")}`,
    );
    expect(why).toMatch(
      /r3 \(succeeded\) of model \S+ came after it and now defines the lanes; roll back r3 instead/,
    );
    expect(api.calls).toEqual([]);
  });

  it("a succeeded release with nothing to roll back to (no earlier release kept its recipe) is not offered rollback", async () => {
    const { api, get } = setup();
    const asked: string[] = [];
    api.previousAdmitted = async (release) => {
      asked.push(release.id);
      return null;
    };
    const page = await get("/releases/r2");
    expect(page.status).toBe(200);
    expect(page.html).not.toContain('href="/releases/r2/rollback"');
    const confirm = await get("/releases/r2/rollback");
    expect(confirm.status).toBe(409);
    expect(confirm.html).not.toContain('name="csrf"');
    // The reason is the API's (422 no_previous_manifest), not the release's state.
    const why = text(confirm.html);
    expect(why).not.toContain("(it is succeeded)");
    expect(why).toMatch(
      /The engine does not accept rollback for r2 now: there is no earlier admitted manifest of model \S+ to roll r2 back to; roll forward with a new recipe instead/,
    );
    expect(asked).toContain("r2");
    // With a manifest to run again, the offer names the release it comes from.
    api.previousAdmitted = async () => ({ prev: { id: "r1" } });
    expect((await get("/releases/r2")).html).toContain('href="/releases/r2/rollback"');
    expect(text((await get("/releases/r2")).html)).toContain("(r1's)");
    expect(api.calls).toEqual([]);
  });

  it("rollback is refused (409, no form) on a release that is not succeeded", async () => {
    const { api, get } = setup();
    for (const id of ["r3", "r4", "r5"]) {
      expect((await get(`/releases/${id}`)).html).not.toContain(`/releases/${id}/rollback"`);
      const page = await get(`/releases/${id}/rollback`);
      expect(page.status).toBe(409);
      expect(page.html).not.toContain('name="csrf"');
      expect(text(page.html)).toContain(`The engine does not accept rollback for ${id} now`);
    }
    expect(api.calls).toEqual([]);
  });
});

describe("roll forward from the dashboard", () => {
  it("a rolled-back release offers roll forward with the CLI command, and no form", async () => {
    const { get } = setup();
    expect((await get("/releases/r3")).html).toContain('href="/releases/r3/roll-forward"');
    const page = await get("/releases/r3/roll-forward");
    expect(page.status).toBe(200);
    const t = text(page.html);
    expect(t).toContain("Roll forward past release r3?");
    expect(t).toContain("baton roll-forward r3 <fixed-recipe.yaml> --bundle <bundle.json>");
    expect(page.html).not.toContain('name="csrf"');
    expect(page.html).not.toContain('action="/releases/r3/');
  });

  it("roll forward is refused (409) on a succeeded or running release, naming what it accepts", async () => {
    const { get } = setup();
    const succeeded = await get("/releases/r2/roll-forward");
    expect(succeeded.status).toBe(409);
    expect(text(succeeded.html)).toContain("The engine does not accept roll-forward for r2 now");
    expect(succeeded.html).toContain('href="/releases/r2/rollback"');
    const running = await get("/releases/r4/roll-forward");
    expect(running.status).toBe(409);
    expect(running.html).not.toContain("baton roll-forward");
  });
});

describe("drift banner", () => {
  const drift: ModelDrift = {
    model: "chat-model",
    lanes: [
      {
        id: "lane-2",
        fields: ["weight", "image"],
        desired: { weight: 100, image: "ghcr.io/acme/chat@sha256:aaa" },
        observed: { weight: 0, image: "ghcr.io/acme/chat@sha256:bbb" },
      },
    ],
    mixed: true,
    images: [
      { ref: "ghcr.io/acme/chat@sha256:aaa", lanes: ["lane-1"], weight: 100 },
      { ref: "ghcr.io/acme/chat@sha256:bbb", lanes: ["lane-2"], weight: 0 },
    ],
    observed_at: Date.UTC(2026, 10, 29, 11, 0, 0),
  };
  const withHistory = (...extra: Omit<HistoryEntry, "release_id">[]) => {
    const records = defaultRecords();
    const r2 = records[0]!;
    r2.history.push(...extra.map((e) => ({ ...e, release_id: "r2" })));
    return records;
  };
  const driftEntry = (at: number): Omit<HistoryEntry, "release_id"> => ({
    at,
    kind: DRIFT_KIND,
    step_run_id: null,
    outcome: "accepted",
    message: "[drift] model chat-model: lane-2 weight desired 100 observed 0",
    data: drift as unknown as HistoryEntry["data"],
  });

  it("a current drift shows a banner naming desired vs observed per lane and field", async () => {
    const { get } = setup(withHistory(driftEntry(drift.observed_at)));
    const page = await get("/releases/r2", VIEW);
    expect(page.status).toBe(200);
    expect(page.html).toContain('id="drift"');
    const t = text(page.html);
    expect(t).toContain("Drift: model chat-model's lanes differ");
    expect(t).toContain("lane-2 weight 100 0");
    expect(t).toContain(
      'lane-2 image "ghcr.io/acme/chat@sha256:aaa" "ghcr.io/acme/chat@sha256:bbb"',
    );
    expect(t).toContain("Mixed versions outside a release: ghcr.io/acme/chat@sha256:aaa on lane-1");
  });

  it("no banner without drift, or once the drift is cleared", async () => {
    const plain = await setup().get("/releases/r2", VIEW);
    expect(plain.html).not.toContain('id="drift"');
    const cleared = await setup(
      withHistory(driftEntry(drift.observed_at), {
        ...driftEntry(drift.observed_at + 60_000),
        kind: DRIFT_CLEARED_KIND,
        data: {},
      }),
    ).get("/releases/r2", VIEW);
    expect(cleared.status).toBe(200);
    expect(cleared.html).not.toContain('id="drift"');
  });
});

const HOUR = 3_600_000;

/**
 * r2 as a succeeded blue-green release: lane-1 green (its one wave), lane-2 blue (in no wave),
 * a two-hour rollback window, succeeded `agoMs` before NOW; the fake engine's lookups are the
 * engine's (its clock at NOW): the old environment and, once the window closed, why.
 */
function blueGreen(agoMs: number) {
  const rec = succeededRecord();
  const m = rec.release.manifest;
  m.strategy = "blue_green";
  m.waves = [{ lanes: ["lane-1"], traffic: 100 }];
  m.rollback_window_ms = 2 * HOUR;
  rec.release.succeeded_at = NOW - agoMs;
  const s = setup([rec, ...defaultRecords().slice(1)]);
  s.api.lifecycleLookups = async (release) => {
    const closed = rollbackWindowClosed(release, NOW);
    return {
      ...(closed ? { rollbackClosed: closed } : {}),
      oldEnvironment: oldEnvironment(release, NOW),
    };
  };
  return { ...s, m };
}

describe("a blue-green release's old environment on the release page", () => {
  it("inside the window: its lanes, warm until when, and the switch back (the rollback offer) with its confirmation", async () => {
    const { api, get, m } = blueGreen(HOUR);
    const page = await get("/releases/r2", VIEW);
    expect(page.status).toBe(200);
    expect(page.html).toContain('id="old-environment"');
    const t = text(page.html);
    expect(t).toContain("Old environment: warm until 2026-11-29 13:00:00Z");
    expect(t).toContain(`lane-2 ${m.previous_image} warm, 0%`);
    expect(t).toContain(
      `old environment (lane-2) warm on ${m.previous_image} until 2026-11-29T13:00:00.000Z (weight 0, not stopped)`,
    );
    // The switch back is the rollback offer, labelled so, in the panel and among the actions.
    expect(page.html).toMatch(/<a [^>]*href="\/releases\/r2\/rollback" id="switch-back"/);
    expect(t).toContain("Switch back…");
    expect(t).toContain(
      "the runner's health check of each of its lanes, then one control-plane write moves every request back to it, read back",
    );
    const confirm = await get("/releases/r2/rollback");
    expect(confirm.status).toBe(200);
    const c = text(confirm.html);
    expect(c).toContain(
      `Rolling back r2 is a switch back to r2's old environment (lane-2 on ${m.previous_image}): the runner's health check of each of its lanes, then one control-plane write moves every request back to it, read back; nothing is redeployed, and if a lane fails its check no traffic moves`,
    );
    expect(c).toContain(`lane-2 warm on ${m.previous_image} at 0% now → carries 100% again`);
    expect(c).toContain(
      `lane-1 serves ${m.image} now → carries 0%, still running ${m.image} (warm)`,
    );
    expect(confirm.html).toContain('name="csrf"');
    expect(api.calls).toEqual([]);
  });

  it("once the window closed: retired since when, no switch back offered (the page, the actions, the confirmation), and why", async () => {
    const { api, get } = blueGreen(3 * HOUR);
    const page = await get("/releases/r2");
    expect(page.status).toBe(200);
    const t = text(page.html);
    expect(t).toContain("Old environment: retired at 2026-11-29 11:00:00Z");
    expect(t).toContain("lane-2");
    expect(t).toContain("retired");
    expect(page.html).not.toContain('href="/releases/r2/rollback"');
    expect(page.html).not.toContain('id="switch-back"');
    expect(t).toContain(
      "rollback of r2 is closed: its rollback window (2h, policy.rollback_window)",
    );
    const confirm = await get("/releases/r2/rollback");
    expect(confirm.status).toBe(409);
    expect(confirm.html).not.toContain('name="csrf"');
    expect(api.calls).toEqual([]);
  });

  it("a canary release shows no old environment", async () => {
    const page = await setup().get("/releases/r2", VIEW);
    expect(page.html).not.toContain('id="old-environment"');
  });
});
