/**
 * The release-step action's main step: phases 1–7 of docs/runner.md in order (phases.ts), then
 * one `finish` of where they ended (finish.ts). The post step (post-main.ts) is phase 8.
 */
import * as core from "@actions/core";
import { appendLog } from "../../../scripts/lib/result.ts";
import { annotate, annotateError, failStep, flushAnnotations } from "./annotate.ts";
import { finish, type Outcome } from "./finish.ts";
import { removeKeyDir } from "./key-file.ts";
import {
  preflightPhase,
  provisionKeyPhase,
  reportPhase,
  runToolPhase,
  seedPhase,
  type Validated,
  validatePhase,
  verifyToolPhase,
} from "./phases.ts";
import { OUTPUT_TAIL_CHARS, stopCurrentTool } from "./run-tool.ts";
import { type CallbackTarget, STATE, save } from "./state.ts";
import { type StepContext, stepContext } from "./step-context.ts";
import { judgeToolExit, recordVerdict } from "./tool-verdict.ts";

/** Entry point of dist/index.js. Never throws; ends with process.exitCode set. */
export async function run(): Promise<void> {
  save(STATE.started, "true");
  const ctx = stepContext(process.env);
  stopOnCancel(ctx);
  try {
    await finish(ctx, await runPhases(ctx));
  } catch (e) {
    failStep(`[action] unexpected error: ${(e as Error).message}`);
  } finally {
    removeKeyDir(ctx.keyDir);
    flushAnnotations();
    core.info(`[action] phases: ${ctx.phases.map((p) => `${p.name}=${p.outcome}`).join(", ")}`);
  }
}

/** Phases 1–7; returns where they ended. */
async function runPhases(ctx: StepContext): Promise<Outcome> {
  const resultDir = await seedPhase(ctx);
  const valid = await validatePhase(ctx);
  if (valid.kind !== "valid") return valid;
  core.setOutput("step-run-id", valid.payload.step_run_id);
  const missing = await verifyToolPhase(ctx, valid);
  const pre = await preflightPhase(ctx, valid, resultDir);
  if (pre.kind !== "accepted") return pre;
  await work(ctx, valid, pre.target, missing, pre.checkpoint);
  return reportPhase(ctx, valid.inputs, pre.target);
}

/**
 * Phases 5 and 6, when the tool is there. What the action decides itself (a missing tool, an
 * unusable key, a tool that crashed or ran out of time) goes into the result files for phase 7.
 */
async function work(
  ctx: StepContext,
  v: Validated,
  target: CallbackTarget,
  missing: string | null,
  checkpoint?: Record<string, unknown>,
): Promise<void> {
  const dir = target.result_dir;
  const failed = (name: string, errorClass: string, message: string) =>
    recordVerdict(
      dir,
      { status: "failed", check: { name, status: "failed", class: errorClass, message } },
      false,
    );
  if (missing) return failed("tool", "tool_not_found", missing);
  const key = await provisionKeyPhase(ctx, v.inputs);
  if (!key.ok) {
    annotateError(key.message);
    return failed("ssh-key", key.errorClass, key.message);
  }
  const exit = await runToolPhase(ctx, v, key.keyPath, dir, checkpoint);
  const verdict = judgeToolExit(exit, dir);
  if (!verdict) return;
  annotateError(verdict.check.message as string);
  // The tool did not record this ending itself: keep what it printed (e.g. a stack trace).
  if (exit.outputTail.trim())
    appendLog(
      dir,
      `--- tool output (last ${OUTPUT_TAIL_CHARS} characters) ---\n${exit.outputTail}`,
    );
  recordVerdict(dir, verdict, verdict.check.class !== "tool_not_found");
}

/**
 * Cancellation (the runner sends SIGINT, then SIGTERM): stop the tool (SIGTERM to its process
 * group, SIGKILL 2 s later), remove the key, and leave the report to the post step, which sends
 * what the files say if no callback was acknowledged.
 */
function stopOnCancel(ctx: StepContext): void {
  const onSignal = (sig: NodeJS.Signals) => {
    annotate(
      "warning",
      `[action] received ${sig}: stopping the tool; the post step removes the key and reports`,
    );
    const running = stopCurrentTool("SIGTERM");
    removeKeyDir(ctx.keyDir);
    if (!running) process.exit(1);
    // Give the tool a moment to record what it saw (the runner's own grace period is 7.5 s),
    // then stop what is left of its process group: a tool that ignores SIGTERM must not keep
    // working on a lane while the post step reports it as not run.
    setTimeout(() => {
      stopCurrentTool("SIGKILL");
      process.exit(1);
    }, 2_000).unref();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}
