/**
 * Rollback prerequisites asked by runner probe steps (docs/lifecycle.md "Rollback
 * prerequisites"), through the HTTP API on both stores with simulated runners:
 * - a probe whose callback never arrives ends the rollback `aborted` at its callback deadline,
 *   the lane's `lane_credentials` row "not answered" naming the exit (roll back again), and
 *   nothing was applied on the control plane;
 * - bad probe callbacks are refused with clear errors and change nothing: a forged signature
 *   (401), checks about another lane (422 naming `body.checks[i].lane`), checks that are not an
 *   array or miss a phase (422 naming the field and the fix); a good callback then passes;
 * - the probes run concurrently: with N lanes the dispatcher double receives all N probe
 *   dispatches before any runner answers; one failed probe ends the rollback `aborted` with
 *   nothing written on the control plane, and the other probes' late preflights and callbacks
 *   are refused 409 (never a 500) without changing the evidence;
 * - a restart while the probes are in flight dispatches none of them again, and the rollback's
 *   first control-plane write comes only after the last lane's probe passed.
 */
import { rmSync } from "node:fs";
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

  /** v1 then v2 succeed on `lanes` lanes; v2 is rolled back: the rollback's id, dispatches seen before it. */
  async function startRollback(hh: Harness, lanes = 2): Promise<{ id: string; seen: number }> {
    const v1: RecipeInput = recipe(lanes);
    const v2: RecipeInput = { ...recipe(lanes), image: NEXT, previous_image: IMAGE };
    for (const r of [v1, v2]) {
      const res = await op(hh, "POST", "/v1/releases", r);
      expect(res.status, await res.clone().text()).toBe(201);
      await drive(hh);
    }
    const seen = hh.dispatcher.accepted.length;
    const res = await op(hh, "POST", "/v1/releases/r2/rollback", { reason: "v2 is wrong" });
    expect(res.status, await res.clone().text()).toBe(201);
    return { id: ((await res.json()) as { id: string }).id, seen };
  }

  /** Ticks until the engine performs nothing more (bounded); no runner answers anything. */
  async function settle(hh: Harness): Promise<void> {
    for (let i = 0; i < 50; i++) {
      const t = await hh.engine.tick();
      if (t.performed === 0 && t.failed === 0) return;
    }
    throw new Error("[test] the engine was still busy after 50 ticks");
  }

  /**
   * v2 of a two-lane model is rolled back; every probe dispatch is accepted before any runner
   * answers: returns the rollback's id, its first probe dispatch and all of them.
   */
  async function rolledBack(
    hh: Harness,
    lanes = 2,
  ): Promise<{ id: string; probe: DispatchPayload; probes: DispatchPayload[] }> {
    const { id, seen } = await startRollback(hh, lanes);
    await settle(hh);
    const probes = hh.dispatcher.accepted.slice(seen);
    const probe = probes[0];
    if (!probe) throw new Error("no probe dispatch");
    expect(probe.tool).toBe("inspect-lane");
    return { id, probe, probes };
  }

  const laneOf = (p: DispatchPayload) => (p.args as { lane: { id: string } }).lane.id;

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
      const { id, probes } = await rolledBack(h);
      const writes = h.cp.calls.filter((c) => c.method === "apply").length;
      for (const [i, p] of probes.entries()) await preflight(h, p, `700${i + 1}`);
      // No callback: the clock passes the callback deadline (the recipe's, 30 min at most).
      for (let i = 0; i < 10 && (await getRecord(h, id)).state === "running"; i++) {
        h.clock.t += 31 * 60_000;
        await h.engine.tick();
      }
      const r = (await getRecord(h, id)) as unknown as Rel;
      expect(r.state).toBe("aborted");
      // The probes ran at once: the first deadline to be handled ends the rollback.
      const lost = r.step_runs.find((s) => s.state === "unknown");
      const probe = probes.find((p) => p.step_run_id === lost?.id);
      if (!probe) throw new Error(`[test] no probe ended unknown: ${JSON.stringify(r.step_runs)}`);
      const lane = laneOf(probe);
      expect(r.reason).toContain("rollback prerequisites failed, nothing was applied");
      expect(r.reason).toContain(`lane ${lane} lane_credentials: not answered`);
      expect(r.reason).toContain("baton rollback r2");
      const row = r.prerequisites?.checks.find(
        (c) => c.lane === lane && c.check === "lane_credentials",
      );
      expect(row?.outcome).toBe("fail");
      expect(row?.message).toMatch(/^not answered: no callback/);
      // The other lane's probe was in flight: its answer is no longer awaited; nothing else ran.
      expect(
        r.step_runs.map((s) => [s.step_index, s.state]).sort((a, b) => +a[0]! - +b[0]!),
      ).toEqual(
        probes.map((_, i) => [
          i,
          r.step_runs.find((s) => s.step_index === i)?.id === lost?.id ? "unknown" : "running",
        ]),
      );
      for (const c of r.prerequisites?.checks.filter((x) => x.lane !== null && x.lane !== lane) ??
        []) {
        expect(c.outcome).toBe("skipped");
        expect(c.message).toMatch(/^not awaited: the probe of lane .* failed first/);
      }
      // Nothing applied on the control plane by the rollback.
      expect(h.cp.calls.filter((c) => c.method === "apply").length).toBe(writes);
    },
    60_000,
  );

  it.skipIf(skip)(
    "bad probe callbacks (forged signature, wrong lane, malformed checks) are refused with clear errors; a good one passes",
    async () => {
      h = await makeHarness({ kind, runnerProbe: true });
      const { id, probe, probes } = await rolledBack(h);
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
      // (The other lane's probe, dispatched with it, waits for its runner.)
      expect(r.step_runs.map((s) => [s.id, s.state]).sort()).toEqual(
        probes.map((p) => [p.step_run_id, p === probe ? "running" : "dispatched"]).sort(),
      );
      expect(r.prerequisites?.checks.filter((c) => c.lane === lane).map((c) => c.outcome)).toEqual([
        "skipped",
        "skipped",
        "skipped",
      ]);

      // A good answer passes the lane.
      const good = await signedPost(h, url, callback(probe, "7002", probeChecks(lane)));
      expect(good.status, await good.clone().text()).toBe(200);
      r = (await getRecord(h, id)) as unknown as Rel;
      expect(r.prerequisites?.checks.filter((c) => c.lane === lane).map((c) => c.outcome)).toEqual([
        "pass",
        "pass",
        "pass",
      ]);
      // The other lane's probe (dispatched with it) still waits; nothing of the rollback began.
      const seen = h.dispatcher.accepted.length;
      await settle(h);
      expect(h.dispatcher.accepted.length).toBe(seen);
      r = (await getRecord(h, id)) as unknown as Rel;
      expect(r.state).toBe("running");
      expect(r.step_runs.map((s) => s.step_index).sort()).toEqual([0, 1]);
    },
    60_000,
  );

  /** The runner of probe `p`: preflight as run `run`, then its checks (every phase ok unless `over`). */
  async function answer(hh: Harness, p: DispatchPayload, run: string, over = {}) {
    await preflight(hh, p, run);
    const fails = Object.keys(over).length > 0;
    return signedPost(
      hh,
      callbackUrl(p.step_run_id),
      callback(p, run, probeChecks(laneOf(p), over), fails ? "fail" : "pass"),
    );
  }

  it.skipIf(skip)(
    "every lane's probe is dispatched before any answers; one failed probe aborts with nothing applied, the other probes' late answers are refused cleanly",
    async () => {
      const n = 4;
      h = await makeHarness({ kind, runnerProbe: true, seed: recipe(n) });
      const { id, seen } = await startRollback(h, n);
      const cpWrites = h.cp.calls.filter((c) => c.method === "apply").length;
      const cpChanges = h.cp.history().length;
      const weights = h.cp.weights();
      await settle(h);
      // What the GitHub double received before any runner answered: one probe for every lane.
      const probes = h.dispatcher.accepted.slice(seen);
      expect(probes.map((p) => p.tool)).toEqual(Array(n).fill("inspect-lane"));
      expect(probes.map(laneOf).sort()).toEqual((recipe(n).lanes ?? []).map((l) => l.id).sort());
      expect(new Set(probes.map((p) => p.step_run_id)).size).toBe(n);
      let r = (await getRecord(h, id)) as unknown as Rel;
      expect(r.state).toBe("running");
      expect(
        r.step_runs.map((s) => [s.step_index, s.state]).sort((a, b) => +a[0]! - +b[0]!),
      ).toEqual(probes.map((_, i) => [i, "dispatched"]));

      // Three runners start; the second lane's machine lacks the image: its probe fails.
      const run = (i: number) => `71${i}0`;
      for (const i of [0, 1, 2]) await preflight(h, probes[i]!, run(i));
      const failing = probes[1]!;
      const bad = await signedPost(
        h,
        callbackUrl(failing.step_run_id),
        callback(failing, run(1), probeChecks(laneOf(failing), { image: "missing" }), "fail"),
      );
      expect(bad.status, await bad.clone().text()).toBe(200);
      r = (await getRecord(h, id)) as unknown as Rel;
      expect(r.state).toBe("aborted");
      expect(r.reason).toContain("rollback prerequisites failed, nothing was applied");
      expect(r.reason).toContain(`lane ${laneOf(failing)} image_present: image missing`);
      expect(r.reason).toContain("fix: load the image");
      const evidence = JSON.stringify(r.prerequisites);

      // The others' late answers: refused 409 with a reason, never a 500, nothing changed.
      const late = await signedPost(
        h,
        callbackUrl(probes[0]!.step_run_id),
        callback(probes[0]!, run(0), probeChecks(laneOf(probes[0]!))),
      );
      expect(late.status, await late.clone().text()).toBe(409);
      expect(((await late.json()) as { error: { code: string } }).error.code).toBe("late");
      const lateFail = await signedPost(
        h,
        callbackUrl(probes[2]!.step_run_id),
        callback(probes[2]!, run(2), probeChecks(laneOf(probes[2]!), { capacity: "full" }), "fail"),
      );
      expect(lateFail.status, await lateFail.clone().text()).toBe(409);
      const unbound = await signedPost(
        h,
        preflightUrl(probes[3]!.step_run_id),
        preflightBody(probes[3]!, { run_id: run(3), run_attempt: 1 }),
      );
      expect(unbound.status, await unbound.clone().text()).toBe(409);
      await settle(h);
      r = (await getRecord(h, id)) as unknown as Rel;
      expect(r.state).toBe("aborted");
      expect(JSON.stringify(r.prerequisites)).toBe(evidence);
      for (const p of probes.filter((x) => x !== failing)) {
        for (const c of r.prerequisites?.checks.filter((x) => x.lane === laneOf(p)) ?? []) {
          expect(c.outcome).toBe("skipped");
          expect(c.message).toContain(
            `not awaited: the probe of lane ${laneOf(failing)} failed first`,
          );
        }
      }
      // The probe no runner had started is cancelled; nothing but the probes ever began.
      expect(r.step_runs.find((s) => s.id === probes[3]!.step_run_id)?.state).toBe("failed");
      expect(r.step_runs.every((s) => s.step_index < n)).toBe(true);
      expect(r.step_runs.some((s) => s.id.endsWith("_b"))).toBe(false);
      expect(h.dispatcher.accepted.length).toBe(seen + n);
      // The control plane: no write, no change, the same weights.
      expect(h.cp.calls.filter((c) => c.method === "apply").length).toBe(cpWrites);
      expect(h.cp.history().length).toBe(cpChanges);
      expect(h.cp.weights()).toEqual(weights);
    },
    60_000,
  );

  it.skipIf(skip)(
    "a restart while every probe is in flight dispatches none again; the first write waits for the last lane's probe",
    async () => {
      const n = 3;
      const first = await makeHarness({ kind, runnerProbe: true, seed: recipe(n) });
      h = first;
      const { id, seen } = await startRollback(first, n);
      await settle(first);
      const probes = first.dispatcher.accepted.slice(seen);
      expect(probes.map(laneOf).sort()).toEqual((recipe(n).lanes ?? []).map((l) => l.id).sort());
      const cpWrites = first.cp.calls.filter((c) => c.method === "apply").length;

      // The engine restarts on the same store: the probes' step runs and deadlines are durable.
      await first.close(true);
      h = null;
      const second = await makeHarness({
        kind,
        store: first.store,
        dir: first.dir,
        cp: first.cp,
        clock: first.clock,
        dispatcher: first.dispatcher,
        runnerProbe: true,
      });
      h = second;
      try {
        await settle(second);
        for (const p of probes)
          expect(second.dispatcher.acceptedByKey.get(p.release.operation_key)).toBe(1);
        expect(second.dispatcher.accepted.length).toBe(seen + n);

        // Two lanes pass: the rollback still waits for the third, nothing written.
        for (const [i, p] of probes.slice(0, 2).entries()) {
          const res = await answer(second, p, `720${i}`);
          expect(res.status, await res.clone().text()).toBe(200);
          await settle(second);
        }
        let r = (await getRecord(second, id)) as unknown as Rel;
        expect(r.state).toBe("running");
        expect(r.step_runs.every((s) => s.step_index < n)).toBe(true);
        expect(second.cp.calls.filter((c) => c.method === "apply").length).toBe(cpWrites);

        // The last lane passes: the rollback is admitted and runs to its end.
        const res = await answer(second, probes[2]!, "7202");
        expect(res.status, await res.clone().text()).toBe(200);
        await drive(second);
        r = (await getRecord(second, id)) as unknown as Rel;
        const rec = await getRecord(second, id);
        expect(r.state, r.reason ?? "").toBe("succeeded");
        expect(
          rec.history.some((x) =>
            x.message.includes("rollback prerequisites passed on every lane"),
          ),
        ).toBe(true);
        expect(second.cp.calls.filter((c) => c.method === "apply").length).toBeGreaterThan(
          cpWrites,
        );
        for (const p of probes)
          expect(second.dispatcher.acceptedByKey.get(p.release.operation_key)).toBe(1);
      } finally {
        if (kind === "sqlite") rmSync(first.dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
