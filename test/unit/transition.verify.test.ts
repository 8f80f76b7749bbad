/**
 * Recovery verification in the transition (docs/lifecycle.md "Recovery verification"): once an
 * undo has run down to step 1 the release stays `compensating` and emits one `verify` effect;
 * its reading (`verified`) is judged against the observed baseline. Passed: `rolled_back` with
 * the per-lane verdicts kept on the release. A difference: `needs_operator` naming the lane and
 * the field, with `verify` (read again) and `abandon` as its exits. `verify` of a succeeded or
 * rolled_back release records a verification and changes no state; every other state refuses.
 */
import { describe, expect, it } from "vitest";
import { availableActions, verifyAction } from "../../engine/src/domain/transition/exits.ts";
import type { Manifest, Release, ReleaseEvent } from "../../engine/src/domain/types.ts";
import {
  desiredAfterSuccess,
  desiredAfterUndo,
  judgeLane,
  type LaneReading,
  VERIFY_TRIES_MAX,
  type VerificationReading,
} from "../../engine/src/domain/verification.ts";
import { IMAGE, manifestOf, PREVIOUS_IMAGE, waveSpecs } from "../support/manifest-fixture.ts";
import {
  advanceTo,
  deepFreeze,
  finishCurrent,
  ok,
  refused,
  release,
  T0,
} from "../support/sim/drive.ts";

const HOTFIX = `registry.example/acme/model@sha256:${"7".repeat(64)}`;

/** The wave table on lane l1, with the control plane's lanes as read at start. */
function manifest(): Manifest {
  return manifestOf(waveSpecs(10));
}

/** A pending release of the wave table whose observed baseline says l1 ran `image` at 0%. */
function withBaseline(image: string | null = HOTFIX): Release {
  const r = release(manifest());
  return {
    ...r,
    baseline: {
      read_at: T0,
      lanes: [
        { id: "l1", weight: 0, excluded: false, capabilities: ["chat"], advertised: false, image },
      ],
      recipe_manifest_digest: r.manifest_digest,
    },
  };
}

/** Forward to step 5 (set_traffic), which the control plane refuses: compensation begins. */
function compensating(r = withBaseline()): Release {
  const at5 = advanceTo(r, 5);
  return ok(at5, {
    type: "applied",
    step_run_id: "sr_17_5_f",
    outcome: "failed",
    message: "HTTP 409 stale generation",
  }).release;
}

/** Runs every backward step run to success; the release is then verifying. */
function undone(r = compensating()): Release {
  let cur = r;
  for (let i = 0; i < 20 && cur.state === "compensating" && cur.cursor >= 0; i++)
    cur = finishCurrent(cur, "pass");
  return cur;
}

/** A reading of every desired lane as desired, with `over` applied to lane l1. */
function reading(r: Release, over: Partial<LaneReading> = {}): VerificationReading {
  const v = r.verification;
  if (!v) throw new Error("no verification");
  return {
    at: T0 + 5,
    by: "test",
    read_error: null,
    lanes: v.desired.map((l) => ({
      id: l.id,
      control_plane: {
        weight: l.weight,
        excluded: l.excluded,
        capabilities: l.capabilities,
        advertised: l.advertised,
      },
      target: {
        source: "target_probe",
        at: T0 + 5,
        reached: true,
        running: true,
        image: l.image,
        health: "pass",
        message: "healthy",
        step_run_id: null,
      },
      target_gap: null,
      ...over,
    })),
  };
}

const verified = (r: Release, rd: VerificationReading): ReleaseEvent => ({
  type: "verified",
  seq: r.verification?.seq ?? 0,
  generation: r.verification?.generation ?? 0,
  reading: rd,
});

describe("the undo's verification", () => {
  it("after the last backward step the release stays compensating and emits one verify effect against the baseline", () => {
    const before = compensating();
    let cur = before;
    let last: ReturnType<typeof ok> | null = null;
    for (let i = 0; i < 20 && cur.cursor >= 0; i++) {
      const s = cur.step_runs.find((x) => x.step_index === cur.cursor && x.direction === "bwd");
      if (!s) throw new Error("no backward step run at the cursor");
      last =
        s.kind === "control_plane"
          ? ok(cur, { type: "applied", step_run_id: s.id, outcome: "ok", message: "" })
          : null;
      cur = last ? last.release : finishCurrent(cur, "pass");
    }
    expect(cur.state).toBe("compensating");
    expect(cur.verification).toMatchObject({
      seq: 1,
      generation: 2,
      trigger: "compensation",
      requested_by: "engine",
      desired_from: "baseline",
      state: "verifying",
      tries: 1,
    });
    // The baseline's values; l1 was deployed and restored, so its machine is asked for HOTFIX.
    expect(cur.verification?.desired).toEqual([
      {
        id: "l1",
        image: HOTFIX,
        weight: 0,
        excluded: false,
        capabilities: ["chat"],
        advertised: false,
        target: true,
      },
    ]);
    expect(last?.effects).toEqual([
      {
        type: "verify",
        seq: 1,
        generation: 2,
        lanes: [{ id: "l1", image: HOTFIX, target: true }],
        not_before: null,
      },
    ]);
    expect(last?.history.map((h) => h.message).join("\n")).toMatch(
      /verifies its recovery against the observed baseline .*image and health of l1/,
    );
    // Nothing an operator does is offered while it reads (it ends by itself).
    expect(availableActions(cur)).toEqual([]);
  });

  it("a reading that matches ends rolled_back, keeping the per-lane verdicts and the undo's reason", () => {
    const r = undone();
    const res = ok(r, verified(r, reading(r)), T0 + 6);
    expect(res.release.state).toBe("rolled_back");
    expect(res.effects).toEqual([]);
    expect(res.release.reason).toBe(compensating().reason);
    const v = res.release.verification;
    expect(v).toMatchObject({ state: "passed", at: T0 + 5, by: "test", gaps: [] });
    expect(v?.lanes).toEqual([
      {
        lane: "l1",
        ok: true,
        target_source: "target_probe",
        fields: [
          { field: "weight", desired: 0, observed: 0, ok: true, note: null },
          { field: "excluded", desired: false, observed: false, ok: true, note: null },
          {
            field: "capabilities",
            desired: { capabilities: ["chat"], advertised: false },
            observed: { capabilities: ["chat"], advertised: false },
            ok: true,
            note: null,
          },
          { field: "image", desired: HOTFIX, observed: HOTFIX, ok: true, note: null },
          { field: "health", desired: "pass", observed: "pass", ok: true, note: null },
        ],
      },
    ]);
    expect(res.history.at(-1)?.message).toMatch(/rolled back: .*verification 1 found every lane/);
  });

  it("a target that kept the candidate: needs_operator naming the lane, the field and both images; exits verify and abandon", () => {
    const r = undone();
    const rd = reading(r);
    const t = rd.lanes[0]?.target;
    if (!t) throw new Error("no target");
    t.image = IMAGE;
    const res = ok(r, verified(r, rd));
    expect(res.release.state).toBe("needs_operator");
    expect(res.release.reason).toContain(`lane l1: image desired ${HOTFIX} observed ${IMAGE}`);
    expect(res.release.reason).toContain("baton verify r17");
    expect(res.release.verification?.state).toBe("failed");
    expect(availableActions(res.release).map((a) => a.action)).toEqual(["verify", "abandon"]);
    // Retry and resolve wait on no step run here.
    expect(refused(res.release, { type: "abort", actor: "ops", reason: "x" }).reason).toContain(
      "verify again (baton verify r17)",
    );
  });

  it("a control plane that kept a weight, a marker or capabilities: needs_operator naming each", () => {
    const r = undone();
    const res = ok(
      r,
      verified(
        r,
        reading(r, {
          control_plane: { weight: 10, excluded: true, capabilities: ["chat"], advertised: true },
        }),
      ),
    );
    expect(res.release.state).toBe("needs_operator");
    expect(res.release.reason).toContain("lane l1: weight desired 0% observed 10%");
    expect(res.release.reason).toContain("excluded marker desired false observed true");
    expect(res.release.reason).toContain(
      'capabilities desired ["chat"] (advertised false) observed ["chat"] (advertised true)',
    );
  });

  it("a container not running, or a machine not reached, fails; an unlisted lane fails", () => {
    const r = undone();
    const stopped = reading(r);
    const t = stopped.lanes[0]!.target!;
    Object.assign(t, { running: false, image: null, health: null, message: "not running" });
    expect(ok(r, verified(r, stopped)).release.reason).toContain(
      `image desired ${HOTFIX} is not running (not running)`,
    );
    const unreached = reading(r);
    Object.assign(unreached.lanes[0]!.target!, {
      reached: false,
      running: null,
      image: null,
      health: null,
      message: "connect_timeout",
    });
    expect(ok(r, verified(r, unreached)).release.reason).toContain(
      "could not ask the lane's machine: connect_timeout",
    );
    expect(ok(r, verified(r, reading(r, { control_plane: null }))).release.reason).toContain(
      "the control plane does not list the lane",
    );
  });

  it("a failed health check fails the lane", () => {
    const r = undone();
    const rd = reading(r);
    Object.assign(rd.lanes[0]!.target!, { health: "fail", message: "503 model not loaded" });
    expect(ok(r, verified(r, rd)).release.reason).toContain(
      "health check failed: 503 model not loaded",
    );
  });

  it("verify from needs_operator reads again (seq 2, compensating); a match then ends rolled_back", () => {
    const r = undone();
    const failed = ok(
      r,
      verified(
        r,
        reading(r, {
          control_plane: { weight: 10, excluded: false, capabilities: ["chat"], advertised: false },
        }),
      ),
    ).release;
    const again = ok(failed, { type: "verify", actor: "operator:alice" });
    expect(again.release.state).toBe("compensating");
    expect(again.release.verification).toMatchObject({
      seq: 2,
      trigger: "operator",
      requested_by: "operator:alice",
      state: "verifying",
    });
    expect(again.effects.map((e) => e.type)).toEqual(["verify"]);
    const done = ok(again.release, verified(again.release, reading(again.release)));
    expect(done.release.state).toBe("rolled_back");
    expect(done.release.reason).toBe(compensating().reason);
  });

  it("a reading of another verification or generation changes nothing (rule 1)", () => {
    const r = deepFreeze(undone());
    const rd = reading(r);
    for (const e of [
      { ...verified(r, rd), seq: 2 },
      { ...verified(r, rd), generation: 1 },
    ] as ReleaseEvent[]) {
      const res = ok(r, e);
      expect(res.changed).toBe(false);
      expect(res.release).toBe(r);
      expect(res.history[0]?.message).toMatch(/ignored/);
    }
  });

  it("a control plane that cannot be read is read again with backoff, then fails into needs_operator", () => {
    let r = undone();
    const bad: VerificationReading = { at: T0, by: "test", read_error: "HTTP 503", lanes: [] };
    for (let n = 2; n <= VERIFY_TRIES_MAX; n++) {
      const res = ok(r, verified(r, bad), T0 + n);
      r = res.release;
      expect(r.state).toBe("compensating");
      expect(r.verification?.tries).toBe(n);
      expect(res.effects).toMatchObject([
        { type: "verify", seq: 1, not_before: expect.any(Number) },
      ]);
    }
    const last = ok(r, verified(r, bad));
    expect(last.release.state).toBe("needs_operator");
    expect(last.release.reason).toContain(
      `the control plane could not be read in ${VERIFY_TRIES_MAX} tries: HTTP 503`,
    );
  });

  it("a recoverable release waits for its restore action only after its verification passed", () => {
    const m = {
      ...manifest(),
      recovery: { class: "recoverable" as const, restore: "run restore.sh" },
    };
    const r = undone(compensating({ ...withBaseline(), manifest: m }));
    expect(r.state).toBe("compensating");
    const res = ok(r, verified(r, reading(r)));
    expect(res.release.state).toBe("needs_operator");
    expect(res.release.restore?.action).toBe("run restore.sh");
  });

  it("an abort with nothing applied ends aborted with no verification; one that applied something verifies", () => {
    const nothing = ok(ok(withBaseline(), { type: "start" }).release, {
      type: "abort",
      actor: "ops",
      reason: "changed my mind",
    });
    // Step 0 (a control-plane write) was emitted at start: it may have taken effect.
    expect(nothing.release.state).toBe("compensating");
    const pending = ok(withBaseline(), { type: "abort", actor: "ops", reason: "not yet" });
    expect(pending.release.state).toBe("aborted");
    expect(pending.release.verification).toBeUndefined();
    expect(pending.effects).toEqual([]);
    // The exclude_lane write in flight settles; then it is undone and the undo verified.
    const settled = ok(nothing.release, {
      type: "applied",
      step_run_id: "sr_17_0_f",
      outcome: "ok",
      message: "applied",
    }).release;
    const applied = undone(settled);
    expect(applied.verification?.state).toBe("verifying");
    // l1 was never deployed: its machine is not asked, and its image is not compared.
    expect(applied.verification?.desired[0]?.target).toBe(false);
  });
});

describe("baton verify of a closed release", () => {
  /** The wave table run to success. */
  function succeeded(): Release {
    let r = ok(withBaseline(), { type: "start" }).release;
    for (let i = 0; i < 20 && r.state === "running"; i++) r = finishCurrent(r, "pass");
    expect(r.state).toBe("succeeded");
    return r;
  }

  it("succeeded: compares with the manifest's end state and records the verdict; the state stays", () => {
    const r = succeeded();
    expect(desiredAfterSuccess(r)).toEqual([
      {
        id: "l1",
        image: IMAGE,
        weight: 10,
        excluded: false,
        capabilities: ["chat"],
        advertised: true,
        target: true,
      },
    ]);
    expect(verifyAction(r)?.command).toBe("baton verify r17");
    expect(availableActions(r)).toEqual([]);
    const asked = ok(r, { type: "verify", actor: "operator:bob" });
    expect(asked.release.state).toBe("succeeded");
    expect(asked.release.verification).toMatchObject({
      desired_from: "manifest",
      trigger: "operator",
      state: "verifying",
    });
    const pass = ok(asked.release, verified(asked.release, reading(asked.release)));
    expect(pass.release.state).toBe("succeeded");
    expect(pass.release.verification?.state).toBe("passed");
    const differs = ok(
      asked.release,
      verified(
        asked.release,
        reading(asked.release, {
          control_plane: { weight: 0, excluded: false, capabilities: ["chat"], advertised: true },
        }),
      ),
    );
    expect(differs.release.state).toBe("succeeded");
    expect(differs.release.verification?.summary).toBe("lane l1: weight desired 10% observed 0%");
    expect(differs.history[0]?.message).toMatch(/of succeeded release r17 found differences/);
  });

  it("rolled_back: compares with the baseline again; a second verify while one reads is refused", () => {
    const r0 = undone();
    const rolled = ok(r0, verified(r0, reading(r0))).release;
    const asked = ok(rolled, { type: "verify", actor: "ops" }).release;
    expect(asked.state).toBe("rolled_back");
    expect(asked.verification).toMatchObject({ seq: 2, desired_from: "baseline" });
    expect(refused(asked, { type: "verify", actor: "ops" }).reason).toContain(
      "already verifying (verification 2)",
    );
  });

  it("every other state refuses verify, saying why", () => {
    const cases: [Release, RegExp][] = [
      [withBaseline(), /still under way/],
      [advanceTo(withBaseline(), 2), /still under way/],
      [compensating(), /it is undoing; its recovery is verified by itself/],
      [ok(withBaseline(), { type: "abort", actor: "o", reason: "r" }).release, /nothing applied/],
    ];
    for (const [r, why] of cases) {
      const res = refused(r, { type: "verify", actor: "ops" });
      expect(res.status).toBe(409);
      expect(res.reason).toMatch(why);
      expect(verifyAction(r)).toBeNull();
    }
  });
});

describe("judging one lane", () => {
  const want = desiredAfterUndo(undone())[0]!;

  it("a runner report without a running image is a gap, not a failure", () => {
    const v = judgeLane(want, {
      id: "l1",
      control_plane: { weight: 0, excluded: false, capabilities: ["chat"], advertised: false },
      target: {
        source: "runner_report",
        at: T0,
        reached: true,
        running: null,
        image: null,
        health: "pass",
        message: "sr_17_1_b attempt 1 reported pass (no running image in its checks)",
        step_run_id: "sr_17_1_b",
      },
      target_gap: null,
    });
    expect(v.ok).toBe(true);
    expect(v.fields.find((f) => f.field === "image")).toMatchObject({ ok: null });
  });

  it("images compare by digest; a lane with an unknown start image is not compared", () => {
    const named = `other.example/name@sha256:${"7".repeat(64)}`;
    const base: LaneReading = {
      id: "l1",
      control_plane: { weight: 0, excluded: false, capabilities: ["chat"], advertised: false },
      target: {
        source: "target_probe",
        at: T0,
        reached: true,
        running: true,
        image: named,
        health: "pass",
        message: "ok",
        step_run_id: null,
      },
      target_gap: null,
    };
    expect(judgeLane(want, base).ok).toBe(true);
    const unknownStart = desiredAfterUndo(undone(compensating(withBaseline(null))))[0]!;
    // Deployed and restored: the restore deployed previous_image, which is what it should run.
    expect(unknownStart.image).toBe(PREVIOUS_IMAGE);
  });
});
