/**
 * docs/state-machine.md rules 1–7, one named test each, and the failure cases that live at the pure
 * level (F01, F02a, F03, F13, F14, F15, F16; docs/failure-cases.md).
 */
import { describe, expect, it } from "vitest";
import { transition } from "../../engine/src/domain/transition.ts";
import type {
  ControlPlaneEffect,
  Effect,
  Release,
  ReleaseEvent,
} from "../../engine/src/domain/types.ts";
import { f15Specs, OTHER_DIGEST, type StepSpec, waveSpecs } from "../support/manifest-fixture.ts";
import {
  advanceTo,
  callbackOf,
  effectTypes,
  finishCurrent,
  ok,
  preflightOf,
  refused,
  release,
  sr,
  T0,
  verifyPasses,
} from "../support/sim/drive.ts";
import { boundAt0, dispatchedAt0 } from "../support/sim/scenes.ts";

const abortEv: ReleaseEvent = { type: "abort", actor: "ops", reason: "test" };

/** Applies events in order, collecting every effect; refusals are kept as results too. */
function play(r: Release, events: ReleaseEvent[]) {
  const effects: Effect[] = [];
  let cur = r;
  for (const e of events) {
    const res = transition(cur, e, T0);
    if (res.ok) {
      effects.push(...res.effects);
      cur = res.release;
    }
  }
  return { release: cur, effects };
}

describe("rules 1–7 (docs/state-machine.md)", () => {
  it("rule 1: evidence from another generation never satisfies a guard", () => {
    // Abort moves the generation on; the old dispatch's runner (generation 1) is refused
    // even for the step run compensation now wants, and so are other releases and manifests.
    let r = ok(ok(boundAt0(), abortEv).release, callbackOf("sr_17_0_f", "pass")).release;
    expect(r.generation).toBe(2);
    r = ok(r, { type: "dispatch_accepted", step_run_id: "sr_17_0_b", dispatch: 1 }).release;
    for (const wrong of [
      { generation: 1 },
      { release_id: "r18" },
      { manifest_digest: OTHER_DIGEST },
    ]) {
      const res = refused(r, preflightOf(r, "sr_17_0_b", wrong));
      expect([res.status, res.code]).toEqual([409, "stale"]);
    }
    expect(ok(r, preflightOf(r, "sr_17_0_b")).changed).toBe(true);
  });

  it("rule 2: no forward step runs after the release leaves running; late or duplicate callbacks are recorded and change nothing else", () => {
    const r = ok(boundAt0(), abortEv).release;
    const after = play(r, [
      callbackOf("sr_17_0_f", "pass"),
      callbackOf("sr_17_0_f", "pass"),
      preflightOf(r, "sr_17_0_f", { run_attempt: 2 }),
    ]);
    expect(
      after.effects.filter(
        (e) => "step_run_id" in e && e.step_run_id.endsWith("_f") && e.type !== "deadline",
      ),
    ).toEqual([]);
    expect(after.release.step_runs.filter((s) => s.direction === "fwd").map((s) => s.id)).toEqual([
      "sr_17_0_f",
    ]);
    const rolled = finishCurrent(after.release, "pass");
    const late = refused(rolled, callbackOf("sr_17_0_f", "fail", { run_attempt: 2 }));
    expect(late.history[0]).toMatchObject({
      outcome: "refused",
      kind: "callback",
      step_run_id: "sr_17_0_f",
    });
    const dup = ok(rolled, callbackOf("sr_17_0_f", "pass"));
    expect(dup.changed).toBe(false);
    expect(dup.release).toBe(rolled);
    expect(dup.history[0]!.message).toMatch(/^\[engine\] duplicate callback/);
  });

  it("rule 3: compensation runs backward from the high-water mark to 0, only steps that may have taken effect, each its own step run", () => {
    let r = advanceTo(release(waveSpecs(10)), 6);
    r = ok(r, {
      type: "applied",
      step_run_id: "sr_17_6_f",
      outcome: "failed",
      message: "weights differ",
    }).release;
    expect(r.high_water_mark).toBe(6);
    expect(r.cursor).toBe(5); // step 6 is an assertion: skipped at once
    const seen: string[] = [];
    while (r.state === "compensating" && r.cursor >= 0) {
      seen.push(sr(r, r.cursor, "bwd").id);
      r = finishCurrent(r, "pass");
    }
    r = verifyPasses(r);
    expect(seen).toEqual(["sr_17_5_b", "sr_17_4_b", "sr_17_3_b", "sr_17_1_b", "sr_17_0_b"]);
    // Restarting from any stored state never re-enters the forward path: replaying every
    // forward outcome to the rolled-back release creates nothing.
    for (const s of r.step_runs.filter((x) => x.direction === "fwd")) {
      const res = transition(
        r,
        s.kind === "runner"
          ? callbackOf(s.id, "pass")
          : { type: "applied", step_run_id: s.id, outcome: "ok", message: "" },
        T0,
      );
      if (res.ok) expect(res.effects).toEqual([]);
    }
  });

  it("rule 4: traffic is always set to an absolute value with an operation key, and read back", () => {
    const applyTraffic = transition(
      advanceTo(release(waveSpecs(50)), 4),
      { type: "applied", step_run_id: "sr_17_4_f", outcome: "ok", message: "" },
      T0,
    );
    if (!applyTraffic.ok) throw new Error(applyTraffic.reason);
    const e = applyTraffic.effects[0] as ControlPlaneEffect;
    expect(e.request).toEqual({ op: "set_traffic", weights: { l1: 50, l0: 50 }, percent: 50 });
    expect(
      Object.values((e.request as { weights: Record<string, number> }).weights).reduce(
        (a, b) => a + b,
      ),
    ).toBe(100);
    expect(e.operation_key).toBe("r17:5:fwd:traffic=50");
    // The next step reads it back.
    const next = ok(applyTraffic.release, {
      type: "applied",
      step_run_id: "sr_17_5_f",
      outcome: "ok",
      message: "",
    }).effects[0] as ControlPlaneEffect;
    expect(next.request.op).toBe("assert_traffic");
  });

  it("rule 5: a timeout is unknown until observed: never success, never a relative change", () => {
    let r = advanceTo(release(waveSpecs(10)), 5);
    const first = sr(r, 5);
    r = ok(r, {
      type: "applied",
      step_run_id: first.id,
      outcome: "unknown",
      message: "timeout",
    }).release;
    expect(sr(r, 5).state).toBe("unknown");
    expect(r.cursor).toBe(5);
    const again = ok(r, {
      type: "observed",
      step_run_id: first.id,
      matches: false,
      message: "weights differ",
    });
    const e = again.effects[0] as ControlPlaneEffect;
    expect(e.mode).toBe("apply");
    expect(e.operation_key).toBe(first.operation_key);
    expect(e.request).toEqual(
      r.manifest.steps[5]!.forward.kind === "control_plane"
        ? r.manifest.steps[5]!.forward.request
        : null,
    );
    // Runner: a missed callback is unknown and pauses (F04), never success.
    const u = ok(boundAt0(), {
      type: "deadline",
      step_run_id: "sr_17_0_f",
      kind: "callback",
      dispatch: 1,
      attempt: 1,
    }).release;
    expect([sr(u, 0).state, u.state, u.cursor]).toEqual(["unknown", "paused", 0]);
  });

  it("rule 6: callbacks are keyed by (step run, run id, attempt); an older attempt is fenced out", () => {
    const specs: StepSpec[] = [
      { name: "attach_queue_lane", kind: "runner", backward: true, on_failure: "pause" },
    ];
    let r = ok(release(specs), { type: "start" }).release;
    r = ok(r, preflightOf(r, "sr_17_0_f")).release;
    r = ok(r, callbackOf("sr_17_0_f", "fail")).release;
    r = ok(r, preflightOf(r, "sr_17_0_f", { run_attempt: 2 })).release;
    const old = refused(r, callbackOf("sr_17_0_f", "pass", { run_attempt: 1 }));
    expect(old.reason).toBe(
      "[engine] step run sr_17_0_f is fenced: attempt 1 < current attempt 2; the newer attempt's result stands",
    );
    expect(
      refused(r, callbackOf("sr_17_0_f", "pass", { run_id: "777", run_attempt: 2 })).code,
    ).toBe("no_such_attempt");
  });

  it("rule 7: every external effect carries the release id and generation", () => {
    let r = advanceTo(release(waveSpecs(10)), 6);
    const all: Effect[] = [];
    const res = ok(r, {
      type: "applied",
      step_run_id: "sr_17_6_f",
      outcome: "failed",
      message: "",
    });
    all.push(...res.effects);
    r = res.release;
    while (r.state === "compensating" && r.cursor >= 0) {
      const s = sr(r, r.cursor, "bwd");
      const out =
        s.kind === "runner"
          ? ok(r, { type: "dispatch_accepted", step_run_id: s.id, dispatch: s.dispatch })
          : ok(r, { type: "applied", step_run_id: s.id, outcome: "ok", message: "" });
      all.push(...out.effects);
      r = s.kind === "runner" ? finishCurrent(out.release, "pass") : out.release;
    }
    const external = all.filter((e) => e.type === "dispatch" || e.type === "control_plane");
    expect(external.length).toBeGreaterThan(2);
    for (const e of external) {
      expect(e.operation_key.startsWith("r17:")).toBe(true);
      expect(e.generation).toBe(2);
    }
    // The undo's verification reads with the same generation; its reading must carry it back.
    expect(all.filter((e) => e.type === "verify").map((e) => e.generation)).toEqual([2]);
  });
});

describe("failure cases at the pure level", () => {
  it("F01: a 4xx dispatch makes the step run dispatch_failed; hwm does not move; the release does not show it running", () => {
    const specs: StepSpec[] = [
      { name: "include_lane", kind: "control_plane", backward: true },
      { name: "attach_queue_lane", kind: "runner", backward: true, on_failure: "pause" },
    ];
    const r = advanceTo(release(specs), 1);
    expect(r.high_water_mark).toBe(0);
    const res = ok(r, {
      type: "dispatch_failed",
      step_run_id: "sr_17_1_f",
      dispatch: 1,
      retryable: false,
      message: "HTTP 422: client_payload has too many properties",
    });
    expect(sr(res.release, 1)).toMatchObject({
      state: "dispatch_failed",
      last_error: "HTTP 422: client_payload has too many properties",
    });
    expect(res.release.high_water_mark).toBe(0);
    expect(res.release.state).toBe("paused");
    expect(
      res.release.step_runs.some((s) => s.state === "running" || s.state === "dispatched"),
    ).toBe(false);
    // With the default policy the release compensates only what took effect (step 0).
    const c = ok(advanceTo(release([specs[0]!, { ...specs[1]!, on_failure: "compensate" }]), 1), {
      type: "dispatch_failed",
      step_run_id: "sr_17_1_f",
      dispatch: 1,
      retryable: false,
      message: "HTTP 422",
    });
    expect(effectTypes(c.effects)).toEqual(["cp:apply:sr_17_0_b"]);
  });

  it("F02(a): no preflight before the start deadline: unknown, paused, retryable, never success", () => {
    const r = ok(dispatchedAt0(), {
      type: "deadline",
      step_run_id: "sr_17_0_f",
      kind: "start",
      dispatch: 1,
      attempt: 0,
    }).release;
    expect(sr(r, 0).state).toBe("unknown");
    expect(sr(r, 0).last_error).toMatch(/dispatch lost/);
    expect(r.state).toBe("paused");
    expect(r.cursor).toBe(0);
    const retried = ok(r, { type: "retry", actor: "ops", step_run_id: "sr_17_0_f" });
    expect(sr(retried.release, 0)).toMatchObject({ state: "dispatching", dispatch: 2 });
    expect(effectTypes(retried.effects)).toEqual(["dispatch:sr_17_0_f"]);
  });

  it("F03: after a re-run, the older attempt's callback is refused and state is as attempt 2 left it", () => {
    const specs: StepSpec[] = [
      { name: "attach_queue_lane", kind: "runner", backward: true, on_failure: "pause" },
      { name: "include_lane", kind: "control_plane", backward: true },
    ];
    let r = ok(release(specs), { type: "start" }).release;
    r = ok(r, preflightOf(r, "sr_17_0_f")).release;
    r = ok(r, preflightOf(r, "sr_17_0_f", { run_attempt: 2 })).release;
    r = ok(r, callbackOf("sr_17_0_f", "fail", { run_attempt: 2, status: "tool_crashed" })).release;
    const late = refused(r, callbackOf("sr_17_0_f", "pass", { run_attempt: 1 }));
    expect([late.status, late.code]).toEqual([409, "fenced"]);
    expect(sr(r, 0).attempts.map((a) => [a.n, a.state, a.status])).toEqual([
      [1, "fenced", null],
      [2, "failed", "tool_crashed"],
    ]);
    expect(r.state).toBe("paused");
  });

  it("F13: the same callback twice gives one transition, one next effect, hwm moves once", () => {
    const r = boundAt0();
    const first = ok(r, callbackOf("sr_17_0_f", "pass"));
    const second = ok(first.release, callbackOf("sr_17_0_f", "pass"));
    expect(effectTypes(first.effects)).toEqual(["cp:apply:sr_17_1_f"]);
    expect(second.changed).toBe(false);
    expect(second.effects).toEqual([]);
    expect(second.release.high_water_mark).toBe(1);
    expect(second.reply).toMatchObject({ duplicate: true, attempt: 1 });
    // Both at the same moment against the same stored version: the service's conditional
    // update lets one win; the loser reloads and gets the replay above.
    const twin = ok(r, callbackOf("sr_17_0_f", "pass"));
    expect(twin.release.resource_version).toBe(first.release.resource_version);
  });

  it("F14: abort with nothing in flight is aborted with zero effects; abort after success is 409", () => {
    const a = ok(release(waveSpecs(10)), abortEv);
    expect([a.release.state, a.effects]).toEqual(["aborted", []]);
    const done = advanceTo(release(waveSpecs(10)), 7);
    expect(done.state).toBe("succeeded");
    const b = refused(done, abortEv);
    expect([b.status, b.reason]).toEqual([
      409,
      '[engine] release r17 is succeeded; undoing a finished release is a new release; it accepts rollback (a new release of the previous manifest: `baton rollback r17 --reason "<why>"`)',
    ]);
  });

  it("F15: hwm 3 -> backward 3, 2, 1, 0 in order, only steps with backward actions; final traffic absolute", () => {
    // 0 pull+start (runner), 1 smoke (runner, no backward), 2 traffic 10, 3 traffic 50 applied, then its check fails.
    const specs = f15Specs();
    let r = advanceTo(release(specs), 4);
    expect(r.high_water_mark).toBe(4);
    r = ok(r, {
      type: "applied",
      step_run_id: "sr_17_4_f",
      outcome: "failed",
      message: "observed 10, want 50",
    }).release;
    const order: number[] = [];
    const requests: unknown[] = [];
    const hist: string[] = [];
    while (r.state === "compensating" && r.cursor >= 0) {
      const s = sr(r, r.cursor, "bwd");
      order.push(s.step_index);
      const res =
        s.kind === "control_plane"
          ? ok(r, { type: "applied", step_run_id: s.id, outcome: "ok", message: "" })
          : null;
      if (res) {
        const step = r.manifest.steps[s.step_index]!;
        if (step.backward?.kind === "control_plane") requests.push(step.backward.request);
        hist.push(...res.history.map((h) => h.message));
        r = res.release;
      } else r = finishCurrent(r, "pass");
    }
    r = verifyPasses(r);
    expect(order).toEqual([3, 2, 0]);
    expect(requests.at(-1)).toEqual({ op: "set_traffic", weights: { l1: 0, l0: 100 }, percent: 0 });
    expect(hist.join("\n")).toMatch(/step 2 \S+ skipped in compensation: no backward action/);
    expect(r.state).toBe("rolled_back");
  });

  it("F16: a control plane answering 500: only that step is retried, bounded with backoff; earlier dispatches stay at 1; then compensation", () => {
    const specs: StepSpec[] = [
      { name: "attach_queue_lane", kind: "runner", backward: true },
      { name: "attach_queue_lane", kind: "runner", backward: true, lane: "l2" },
      { name: "include_lane", kind: "control_plane", backward: true },
    ];
    let r = advanceTo(release(specs), 2);
    const effects: Effect[] = [];
    const waits: number[] = [];
    r = ok(r, {
      type: "applied",
      step_run_id: "sr_17_2_f",
      outcome: "unknown",
      message: "HTTP 500",
    }).release;
    for (let i = 0; i < 20 && r.state === "running"; i++) {
      const res = ok(
        r,
        { type: "observed", step_run_id: "sr_17_2_f", matches: null, message: "HTTP 500" },
        T0,
      );
      effects.push(...res.effects);
      for (const e of res.effects)
        if (e.type === "control_plane" && e.step_run_id === "sr_17_2_f")
          waits.push((e.not_before ?? T0) - T0);
      r = res.release;
    }
    expect(waits).toEqual([1000, 2000, 4000, 8000]);
    expect(sr(r, 2).state).toBe("failed");
    expect(r.state).toBe("compensating");
    expect(sr(r, 0).dispatch).toBe(1);
    expect(sr(r, 1).dispatch).toBe(1);
    expect(effects.filter((e) => e.type === "dispatch" && e.step_run_id.endsWith("_f"))).toEqual(
      [],
    );
  });
});
