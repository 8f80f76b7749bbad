/**
 * Re-run from the Actions UI under the default policy, through the bundled
 * release-step action as the local runner runs it (same run id, GITHUB_RUN_ATTEMPT=2), on the
 * demo stack: engine, reference control plane, SSH target with deploy.sh.
 * 1. Default window (30 min): the failed job's error and summary say "re-run this job before
 *    HH:MM UTC, or release rN compensates"; the re-run is accepted and the release succeeds.
 * 2. Window closed (0 min: the window ends at the failure): the failed job says the release is
 *    compensating and a re-run will be declined; the re-run is declined (a failed job saying
 *    why, touching nothing) and the release ends rolled_back.
 * The window closing by its deadline (e.g. after 30 min) is tested with a fake clock in
 * test/integration/rerun-window.test.ts and test/unit/transition.exits.test.ts.
 */
import { readFileSync } from "node:fs";
import { afterEach, expect, it } from "vitest";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import { utcMinute } from "../../engine/src/domain/transition/settle.ts";
import {
  describeStore,
  type E2EBase,
  startInProcess,
  stepIndex,
  summarize,
  TERMINAL,
  twoLaneRecipe,
  waitUntil,
} from "../support/e2e-harness.ts";

const T = 240_000;

describeStore("sqlite", "re-run from the Actions UI through the bundled action", () => {
  let env: E2EBase | null = null;
  afterEach(async () => {
    await env?.close();
    env = null;
  });

  async function failOnce(policy?: RecipeInput["policy"]) {
    const e = await startInProcess("sqlite", { recipe: twoLaneRecipe(policy) });
    env = e;
    const step = stepIndex(e.manifest, "attach_queue_lane:lane-a");
    e.stack.failHealthAt(step, "next_run");
    const id = await e.startRelease();
    const srId = `sr_${id.slice(1)}_${step}_f`;
    await waitUntil(
      async () => e.stack.runner.runsOf(srId),
      (runs) => runs.length === 1 && runs[0]!.state === "completed",
      "attempt 1's run to complete",
      120_000,
    );
    const run1 = e.stack.runner.runsOf(srId)[0]!;
    expect(run1.conclusion).toBe("failure");
    return { e, id, srId, run1 };
  }

  it(
    "default window: the failed job says until when to re-run; attempt 2 inside the window continues forward and the release succeeds",
    async () => {
      const { e, id, srId, run1 } = await failOnce();
      const paused = await e.waitFor(
        id,
        (x) => x.state === "paused" || TERMINAL.has(x.state),
        "the release to wait for a re-run",
      );
      expect(paused.state, summarize(paused)).toBe("paused");
      const rec = (await (await e.api(`/v1/releases/${id}`)).json()) as {
        rerun_deadline: number;
        created_at: number;
      };
      // As the engine writes it: with the date when the deadline is on another UTC day than
      // the failure (30 minutes before it).
      const until = utcMinute(rec.rerun_deadline, rec.rerun_deadline - 30 * 60_000);
      // 30 minutes (default) after the failure, which came after the release started.
      expect(rec.rerun_deadline - rec.created_at).toBeGreaterThanOrEqual(30 * 60_000);
      expect(rec.rerun_deadline - Date.now()).toBeLessThanOrEqual(30 * 60_000);
      const truth = `re-run this job before ${until}, or release ${id} compensates`;
      const log1 = readFileSync(run1.logFile, "utf8");
      expect(log1).toContain(`::error::[action] step run ${srId} failed (overall fail); ${truth}`);
      expect(log1).not.toContain('use "Re-run failed jobs" to retry');
      expect(readFileSync(run1.summaryFile, "utf8")).toContain(`**Next:** ${truth}`);
      // "Re-run failed jobs" in the Actions UI, by lee: the same run id, attempt 2.
      expect(e.stack.runner.rerun(run1.runId, "lee")).toEqual({ runId: run1.runId, attempt: 2 });
      const r = await e.waitFor(id, (x) => TERMINAL.has(x.state), "the release to end");
      expect(r.state, summarize(r)).toBe("succeeded");
      const sr = r.step_runs.find((s) => s.id === srId)!;
      expect(sr.dispatch).toBe(1);
      expect(sr.attempts.map((a) => [a.n, a.run_id, a.run_attempt, a.state])).toEqual([
        [1, run1.runId, 1, "fenced"],
        [2, run1.runId, 2, "succeeded"],
      ]);
      expect(r.generation).toBe(1);
      const run2 = e.stack.runner.runsOf(srId).find((x) => x.attempt === 2)!;
      expect(run2.conclusion).toBe("success");
      // The action reported who re-ran it (GITHUB_TRIGGERING_ACTOR); GITHUB_ACTOR stayed the
      // run's starter. The history says both.
      const history = (await e.record(id)).history.filter((x) => x.step_run_id === srId);
      expect(history.map((x) => x.message).join("\n")).toContain(
        `attempt 2 reported succeeded (pass) (re-run by lee from the Actions UI; the run was started by baton-local-runner[bot])`,
      );
    },
    T,
  );

  it(
    "window closed: the failed job says a re-run will be declined; the re-run is declined with the reason and the release rolls back",
    async () => {
      const { e, id, srId, run1 } = await failOnce({ rerun_window_minutes: 0 });
      const log1 = readFileSync(run1.logFile, "utf8");
      expect(log1).toContain(
        `::error::[action] step run ${srId} failed (overall fail); release ${id} is compensating; a re-run of this job will be declined`,
      );
      const ended = await e.waitFor(id, (x) => TERMINAL.has(x.state), "the release to end");
      expect(ended.state, summarize(ended)).toBe("rolled_back");
      e.stack.runner.rerun(run1.runId);
      const runs = await waitUntil(
        async () => e.stack.runner.runsOf(srId),
        (rs) => rs.length === 2 && rs[1]!.state === "completed",
        "attempt 2's run to complete",
        120_000,
      );
      const run2 = runs[1]!;
      expect(run2.conclusion).toBe("failure");
      expect(run2.outputs.status).toBe("declined");
      const log2 = readFileSync(run2.logFile, "utf8");
      expect(log2).toContain(
        `::error::[action] this re-run was declined: [engine] re-run 2 of run ${run1.runId} is declined: release ${id} is rolled_back`,
      );
      expect(log2).toContain("this job touched nothing");
      // Nothing ran: no tool phase in attempt 2, and the step run kept its one attempt.
      expect(log2).not.toContain("6. run tool");
      const after = await e.record(id);
      expect(after.state).toBe("rolled_back");
      expect(after.step_runs.find((s) => s.id === srId)?.attempts).toHaveLength(1);
      const refused = after.history.filter(
        (h) => h.step_run_id === srId && h.outcome === "refused" && h.kind === "preflight",
      );
      expect(refused.map((h) => h.message).join("\n")).toContain("is declined");
    },
    T,
  );
});
