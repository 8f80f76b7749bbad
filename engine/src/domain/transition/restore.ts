/**
 * The restore step of a recoverable release whose recipe declares `restore_state`
 * (docs/recovery-actions.md "Restore state"). Once compensation has undone what took effect
 * and its recovery verification passed, the release stays `compensating` and runs the restore
 * tool as a runner step (the cursor on the restore step, one past the table). The tool reports
 * the point it restored to and the data lost; a pass with a report the tool read back marks
 * the restore done (`restore.confirmed` by the run's actor) and a second recovery verification
 * reads the lanes again; when it passes the release ends `rolled_back`. A run that fails (or
 * whose outcome is unknown, or that reports nothing) leaves the release waiting
 * `needs_operator` for its restore, as a recipe with a prose `restore` does: `restore_state`
 * (to a named point) runs the tool again, `confirm_restore` records a restore done by hand.
 */
import {
  DEFAULT_RESTORE_POINT,
  hasRestoreTool,
  latestRestoreRun,
  restoreIndex,
  restoreReportWords,
  restoreToolWords,
} from "../restore-state.ts";
import type { ReleaseEvent, RestoreReport, StepRun } from "../types.ts";
import { suggestedCommand } from "../verbs.ts";
import type { Draft, Refusal } from "./draft.ts";
import { confirmRestoreCommand, holdForRestore, waitingForRestore } from "./recovery.ts";
import { beginStepRun } from "./send.ts";

type Ev<T extends ReleaseEvent["type"]> = Extract<ReleaseEvent, { type: T }>;

/** The CLI line that runs the restore tool again. */
export const restoreStateCommand = (id: string) =>
  suggestedCommand("restore_state", { target: id });

/**
 * Starts a run of the restore tool to `point` (state `compensating`, cursor on the restore
 * step), recording who asked and why in `restore.runs`.
 */
export function beginRestoreRun(d: Draft, actor: string, reason: string, point: string): void {
  const r = d.release;
  const index = restoreIndex(r);
  r.restore ??= { action: restoreToolWords(r), since: d.now, confirmed: null };
  r.restore.runs ??= [];
  const runs = r.restore.runs;
  r.state = "compensating";
  r.cursor = index;
  runs.push({
    actor,
    reason,
    point,
    at: d.now,
    step_run_id: "",
    state: "running",
    report: null,
    finished_at: null,
    error: null,
  });
  const sr = beginStepRun(d, index, "bwd");
  const run = runs[runs.length - 1]!;
  run.step_run_id = sr.id;
  d.accept(
    `[engine] release ${r.id} runs its restore tool \`${r.manifest.recovery?.restore_state?.tool}\` to point ${point} (step run ${sr.id}, asked by ${actor}: ${reason})`,
    sr.id,
    { restore_state: { actor, point, reason, step_run_id: sr.id } },
  );
}

/** The automatic restore after a passed undo verification, when the recipe declares a tool. */
export function beginsAutomaticRestore(d: Draft): boolean {
  const r = d.release;
  if (!hasRestoreTool(r) || (r.restore?.runs?.length ?? 0) > 0) return false;
  const point = r.manifest.recovery?.restore_state?.point ?? DEFAULT_RESTORE_POINT;
  beginRestoreRun(
    d,
    "engine",
    "the traffic rollback ended and its recovery verification passed; the recipe's recovery class is recoverable",
    point,
  );
  return true;
}

/** Keeps the tool's report on the run (callback of a restore step run). */
export function recordRestoreReport(d: Draft, sr: StepRun, report: RestoreReport | undefined) {
  const run = latestRestoreRun(d.release);
  if (!run || run.step_run_id !== sr.id || !report) return;
  run.report = report;
}

/**
 * The restore step run settled: done (returns true: the caller verifies the lanes again, then
 * the release ends `rolled_back`), or the release waits `needs_operator` for its restore,
 * naming the failed run and both exits (returns false).
 */
export function restoreSettled(d: Draft, sr: StepRun): boolean {
  const r = d.release;
  const run = latestRestoreRun(r);
  r.cursor = -1;
  if (!run || !r.restore) return false;
  run.finished_at = d.now;
  const rep = run.report;
  if (sr.state === "succeeded" && rep?.verified) {
    run.state = "succeeded";
    r.restore.confirmed = {
      actor: run.actor,
      reason: `restore tool ${r.manifest.recovery?.restore_state?.tool} ran (step run ${sr.id}): ${restoreReportWords(rep)}`,
      at: d.now,
    };
    d.accept(
      `[engine] release ${r.id} restored its state: ${restoreReportWords(rep)}; verifying the lanes again`,
      sr.id,
      { restore_state: { step_run_id: sr.id, report: { ...rep } } },
    );
    return true;
  }
  run.state = "failed";
  run.error =
    sr.state !== "succeeded"
      ? (sr.last_error ?? `the restore step run ended ${sr.state}`)
      : "the tool reported no restore it read back";
  holdForRestore(d);
  r.reason = `traffic was rolled back, but the restore tool's run ${sr.id} to point ${run.point} did not restore the state (${run.error}); run it again (${restoreStateCommand(r.id)} --point <point>), or restore by hand and confirm it (${confirmRestoreCommand(r.id)}); until then the release is not rolled back and its lanes stay claimed`;
  d.accept(`[engine] release ${r.id} waits for its restore: ${r.reason}`, sr.id);
  return false;
}

/**
 * `restore_state`: a recoverable release waiting for its restore (`needs_operator`) runs its
 * recipe's restore tool to `point` (default: the recipe's point, else `latest`). Refused when
 * the recipe declares no restore tool, and while the release does not wait for its restore.
 */
export function restoreStateRequested(d: Draft, e: Ev<"restore_state">): Refusal | undefined {
  const r = d.release;
  if (!e.reason.trim()) {
    return {
      status: 422,
      code: "reason_required",
      reason: `[engine] restore_state of ${r.id}: a reason is required (who asked and why): --reason "<why>"`,
      problems: [
        {
          path: "body.reason",
          message: "is required (blank or missing)",
          fix: 'say who asked and why: --reason "<why>"',
        },
      ],
    };
  }
  if (!hasRestoreTool(r)) {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id}'s recipe declares no restore tool (restore_state); ${r.restore && !r.restore.confirmed ? `run its restore action by hand and confirm it (${confirmRestoreCommand(r.id)})` : "there is no state to restore"}`,
    };
  }
  if (!waitingForRestore(r)) {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is ${r.state}${r.restore?.confirmed ? " and its restore is done" : ""}; restore_state runs only while a recoverable release waits for its restore after the traffic rollback`,
    };
  }
  const point = e.point ?? r.manifest.recovery?.restore_state?.point ?? DEFAULT_RESTORE_POINT;
  beginRestoreRun(d, e.actor, e.reason.trim(), point);
  return undefined;
}
