/**
 * Strings Postgres cannot hold (NUL, lone UTF-16 surrogates) in a runner's
 * log and checks, an operator's reason, or a recipe field. The same answer on SQLite and
 * Postgres: a callback is accepted and stored with U+FFFD in their place (deterministic), an
 * operator's reason is refused with a 400 naming it and the position, a recipe field is
 * refused with a 422 naming it. Never a 500, never a stranded release.
 */
import { expect, it } from "vitest";
import {
  callbackBody,
  callbackUrl,
  createRelease,
  getRecord,
  op,
  recipe,
  signedPost,
} from "./service-harness.ts";
import { describeEachStore, preflightOk, startedRelease } from "./store-suites.ts";

const NUL = "\u0000";
const LONE_HIGH = "\ud800";
const LONE_LOW = "\udc00";

describeEachStore("hostile strings on %s", ({ skip, open }) => {
  if (skip) {
    it.skip("Postgres: BATON_TEST_DATABASE_URL is not set", () => {});
    return;
  }

  it("a callback whose log and checks hold NUL and lone surrogates is stored (U+FFFD), the release moves on", async () => {
    const h = await open({ seed: recipe(2) });
    const { id, p } = await startedRelease(h);
    const run = { run_id: "9001", run_attempt: 1 };
    await preflightOk(h, p, run);
    const body = callbackBody(p.step_run_id, run, "pass", {
      log: `banner${NUL}binary ${LONE_HIGH}x${LONE_LOW}\n`,
      checks: [{ name: `h${NUL}${LONE_LOW}`, status: "passed", [`k${NUL}`]: `v${LONE_HIGH}` }],
    });
    const res = await signedPost(h, callbackUrl(p.step_run_id), body);
    expect(res.status, await res.clone().text()).toBe(200);
    const stored = await h.store.getAttemptResult(p.step_run_id, 1);
    expect(stored?.log).toBe("banner\ufffdbinary \ufffdx\ufffd\n");
    expect(stored?.checks).toEqual([
      { name: "h\ufffd\ufffd", status: "passed", "k\ufffd": "v\ufffd" },
    ]);
    // The raw callback is kept byte for byte (escapes are plain ASCII in JSON text).
    expect(stored?.raw_callback).toBe(body);
    const rec = await getRecord(h, id);
    expect(rec.state).toBe("running");
    expect(rec.step_runs.find((s) => s.id === p.step_run_id)?.state).toBe("succeeded");
  });

  it("a recipe field holding NUL or a lone surrogate is a 422 naming the field, on either store", async () => {
    const h = await open({ seed: recipe(2) });
    for (const bad of [`m${NUL}x`, `m${LONE_HIGH}`]) {
      const res = await op(h, "POST", "/v1/releases", { ...recipe(2), name: bad });
      expect(res.status).toBe(422);
      const b = (await res.json()) as { error: { problems: { path: string }[] } };
      expect(b.error.problems.map((x) => x.path)).toContain("name");
    }
    const res = await op(h, "POST", "/v1/releases", { ...recipe(2), model: `m${NUL}` });
    expect(res.status).toBe(422);
    expect(await h.store.listReleases({ limit: 10 })).toEqual([]);
  });

  it("an abort or pause reason with NUL or a lone surrogate is refused (400) naming the field and position, nothing recorded", async () => {
    const h = await open({ seed: recipe(2) });
    const id = await createRelease(h, recipe(2));
    const before = (await getRecord(h, id)).history.length;
    for (const [verb, reason, says] of [
      ["abort", `stop${NUL}now`, "NUL character (U+0000) at position 5"],
      ["abort", `stop now${LONE_LOW}`, "lone UTF-16 surrogate (U+DC00) at position 9"],
      ["pause", `a${LONE_HIGH}b`, "lone UTF-16 surrogate (U+D800) at position 2"],
    ] as const) {
      const res = await op(h, "POST", `/v1/releases/${id}/${verb}`, { reason });
      expect(res.status).toBe(400);
      const text = await res.text();
      expect(text).toContain("reason");
      expect(text).toContain(says);
    }
    const rec = await getRecord(h, id);
    expect(rec.state).not.toBe("aborted");
    expect(JSON.stringify(rec)).not.toContain("\\u0000");
    expect(rec.history.filter((e) => e.outcome !== "refused").length).toBe(before);
  });

  it("a reason with a bidirectional override or an escape sequence is refused naming it, nothing recorded", async () => {
    const h = await open({ seed: recipe(2) });
    const id = await createRelease(h, recipe(2));
    const before = (await getRecord(h, id)).history.length;
    for (const [reason, code] of [
      ["rollback \u202Edecnalab\u202C ok", "U+202E at position 10"],
      ["clear \u001b[2J screen", "U+001B at position 7"],
    ] as const) {
      const res = await op(h, "POST", `/v1/releases/${id}/abort`, { reason });
      expect(res.status).toBe(400);
      const text = await res.text();
      expect(text).toContain("reason");
      expect(text).toContain(code);
    }
    const rec = await getRecord(h, id);
    expect(rec.state).not.toBe("aborted");
    expect(rec.history.filter((e) => e.outcome !== "refused").length).toBe(before);
  });

  it("history data from a refused request with hostile strings is stored", async () => {
    const h = await open({ seed: recipe(2) });
    const { p } = await startedRelease(h);
    await h.engine.service.recordRefused(p.step_run_id, "callback", `bad${NUL}`, {
      reason: `x${NUL}${LONE_HIGH}`,
    });
    const hist = await h.store.getHistory(p.release.id);
    const last = hist.at(-1);
    expect(last?.message).toBe("bad\ufffd");
    expect(last?.data).toEqual({ reason: "x\ufffd\ufffd", requests: 1 });
  });
});
