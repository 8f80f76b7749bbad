/**
 * The failing check names the cause: a failed health probe's HTTP status and body
 * excerpt, a check's message and exit code, in the step run's error and the release's reason,
 * kept once the release has rolled back.
 */
import { describe, expect, it } from "vitest";
import { buildNotice } from "../../engine/src/domain/notifications.ts";
import {
  EXCERPT_MAX,
  failingCheckOf,
  failingCheckText,
} from "../../engine/src/domain/result-evidence.ts";
import type { Release } from "../../engine/src/domain/types.ts";
import type { StepSpec } from "../support/manifest-fixture.ts";
import { finishCurrent, ok, preflightOf, release, sr } from "../support/sim/drive.ts";

/** checks.json as the deploy tool writes it for a health check answered 503. */
const HEALTH_503 = [
  { name: "connect", status: "ok", exit_code: 0, duration_ms: 20, message: "" },
  { name: "pull", status: "ok", exit_code: 0, remote_exit_code: 0, message: "pulled" },
  {
    name: "health",
    status: "failed",
    exit_code: 1,
    remote_exit_code: 1,
    message: "http://127.0.0.1:9/healthz not healthy within 1s (2 probes): 503: model not loaded",
    http_status: 503,
    body: "model not loaded: CUDA OOM\u0007",
  },
  { name: "stop-old", status: "not_run", message: "not reached" },
];

describe("failingCheckOf / failingCheckText", () => {
  it("names the health check, its HTTP answer, the body and the exit code", () => {
    const c = failingCheckOf("fail", HEALTH_503);
    expect(c).toEqual({
      name: "health",
      status: "failed",
      exit_code: 1,
      http_status: 503,
      excerpt: "model not loaded: CUDA OOM",
      message: expect.stringContaining("not healthy"),
    });
    expect(failingCheckText(c!, "lane-a")).toBe(
      "health check on lane-a answered 503: model not loaded: CUDA OOM (exit code 1)",
    );
  });

  it("uses the message when no HTTP answer was recorded, and prefers a check that ran", () => {
    const c = failingCheckOf("fail", [
      { name: "stop-old", status: "not_run" },
      { name: "connect", status: "timeout", exit_code: 255, message: "ssh: connect timed out" },
    ]);
    expect(failingCheckText(c!, null)).toBe(
      "connect check timeout: ssh: connect timed out (exit code 255)",
    );
  });

  it("with overall pass, names a check whose status says it failed (any case), not one skipped or not run", () => {
    expect(failingCheckOf("pass", HEALTH_503)?.name).toBe("health");
    expect(failingCheckOf("pass", [{ name: "x", status: "Timeout" }])?.status).toBe("Timeout");
    expect(
      failingCheckOf("pass", [
        { name: "a", status: "ok" },
        { name: "b", status: "skipped" },
        { name: "c", status: "not_run" },
        { name: "d", status: "running" },
      ]),
    ).toBeNull();
  });

  it("with overall pass, checks.json it cannot judge is a failure saying why", () => {
    expect(failingCheckOf("pass", null)).toMatchObject({
      name: "checks.json",
      status: "unreadable",
      message: expect.stringContaining("did not arrive"),
    });
    for (const [checks, says] of [
      [{ health: { status: "failed" } }, "checks.json is an object, not an array"],
      ["[]", "checks.json is a string, not an array"],
      [[[{ status: "failed" }]], "checks.json item 0 is not a check record"],
      [[{ name: "a", status: "ok" }, 3], "checks.json item 1 is not a check record"],
    ] as const) {
      const c = failingCheckOf("pass", checks);
      expect(c?.status).toBe("invalid");
      expect(c?.message).toContain(says);
    }
    expect(failingCheckOf("pass", undefined)).toBeNull();
    expect(failingCheckOf("pass", [])).toBeNull();
  });

  it("with overall fail, is null for a non-array, an empty or all-passing checks.json; never throws", () => {
    expect(failingCheckOf("fail", "[]")).toBeNull();
    expect(failingCheckOf("fail", [])).toBeNull();
    expect(failingCheckOf("fail", [{ name: "x", status: "ok" }, null, 3, [1]])).toBeNull();
    expect(failingCheckOf("fail", [{ status: "failed", name: { x: 1 } }])?.name).toBe("check");
  });

  it("clips a long body and a long message", () => {
    const c = failingCheckOf("fail", [
      { name: "health", status: "failed", http_status: 500, body: "x".repeat(5000) },
    ])!;
    expect(c.excerpt!.length).toBe(EXCERPT_MAX);
    expect(c.exit_code).toBeNull();
    expect(failingCheckText(c, "l1")).toMatch(/^health check on l1 answered 500: x+…$/);
  });
});

describe("the release keeps the failing check as its reason", () => {
  const specs: StepSpec[] = [
    { name: "include_lane", kind: "control_plane", backward: true, lane: "lane-a" },
    { name: "deploy_lane", kind: "runner", backward: true, lane: "lane-a" },
  ];

  function failedAtDeploy(): Release {
    let r = ok(release(specs), { type: "start" }).release;
    r = finishCurrent(r, "pass");
    const s = sr(r, 1);
    r = ok(r, { type: "dispatch_accepted", step_run_id: s.id, dispatch: s.dispatch }).release;
    r = ok(r, preflightOf(r, s.id)).release;
    return ok(r, {
      type: "callback",
      step_run_id: s.id,
      run_id: "9001",
      run_attempt: 1,
      status: "failed",
      overall: "fail",
      failing_check: failingCheckOf("fail", HEALTH_503)!,
    }).release;
  }

  it("in the step run's error, while undoing and after rolled_back", () => {
    let r = failedAtDeploy();
    const cause = "health check on lane-a answered 503: model not loaded: CUDA OOM (exit code 1)";
    expect(sr(r, 1).last_error).toBe(cause);
    expect(r.state).toBe("compensating");
    expect(r.reason).toContain(cause);
    for (let i = 0; i < 10 && r.state === "compensating"; i++) r = finishCurrent(r, "pass");
    expect(r.state).toBe("rolled_back");
    expect(r.reason).toContain(cause);
    expect(r.reason).not.toContain("the runner reported status");
    // The notifications say it too (failed while undoing, rolled back at the end).
    const failedNotice = buildNotice("failed", r, failedAtDeploy(), { url: "u", at: 0 });
    expect(failedNotice.summary).toContain(cause);
    const ended = buildNotice("rolled_back", failedAtDeploy(), r, { url: "u", at: 0 });
    expect(ended.summary).toContain(cause);
    expect(ended.reason).toContain(cause);
  });

  it("falls back to the runner's status when the result files name no failing check", () => {
    let r = ok(release(specs), { type: "start" }).release;
    r = finishCurrent(r, "pass");
    r = finishCurrent(r, "fail");
    expect(sr(r, 1).last_error).toBe("the runner reported status failed");
  });
});
