/**
 * Drill records and the drill policy, both stores (docs/recovery-actions.md "Drills"): a drill
 * is recorded per model and listed newest first; a recipe whose `policy.drill_max_age_days`
 * the model's last passed drill does not meet is refused at start with `drill_stale: refuse`
 * (409 naming the policy and how to fix it, nothing started), and starts with a warning in its
 * history with `drill_stale: warn`; a fresh passed drill lets it start without one; a failed
 * drill does not count. Bad drill bodies are 400s naming the field.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import {
  createRelease,
  type Harness,
  makeHarness,
  op,
  recipe,
  STORE_KINDS,
  skipStore,
} from "./service-harness.ts";

const DAY = 86_400_000;
const DRILL = {
  drill: "d1",
  passed: true,
  rto_ms: 1830,
  rpo_ms: 3156,
  rows_lost: 151,
  restored: true,
  verified: true,
  actor: "dana",
};

function withPolicy(stale: "warn" | "refuse"): RecipeInput {
  const r = recipe();
  return { ...r, policy: { ...(r.policy ?? {}), drill_max_age_days: 7, drill_stale: stale } };
}

describe.each(STORE_KINDS)("drill policy on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it.skipIf(skip)(
    "with drill_stale refuse, a model without a recent passed drill cannot start a release; a fresh passed drill lets it start",
    async () => {
      h = await makeHarness({ kind });
      const model = String(recipe().model);
      // No drill yet: refused, naming the policy and the fix; nothing started.
      const refused = await op(h, "POST", "/v1/releases", withPolicy("refuse"));
      expect(refused.status).toBe(409);
      const text = await refused.text();
      expect(text).toContain("drill_required");
      expect(text).toContain("has no passed drill");
      expect(text).toContain("policy.drill_max_age_days");
      // The fix names the engine's own rehearsal first.
      expect(text).toContain(`baton drill ${model} --rehearse --reason`);
      expect(
        ((await (await op(h, "GET", "/v1/releases")).json()) as { releases: unknown[] }).releases,
      ).toHaveLength(0);

      // A failed drill does not count.
      const failed = await op(h, "POST", `/v1/models/${model}/drills`, {
        ...DRILL,
        drill: "d0",
        passed: false,
      });
      expect(failed.status).toBe(201);
      expect((await op(h, "POST", "/v1/releases", withPolicy("refuse"))).status).toBe(409);

      // A passed drill: recorded with who and when, listed newest first; the start goes ahead.
      const ok = await op(h, "POST", `/v1/models/${model}/drills`, DRILL);
      expect(ok.status).toBe(201);
      expect(((await ok.json()) as { drill: { by: string; at: number } }).drill).toMatchObject({
        by: "operator:dana",
        at: h.clock.now(),
      });
      const list = (await (await op(h, "GET", `/v1/models/${model}/drills`)).json()) as {
        drills: { drill: string }[];
      };
      expect(list.drills.map((d) => d.drill)).toEqual(["d1", "d0"]);
      const started = await op(h, "POST", "/v1/releases", withPolicy("refuse"));
      expect(started.status, await started.clone().text()).toBe(201);
      const id = ((await started.json()) as { id: string }).id;
      const hist = (await (await op(h, "GET", `/v1/releases/${id}/history`)).json()) as {
        entries: { kind: string }[];
      };
      expect(hist.entries.length).toBeGreaterThan(0);
      expect(hist.entries.some((e) => e.kind === "drill_warning")).toBe(false);
    },
  );

  it.skipIf(skip)(
    "with drill_stale warn, a release of a model whose last passed drill is too old starts and its history says so",
    async () => {
      h = await makeHarness({ kind });
      const model = String(recipe().model);
      expect((await op(h, "POST", `/v1/models/${model}/drills`, DRILL)).status).toBe(201);
      // Eight days later the drill is stale: warn starts the release and says so.
      h.clock.advance(8 * DAY);
      const warned = await op(h, "POST", "/v1/releases", withPolicy("warn"));
      expect(warned.status, await warned.clone().text()).toBe(201);
      const wid = ((await warned.json()) as { id: string }).id;
      const wh = (await (await op(h, "GET", `/v1/releases/${wid}/history`)).json()) as {
        entries: { kind: string; message: string }[];
      };
      const warning = wh.entries.find((e) => e.kind === "drill_warning");
      expect(warning?.message).toContain("its last passed drill (d1) is 8 days old");
    },
  );

  it.skipIf(skip)("bad drill bodies are refused naming the field", async () => {
    h = await makeHarness({ kind });
    const bad = await op(h, "POST", "/v1/models/summarizer-v7/drills", { ...DRILL, passed: "yes" });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("passed");
    const neg = await op(h, "POST", "/v1/models/summarizer-v7/drills", { ...DRILL, rto_ms: -1 });
    expect(neg.status).toBe(400);
    expect(await neg.text()).toContain("rto_ms");
    const nul = await op(h, "POST", "/v1/models/summarizer-v7/drills", {
      ...DRILL,
      reason: "quarterly\u0000rehearsal",
    });
    expect(nul.status).toBe(400);
    expect(await nul.text()).toContain("reason");
  });

  it.skipIf(skip)(
    "a posted drill id starting rh (the engine's rehearsals) is refused naming the field and the fix",
    async () => {
      h = await makeHarness({ kind });
      const url = "/v1/models/summarizer-v7/drills";
      for (const drill of ["rh1796634000000", "RH-manual", "rh"]) {
        const r = await op(h, "POST", url, { ...DRILL, drill });
        const text = await r.text();
        expect(r.status, text).toBe(400);
        const p = (
          JSON.parse(text) as {
            error: { problems: { path: string; message: string; fix: string }[] };
          }
        ).error.problems.find((x) => x.path === "body.drill");
        expect(p?.message, text).toMatch(
          /starts with "rh", which names the engine's own rehearsals/,
        );
        expect(p?.fix, text).toMatch(/give the drill an id of its own such as d\d+/);
      }
      // Nothing was recorded; an id with rh later in it is the operator's own.
      const ok = await op(h, "POST", url, { ...DRILL, drill: "drh-1" });
      expect(ok.status, await ok.text()).toBe(201);
      const list = (await (await op(h, "GET", url)).json()) as { drills: { drill: string }[] };
      expect(list.drills.map((d) => d.drill)).toEqual(["drh-1"]);
    },
  );

  it.skipIf(skip)(
    "a passed drill whose results contradict it is refused naming the field and the fix",
    async () => {
      h = await makeHarness({ kind });
      const url = "/v1/models/summarizer-v7/drills";
      const refused = async (body: Record<string, unknown>, field: string, says: string) => {
        const r = await op(h as Harness, "POST", url, { ...DRILL, ...body });
        const text = await r.text();
        expect(r.status, text).toBe(400);
        const { problems } = (
          JSON.parse(text) as {
            error: { problems: { path: string; message: string; fix: string }[] };
          }
        ).error;
        const p = problems.find((x) => x.path === `body.${field}`);
        expect(p, text).toBeDefined();
        expect(p?.message).toContain(says);
        expect(p?.fix).toBeTruthy();
      };
      await refused({ restored: false }, "restored", "but passed is true");
      await refused({ verified: false }, "verified", "but passed is true");
      await refused({ problems: ["x"] }, "problems", "but passed is true");
      await refused({ rows_lost: 100, rpo_ms: 0 }, "rpo_ms", "rpo_ms must be more than 0");
      await refused({ rto_ms: null }, "rto_ms", "is null, but a passed drill measured it");
      await refused({ release: "zzz" }, "release", "r<number>");
      await refused({ release: "r999" }, "release", "does not exist");
      await refused({ model: "ranker" }, "model", "not summarizer-v7");
      await refused({ rows_lost: 2 ** 53 + 2 }, "rows_lost", "a number too large");
      // A failed drill may say what went wrong and leave a measure out.
      const failed = await op(h, "POST", url, {
        ...DRILL,
        drill: "d-failed",
        passed: false,
        restored: false,
        rto_ms: null,
        problems: ["the restore did not run"],
      });
      expect(failed.status, await failed.text()).toBe(201);
      // Its own model, named in the body, is accepted.
      const own = await op(h, "POST", url, { ...DRILL, model: "summarizer-v7" });
      expect(own.status, await own.text()).toBe(201);
      expect(
        ((await (await op(h, "GET", url)).json()) as { drills: { drill: string }[] }).drills.map(
          (d) => d.drill,
        ),
      ).toEqual(expect.arrayContaining(["d1", "d-failed"]));
    },
  );

  it.skipIf(skip)(
    "a drill of a release of another model is refused; the same drill again says it is recorded already",
    async () => {
      h = await makeHarness({ kind });
      const model = String(recipe().model);
      const url = `/v1/models/${model}/drills`;
      const id = await createRelease(h);
      const ok = await op(h, "POST", url, { ...DRILL, release: id, reason: "first" });
      expect(ok.status, await ok.text()).toBe(201);
      const other = await op(h, "POST", "/v1/models/ranker/drills", { ...DRILL, release: id });
      expect(other.status).toBe(400);
      const text = await other.text();
      expect(text).toContain("body.release");
      expect(text).toContain(`a release of ${model}, not a release of ranker`);
      const again = await op(h, "POST", url, { ...DRILL, release: id, reason: "second" });
      expect(again.status).toBe(201);
      const body = (await again.json()) as {
        drill: { reason: string };
        already_recorded?: boolean;
      };
      expect(body).toMatchObject({ already_recorded: true, drill: { reason: "first" } });
    },
  );

  it.skipIf(skip)(
    "a drill's age counts from when it ran: an old drill recorded today does not satisfy the policy; the same drill again is the stored one, its id with other results 409, a time later than now 400",
    async () => {
      h = await makeHarness({ kind });
      const model = String(recipe().model);
      const url = `/v1/models/${model}/drills`;
      const old = { ...DRILL, drill: "d-sept", at: h.clock.now() - 90 * DAY };
      const first = await op(h, "POST", url, old);
      expect(first.status).toBe(201);
      const stored = ((await first.json()) as { drill: { at: number; recorded_at: number } }).drill;
      expect(stored).toMatchObject({ at: old.at, recorded_at: h.clock.now() });
      // 90 days old under a 7-day refuse policy: refused, naming its age.
      const refused = await op(h, "POST", "/v1/releases", withPolicy("refuse"));
      expect(refused.status).toBe(409);
      expect(await refused.text()).toContain("(d-sept) is 90 days old");
      // Sent again (a retried request): the stored record, one drill listed.
      const again = await op(h, "POST", url, old);
      expect(again.status).toBe(201);
      expect(((await again.json()) as { drill: unknown }).drill).toEqual(stored);
      // The same id with other results: refused, naming the drill and the fix.
      const other = await op(h, "POST", url, { ...old, rows_lost: 7 });
      expect(other.status).toBe(409);
      expect(await other.text()).toContain(
        "drill d-sept of model summarizer-v7 is recorded already",
      );
      // A time later than the engine's clock: refused naming `at`.
      const later = await op(h, "POST", url, {
        ...DRILL,
        drill: "d-future",
        at: h.clock.now() + DAY,
      });
      expect(later.status).toBe(400);
      expect(await later.text()).toContain("body.at");
      const list = (await (await op(h, "GET", url)).json()) as { drills: { drill: string }[] };
      expect(list.drills.map((d) => d.drill)).toEqual(["d-sept"]);
      // A drill that ran today is newer than the old one, whatever the order of recording.
      expect((await op(h, "POST", url, { ...DRILL, drill: "d-now" })).status).toBe(201);
      expect((await op(h, "POST", "/v1/releases", withPolicy("refuse"))).status).toBe(201);
    },
  );
});
