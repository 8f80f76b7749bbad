/**
 * Rollback prerequisites asked by runner probe steps (docs/lifecycle.md "Rollback
 * prerequisites"), through the HTTP API on both stores with simulated runners:
 * - a probe whose callback never arrives ends the rollback `aborted` at its callback deadline,
 *   the lane's `lane_credentials` row "not answered" naming the exit (roll back again), and
 *   nothing was applied on the control plane;
 * - bad probe callbacks are refused with clear errors and change nothing: a forged signature
 *   (401), checks about another lane (422 naming `body.checks[i].lane`), checks that are not an
 *   array or miss a phase (422 naming the field and the fix); a good callback then passes.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import { IMAGE } from "../unit/recipe-fixture.ts";
import {
  callbackUrl,
  drive,
  getRecord,
  type Harness,
  makeHarness,
  op,
  preflightBody,
  preflightUrl,
  recipe,
  STORE_KINDS,
  signedPost,
  skipStore,
} from "./service-harness.ts";

const NEXT = `ghcr.io/acme/summarizer@sha256:${"c3".repeat(32)}`;

interface Rel {
  state: string;
  reason: string | null;
  prerequisites: {
    ok: boolean;
    asked_by?: string;
    checks: {
      check: string;
      lane: string | null;
      outcome: string;
      message: string;
      fix: string | null;
    }[];
  } | null;
  step_runs: { id: string; step_index: number; state: string }[];
}

/** The checks.json the `inspect-lane` tool writes for `lane`, every phase ok unless overridden. */
function probeChecks(lane: string, over: Record<string, string> = {}) {
  return ["connect", "access", "image", "capacity"].map((name) => ({
    name,
    lane,
    status: over[name] ?? "ok",
    exit_code: 0,
    message: `${name} ${over[name] ?? "ok"}`,
  }));
}

function callback(
  p: DispatchPayload,
  run: string,
  checks: unknown,
  overall: "pass" | "fail" = "pass",
) {
  return JSON.stringify({
    step_run_id: p.step_run_id,
    run_id: run,
    run_attempt: 1,
    status: overall === "pass" ? "succeeded" : "failed",
    overall,
    checks,
    log: "",
    log_truncated: false,
    timings: {},
  });
}

describe.each(STORE_KINDS)("rollback probe steps on %s", (kind) => {
  const skip = skipStore(kind);
  let h: Harness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  /** v1 then v2 succeed; v2 is rolled back: returns the rollback's id and its first probe dispatch. */
  async function rolledBack(hh: Harness): Promise<{ id: string; probe: DispatchPayload }> {
    const v1: RecipeInput = recipe();
    const v2: RecipeInput = { ...recipe(), image: NEXT, previous_image: IMAGE };
    for (const r of [v1, v2]) {
      const res = await op(hh, "POST", "/v1/releases", r);
      expect(res.status, await res.clone().text()).toBe(201);
      await drive(hh);
    }
    const res = await op(hh, "POST", "/v1/releases/r2/rollback", { reason: "v2 is wrong" });
    expect(res.status, await res.clone().text()).toBe(201);
    const id = ((await res.json()) as { id: string }).id;
    const seen = hh.dispatcher.accepted.length;
    for (let i = 0; i < 20 && hh.dispatcher.accepted.length === seen; i++) await hh.engine.tick();
    const probe = hh.dispatcher.accepted[seen];
    if (!probe) throw new Error("no probe dispatch");
    expect(probe.tool).toBe("inspect-lane");
    return { id, probe };
  }

  async function preflight(hh: Harness, p: DispatchPayload, run: string) {
    const res = await signedPost(
      hh,
      preflightUrl(p.step_run_id),
      preflightBody(p, { run_id: run, run_attempt: 1 }),
    );
    expect(res.status, await res.clone().text()).toBe(200);
  }

  it.skipIf(skip)(
    "a probe whose callback never arrives ends the rollback aborted, not answered, by its deadline",
    async () => {
      h = await makeHarness({ kind, runnerProbe: true });
      const { id, probe } = await rolledBack(h);
      const writes = h.cp.calls.filter((c) => c.method === "apply").length;
      await preflight(h, probe, "7001");
      const lane = (probe.args as { lane: { id: string } }).lane.id;
      // No callback: the clock passes the callback deadline (the recipe's, 30 min at most).
      for (let i = 0; i < 10 && (await getRecord(h, id)).state === "running"; i++) {
        h.clock.t += 31 * 60_000;
        await h.engine.tick();
      }
      const r = (await getRecord(h, id)) as unknown as Rel;
      expect(r.state).toBe("aborted");
      expect(r.reason).toContain("rollback prerequisites failed, nothing was applied");
      expect(r.reason).toContain(`lane ${lane} lane_credentials: not answered`);
      expect(r.reason).toContain("baton rollback r2");
      const row = r.prerequisites?.checks.find(
        (c) => c.lane === lane && c.check === "lane_credentials",
      );
      expect(row?.outcome).toBe("fail");
      expect(row?.message).toMatch(/^not answered: no callback/);
      expect(r.step_runs.map((s) => [s.step_index, s.state])).toEqual([[0, "unknown"]]);
      // Nothing applied on the control plane by the rollback.
      expect(h.cp.calls.filter((c) => c.method === "apply").length).toBe(writes);
    },
    60_000,
  );

  it.skipIf(skip)(
    "bad probe callbacks (forged signature, wrong lane, malformed checks) are refused with clear errors; a good one passes",
    async () => {
      h = await makeHarness({ kind, runnerProbe: true });
      const { id, probe } = await rolledBack(h);
      await preflight(h, probe, "7002");
      const lane = (probe.args as { lane: { id: string } }).lane.id;
      const url = callbackUrl(probe.step_run_id);

      const forged = await signedPost(
        h,
        url,
        callback(probe, "7002", probeChecks(lane)),
        "not-the-secret-0123456789abcdef",
      );
      expect(forged.status).toBe(401);

      const wrongLane = await signedPost(
        h,
        url,
        callback(probe, "7002", probeChecks("lane-other")),
      );
      const wl = (await wrongLane.json()) as {
        error: { code: string; message: string; problems: { path: string; fix: string }[] };
      };
      expect(wrongLane.status, JSON.stringify(wl)).toBe(422);
      expect(wl.error.code).toBe("bad_probe_checks");
      expect(wl.error.problems[0]?.path).toBe("body.checks[0].lane");
      expect(wl.error.message).toContain(`this probe step asks lane ${lane}`);

      const notArray = await signedPost(h, url, callback(probe, "7002", { access: "ok" }));
      const na = (await notArray.json()) as {
        error: { code: string; problems: { path: string; fix: string }[] };
      };
      expect(notArray.status).toBe(422);
      expect(na.error.problems[0]?.path).toBe("body.checks");
      expect(na.error.problems[0]?.fix).toContain("inspect-lane");

      const missing = probeChecks(lane).filter((c) => c.name !== "image");
      const mi = await signedPost(h, url, callback(probe, "7002", missing));
      expect(mi.status).toBe(422);
      expect(((await mi.json()) as { error: { message: string } }).error.message).toContain(
        "no image record",
      );

      // None of them changed anything: the probe still runs, no answer recorded.
      let r = (await getRecord(h, id)) as unknown as Rel;
      expect(r.state).toBe("running");
      expect(r.step_runs.map((s) => s.state)).toEqual(["running"]);
      expect(r.prerequisites?.checks.filter((c) => c.lane === lane).map((c) => c.outcome)).toEqual([
        "skipped",
        "skipped",
        "skipped",
      ]);

      // A good answer passes the lane; the next lane's probe is dispatched.
      const good = await signedPost(h, url, callback(probe, "7002", probeChecks(lane)));
      expect(good.status, await good.clone().text()).toBe(200);
      r = (await getRecord(h, id)) as unknown as Rel;
      expect(r.prerequisites?.checks.filter((c) => c.lane === lane).map((c) => c.outcome)).toEqual([
        "pass",
        "pass",
        "pass",
      ]);
      // The next lane's probe is dispatched; nothing of the rollback itself began yet.
      const seen = h.dispatcher.accepted.length;
      for (let i = 0; i < 20 && h.dispatcher.accepted.length === seen; i++) await h.engine.tick();
      const next = h.dispatcher.accepted[seen];
      expect(next?.tool).toBe("inspect-lane");
      expect((next?.args as { lane?: { id: string } } | undefined)?.lane?.id).not.toBe(lane);
    },
    60_000,
  );
});
