/**
 * Who ran a runner attempt: the action sends GITHUB_ACTOR and GITHUB_TRIGGERING_ACTOR with its
 * callback; the engine keeps well-formed GitHub logins and drops anything else without refusing
 * the result; the history line says who re-ran a job from the Actions UI.
 */
import { describe, expect, it } from "vitest";
import { callbackText } from "../../actions/release-step/src/report.ts";
import { runByWords } from "../../engine/src/domain/transition/runner.ts";
import { CallbackBody } from "../../engine/src/protocol/messages.ts";

const base = {
  step_run_id: "sr_1_2_f",
  run_id: "7001",
  run_attempt: 2,
  status: "succeeded",
  overall: "pass",
  checks: [],
  log: "",
};

describe("who ran a runner attempt", () => {
  it("the action's callback carries the run's actor and this attempt's triggering actor", () => {
    const text = callbackText(
      {
        url: "http://127.0.0.1:1/cb",
        step_run_id: "sr_1_2_f",
        run_id: "7001",
        run_attempt: 2,
        attempt: 2,
        result_dir: "/tmp/x",
        engine_url: "http://127.0.0.1:1",
        actor: "maria",
        triggering_actor: "lee",
      },
      {
        status: "succeeded",
        overall: "pass",
        checks: [],
        checksText: "[]",
        checksValid: true,
        log: "",
      },
      {},
      [],
    );
    const body = CallbackBody.parse(JSON.parse(text));
    expect([body.actor, body.triggering_actor]).toEqual(["maria", "lee"]);
  });

  it("keeps GitHub logins (apps' name[bot] too) and drops anything else, never refusing", () => {
    const ok = CallbackBody.parse({ ...base, actor: "dependabot[bot]", triggering_actor: "lee-2" });
    expect([ok.actor, ok.triggering_actor]).toEqual(["dependabot[bot]", "lee-2"]);
    const bad = CallbackBody.safeParse({
      ...base,
      actor: "maria; rm -rf /",
      triggering_actor: "\u202Eeel",
    });
    expect(bad.success).toBe(true);
    expect([bad.data?.actor, bad.data?.triggering_actor]).toEqual([undefined, undefined]);
  });

  it("the history says who re-ran the job, and who started the run", () => {
    expect(
      runByWords({ run_attempt: 2, run_by: { actor: "maria", triggering_actor: "lee" } }),
    ).toBe(" (re-run by lee from the Actions UI; the run was started by maria)");
    expect(
      runByWords({ run_attempt: 1, run_by: { actor: "maria", triggering_actor: "maria" } }),
    ).toBe(" (run by maria)");
    expect(runByWords({ run_attempt: 2 })).toBe("");
  });
});
