/**
 * How a main step ends, as data ({@link Outcome}), and the one place that turns it into the
 * step's annotations, job summary, outputs and exit code. The job fails whenever `overall` is not
 * `pass`, except for a preflight 409: a fenced or duplicate delivery ends cleanly, touching nothing.
 */
import * as core from "@actions/core";
import { failedCheckIn, resultPassed } from "../../../engine/src/protocol/messages.ts";
import type { Results } from "../../../scripts/lib/result.ts";
import { annotate, annotateError, failStep } from "./annotate.ts";
import { type Delivery, writeSummary } from "./report.ts";
import type { StepContext } from "./step-context.ts";

/** Where a main step ended. */
export type Outcome =
  /** Phase 2 refused the inputs, event, payload or tool: nothing provisioned, preflighted or run. */
  | { kind: "invalid"; message: string; problems: readonly string[] }
  /** Preflight 409 (duplicate delivery, newer attempt, step no longer wanted): not a failure. */
  | { kind: "declined"; reason: string }
  /** Preflight 409 `rerun_declined`: a re-run the release no longer wants, shown as a failure. */
  | { kind: "rerun_declined"; reason: string }
  /** Preflight gave no 200 (another status, an unreadable answer, or no answer); `why` says which and the fix. */
  | { kind: "preflight_failed"; why: string }
  /** Phase 7 ran: the result files as sent and the engine's answer. */
  | { kind: "reported"; results: Results; delivery: Delivery };

/** Annotations, job summary, outputs and exit code for `outcome`. */
export async function finish(ctx: StepContext, outcome: Outcome): Promise<void> {
  const page = { stepRunId: ctx.stepRunId, engineUrl: ctx.engineUrl, phases: ctx.phases };
  switch (outcome.kind) {
    case "invalid": {
      annotateError(outcome.message);
      for (const p of outcome.problems) annotateError(p);
      await safeSummary({ ...page, note: [outcome.message, ...outcome.problems].join("\n\n") });
      core.setOutput("step-run-id", ctx.stepRunId);
      setResult("invalid", "fail");
      process.exitCode = 1;
      return;
    }
    case "rerun_declined":
      // Shown as a failure, so that the job does not look like a successful retry.
      failStep(`[action] this re-run was declined: ${outcome.reason}`);
      await safeSummary({
        ...page,
        note: `Re-run declined (409): ${outcome.reason}\n\nNothing was touched.`,
      });
      setResult("declined", "fail");
      return;
    case "declined":
      annotate(
        "notice",
        `[action] the engine declined this run (409): ${outcome.reason}. Nothing was touched; this is not a failure.`,
      );
      await safeSummary({
        ...page,
        note: `Preflight declined (409): ${outcome.reason}\n\nNothing was touched.`,
      });
      setResult("declined", "fail");
      return;
    case "preflight_failed":
      annotateError(`[action] preflight failed, ${outcome.why}; nothing was provisioned or run`);
      await safeSummary({ ...page, note: `Preflight failed: ${outcome.why}` });
      setResult("preflight_failed", "fail");
      process.exitCode = 1;
      return;
    case "reported": {
      const { results, delivery } = outcome;
      await safeSummary({ ...page, results, delivery });
      // The engine's rule (a status or a check that says it failed outweighs overall pass).
      const checks = results.checksValid ? results.checks : null;
      const passed = resultPassed(results.status, results.overall, checks);
      // The outputs say what the engine counts: a pass it counts as a failure is `failed`/`fail`.
      if (!passed && results.overall === "pass") setResult("failed", "fail");
      else setResult(results.status, results.overall);
      if (!delivery.final)
        annotateError(`[action] ${delivery.message}; the post step will try once more`);
      else if (!delivery.acked) failStep(`[action] callback refused: ${delivery.message}`);
      if (!passed) {
        // The engine's answer says what comes next (re-run window, compensation, engine retry);
        // without one (the callback was not acknowledged), the step-run page has the truth.
        const next =
          delivery.advice ??
          `see ${ctx.engineUrl}/step-runs/${ctx.stepRunId} for what the release does next`;
        const failed = results.overall === "pass" ? failedCheckIn(checks) : null;
        const why = !failed
          ? ""
          : failed.name === "checks.json" && typeof failed.message === "string"
            ? `, but ${failed.message}: the engine counts it as a failure`
            : `, but its check ${JSON.stringify(String(failed.name ?? "check"))} says ${JSON.stringify(String(failed.status))}: a result with a failed check is a failure`;
        failStep(
          `[action] step run ${ctx.stepRunId} ${results.status} (overall ${results.overall})${why}; ${next}`,
        );
      }
      return;
    }
  }
}

function setResult(status: string, overall: string): void {
  core.setOutput("status", status);
  core.setOutput("overall", overall);
}

/** Writes the job summary; a summary that cannot be written is logged, never fatal. */
async function safeSummary(opts: Parameters<typeof writeSummary>[0]): Promise<void> {
  try {
    await writeSummary(opts);
  } catch (e) {
    core.info(`[action] no job summary written: ${(e as Error).message}`);
  }
}
