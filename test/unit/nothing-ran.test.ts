/**
 * Nothing undone that never happened: a runner step whose result files prove no
 * remote command ran has not taken effect; compensation skips its backward step. Conservative:
 * any record that a phase may have run keeps the backward step.
 */
import { describe, expect, it } from "vitest";
import { provesNothingRan } from "../../engine/src/domain/result-evidence.ts";
import { guards } from "../../engine/src/domain/transition/guards.ts";
import type { StepSpec } from "../support/manifest-fixture.ts";
import { callbackOf, ok, preflightOf, release, sr } from "../support/sim/drive.ts";

const phases = (status = "not_run") =>
  ["pull", "start", "health", "stop-old", "running"].map((name) => ({ name, status }));

describe("provesNothingRan", () => {
  it.each([
    ["connect_failed", "failed"],
    ["connect_timeout", "timeout"],
    ["host_key_mismatch", "failed"],
    ["auth_failed", "failed"],
  ])("a %s connect record with every phase not_run is proof", (cls, status) => {
    const checks = [{ name: "connect", status, class: cls, message: "[ssh] …" }, ...phases()];
    expect(provesNothingRan("fail", checks)).toBe(true);
  });

  it("bad arguments (the tool never connected) is proof; every phase not_run is proof", () => {
    expect(provesNothingRan("fail", [{ name: "arguments", status: "failed" }, ...phases()])).toBe(
      true,
    );
    expect(provesNothingRan("fail", phases())).toBe(true);
  });

  it("the action refused the SSH key input: the tool never started", () => {
    for (const cls of ["key_invalid", "key_encrypted_no_passphrase"]) {
      const key = { name: "ssh-key", status: "failed", class: cls, message: "[action] …" };
      expect(provesNothingRan("fail", [key])).toBe(true);
      expect(provesNothingRan("fail", [key, ...phases()])).toBe(true);
    }
    // A tool that could not be executed is no proof: a tool that ran may exit 127 too.
    const tool = { name: "tool", status: "failed", class: "tool_not_found" };
    expect(provesNothingRan("fail", [tool])).toBe(false);
  });

  it.each([
    ["the seed (nothing written yet: the tool may have died mid-phase)", []],
    ["unreadable checks.json", null],
    ["a connect that succeeded", [{ name: "connect", status: "ok" }, ...phases()]],
    [
      "a phase that ran",
      [
        { name: "connect", status: "ok" },
        { name: "pull", status: "failed" },
      ],
    ],
    ["a cancelled phase", [{ name: "pull", status: "cancelled" }]],
    ["a connect failure of another class", [{ name: "connect", status: "failed", class: "x" }]],
    ["a record that is not an object", ["connect"]],
  ])("is not proof: %s", (_, checks) => {
    expect(provesNothingRan("fail", checks)).toBe(false);
  });

  it("a passing result is never proof", () => {
    expect(provesNothingRan("pass", phases())).toBe(false);
  });
});

describe("compensation skips a runner step that never reached its machine", () => {
  const specs: StepSpec[] = [
    { name: "exclude_lane", kind: "control_plane", backward: true },
    { name: "attach_queue_lane", kind: "runner", backward: true },
    { name: "include_lane", kind: "control_plane", backward: true },
  ];

  function attachFails(nothingRan: boolean) {
    let r = ok(release(specs), { type: "start" }).release;
    r = ok(r, { type: "applied", step_run_id: "sr_17_0_f", outcome: "ok", message: "200" }).release;
    // Read-back of the write: the control plane shows the target state.
    if (r.step_runs[0]?.state !== "succeeded")
      r = ok(r, {
        type: "observed",
        step_run_id: "sr_17_0_f",
        matches: true,
        message: "read",
      }).release;
    r = ok(r, { type: "dispatch_accepted", step_run_id: "sr_17_1_f", dispatch: 1 }).release;
    r = ok(r, preflightOf(r, "sr_17_1_f")).release;
    const res = ok(r, {
      ...callbackOf("sr_17_1_f", "fail"),
      ...(nothingRan ? { nothing_ran: true } : {}),
    } as Parameters<typeof ok>[1]);
    return res;
  }

  it("connect failed: no restore dispatched, the high-water mark stops before it", () => {
    const res = attachFails(true);
    const r = res.release;
    expect(r.state).toBe("compensating");
    expect(r.high_water_mark).toBe(0);
    expect(guards.mayHaveTakenEffect(sr(r, 1))).toBe(false);
    expect(r.step_runs.find((s) => s.id === "sr_17_1_b")).toBeUndefined();
    // The next backward step is the exclude_lane's (step 0), a control-plane write.
    expect(res.effects.map((e) => ("step_run_id" in e ? e.step_run_id : e.type))).toEqual([
      "sr_17_0_b",
    ]);
    expect(res.history.map((h) => h.message).join("\n")).toMatch(
      /compensating from step 1 .*no remote command ran/,
    );
  });

  it("a phase may have run: the restore is dispatched (conservative)", () => {
    const r = attachFails(false).release;
    expect(r.high_water_mark).toBe(1);
    expect(guards.mayHaveTakenEffect(sr(r, 1))).toBe(true);
    expect(r.step_runs.find((s) => s.id === "sr_17_1_b")?.state).toBe("dispatching");
  });
});
