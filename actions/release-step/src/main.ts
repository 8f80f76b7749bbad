/**
 * The release-step action's main step: phases 1–7 of docs/runner.md, in order, each in its own
 * log group and recorded. The job fails (exit 1) whenever `overall` is not `pass`, except for a
 * preflight 409 (a fenced or duplicate delivery is not a failure: it ends cleanly, touching nothing).
 */

import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as core from "@actions/core";
import { PreflightAccepted, type PreflightRequest } from "../../../engine/src/protocol/messages.ts";
import { payloadDigestOf } from "../../../engine/src/protocol/payload-digest.ts";
import {
  appendLog,
  type Check,
  readResults,
  seedResults,
  writeChecks,
  writeOutcome,
} from "../../../scripts/lib/result.ts";
import {
  AllowlistError,
  pinProblem,
  type ResolvedTool,
  resolveTool,
  toolProblem,
} from "./allowlist.ts";
import { annotateError, flushAnnotations } from "./annotate.ts";
import { errorCode, errorMessage, postSigned, retryPolicy } from "./engine-client.ts";
import { PayloadError, readDispatch } from "./event.ts";
import { credentialOf, type Inputs, readInputs } from "./inputs.ts";
import { makeKeyDir, maskKey, provisionKey, removeKeyDir } from "./key-file.ts";
import { sendCallback, writeSummary } from "./report.ts";
import {
  OUTPUT_TAIL_CHARS,
  runTool,
  stopCurrentTool,
  type ToolExit,
  toolEnvironment,
} from "./run-tool.ts";
import { type CallbackTarget, STATE, save } from "./state.ts";

/** One recorded phase (name, outcome word, duration in ms). */
interface PhaseRecord {
  name: string;
  outcome: string;
  ms: number;
}

const DEFAULT_TOOL_TIMEOUT_MS = 20 * 60_000;

/** Records a failure of the action itself into the result files (the tool did not decide it). */
function actionFailure(dir: string, status: string, check: Check, keepChecks: boolean): void {
  const current = readResults(dir);
  const existing = keepChecks && Array.isArray(current.checks) ? (current.checks as Check[]) : [];
  writeChecks(dir, [...existing, check]);
  writeOutcome(dir, status, "fail");
  appendLog(dir, check.message ?? status);
}

/** Classifies a tool run that did not end cleanly; null when the files stand as written. */
function judgeToolExit(exit: ToolExit, dir: string): { status: string; check: Check } | null {
  const base = {
    name: "tool",
    exit_code: exit.exitCode,
    signal: exit.signal?.replace(/^SIG/, "") ?? null,
    duration_ms: exit.finishedAt - exit.startedAt,
  };
  if (exit.spawnError || exit.exitCode === 127 || exit.exitCode === 126) {
    return {
      status: "failed",
      check: {
        ...base,
        status: "failed",
        class: "tool_not_found",
        message: `[action] the tool could not be executed (${exit.spawnError ?? `exit ${exit.exitCode}`})`,
      },
    };
  }
  if (exit.timedOut) {
    return {
      status: "timeout",
      check: {
        ...base,
        status: "timeout",
        class: "tool_timeout",
        message: "[action] the tool exceeded its overall deadline and was stopped",
      },
    };
  }
  const files = readResults(dir);
  if (exit.exitCode === 0 && exit.signal === null) return null;
  if (files.status !== "not_run" && files.overall === "fail") return null; // the tool reported its own failure
  return {
    status: "failed",
    check: {
      ...base,
      status: "failed",
      class: "tool_crashed",
      message: `[action] the tool ended with ${exit.signal ? `signal ${exit.signal}` : `exit ${exit.exitCode}`} without reporting a failure; treated as failed`,
    },
  };
}

/** Entry point of dist/index.js. Never throws; ends with process.exitCode set. */
export async function run(): Promise<void> {
  const env = process.env;
  const timings: Record<string, number> = { started_at: Date.now() };
  const phases: PhaseRecord[] = [];
  let stepRunId = "";
  let inputs: Inputs | undefined;
  let keyDir: string | undefined;
  const phase = async <T>(
    name: string,
    fn: () => Promise<T> | T,
    outcome: (v: T) => string = () => "ok",
  ): Promise<T> => {
    const t0 = Date.now();
    try {
      const v = await core.group(name, async () => fn());
      phases.push({ name, outcome: outcome(v), ms: Date.now() - t0 });
      return v;
    } catch (e) {
      phases.push({ name, outcome: "failed", ms: Date.now() - t0 });
      throw e;
    }
  };

  // Cancellation (runner sends SIGINT, then SIGTERM): stop the tool, remove the key, leave the
  // report to the post step, which sends what the files say if no callback was acknowledged.
  const onSignal = (sig: NodeJS.Signals) => {
    core.warning(
      `[action] received ${sig}: stopping the tool; the post step removes the key and reports`,
    );
    const running = stopCurrentTool("SIGTERM");
    removeKeyDir(keyDir);
    if (!running) process.exit(1);
    // Give the tool a moment to record what it saw; the runner's own grace period is 7.5 s.
    setTimeout(() => process.exit(1), 2_000).unref();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  try {
    const runId = env.GITHUB_RUN_ID ?? "";
    const runAttempt = Number(env.GITHUB_RUN_ATTEMPT ?? "1");
    const runnerTemp = env.RUNNER_TEMP || "/tmp";

    // 1. A fresh directory per run attempt, seeded not_run before anything else happens.
    const attemptDir = await phase("1. seed result files", () => {
      mkdirSync(runnerTemp, { recursive: true });
      const dir = mkdtempSync(join(runnerTemp, `baton-${runId || "local"}-${runAttempt}-`));
      seedResults(join(dir, "results"));
      core.info(`result files in ${join(dir, "results")}`);
      return dir;
    });
    const resultDir = join(attemptDir, "results");

    // 2. Inputs, event, payload, allowlist. Any failure here ends the job: nothing provisioned or run.
    let payload: ReturnType<typeof readDispatch>;
    let tool: ResolvedTool;
    try {
      ({ payload, tool } = await phase("2. validate event and payload", () => {
        inputs = readInputs();
        maskKey(inputs.sshKey);
        const p = readDispatch(env, inputs.engineUrl, inputs.engineOrigin);
        stepRunId = p.step_run_id;
        const t = resolveTool(env.GITHUB_WORKSPACE || process.cwd(), inputs.allowlist, p.tool);
        core.info(
          `step run ${p.step_run_id}, tool ${p.tool} -> ${t.path}${t.pin ? ` (${t.pin.repository} at ${t.pin.ref})` : ""}`,
        );
        return { payload: p, tool: t };
      }));
    } catch (e) {
      const problems = e instanceof PayloadError || e instanceof AllowlistError ? e.problems : [];
      annotateError((e as Error).message);
      for (const p of problems) annotateError(p);
      await safeSummary({
        stepRunId,
        engineUrl: inputs?.engineUrl ?? "",
        note: [(e as Error).message, ...problems].join("\n\n"),
        phases,
      });
      core.setOutput("status", "invalid");
      core.setOutput("overall", "fail");
      core.setOutput("step-run-id", stepRunId);
      process.exitCode = 1;
      return;
    }
    const cfg = inputs as Inputs;
    core.setOutput("step-run-id", payload.step_run_id);

    const toolPath = tool.path;
    // 3. The tool file must be there and executable (F06), and a tool of another repository
    // checked out at its pinned commit; the outcome is reported after preflight.
    const missing = await phase(
      "3. verify tool file",
      () => {
        const problem = (tool.pin && pinProblem(payload.tool, tool.pin)) || toolProblem(toolPath);
        if (problem) annotateError(problem);
        return problem;
      },
      (p) => (p ? "tool_not_found" : "ok"),
    );

    // 4. Preflight: may this (run id, run attempt) proceed? Only 200 goes on.
    const request: PreflightRequest = {
      step_run_id: payload.step_run_id,
      release_id: payload.release.id,
      generation: payload.release.generation,
      manifest_digest: payload.release.manifest_digest,
      dispatch: payload.release.dispatch,
      run_id: runId,
      run_attempt: runAttempt,
      sha: env.GITHUB_SHA ?? "",
      tool: payload.tool,
      // Binds the attempt to this exact work: the engine refuses (409 payload_mismatch) a
      // payload whose tool, args or operation key it did not dispatch.
      payload_digest: payloadDigestOf(payload),
    };
    const preflightUrl = `${cfg.engineUrl}/v1/releases/step-runs/${payload.step_run_id}/preflight`;
    const pre = await phase(
      "4. preflight",
      () =>
        postSigned(
          preflightUrl,
          JSON.stringify(request),
          credentialOf(cfg),
          retryPolicy(env),
          (l) => core.info(l),
        ),
      (r) => String(r.status || "unreachable"),
    );
    if (pre.status === 409 && errorCode(pre.text) === "rerun_declined") {
      // A re-run from the Actions UI that the release no longer wants: say so, as a failure,
      // so the job does not look like a successful retry.
      const reason = errorMessage(pre.text);
      core.setFailed(`[action] this re-run was declined: ${reason}`);
      await safeSummary({
        stepRunId,
        engineUrl: cfg.engineUrl,
        note: `Re-run declined (409): ${reason}\n\nNothing was touched.`,
        phases,
      });
      core.setOutput("status", "declined");
      core.setOutput("overall", "fail");
      return;
    }
    if (pre.status === 409) {
      const reason = errorMessage(pre.text);
      core.notice(
        `[action] the engine declined this run (409): ${reason}. Nothing was touched; this is not a failure.`,
      );
      await safeSummary({
        stepRunId,
        engineUrl: cfg.engineUrl,
        note: `Preflight declined (409): ${reason}\n\nNothing was touched.`,
        phases,
      });
      core.setOutput("status", "declined");
      core.setOutput("overall", "fail");
      return;
    }
    const accepted =
      pre.status === 200 ? PreflightAccepted.safeParse(safeJson(pre.text)) : undefined;
    if (!accepted?.success) {
      const why =
        pre.status === 0
          ? `engine unreachable at ${preflightUrl} after ${pre.attempts} attempt(s): ${pre.error}`
          : `HTTP ${pre.status} from ${preflightUrl}: ${errorMessage(pre.text)}`;
      const fix =
        pre.status === 401
          ? " (check that callback-secret matches the engine's BATON_CALLBACK_SECRETS)"
          : "";
      annotateError(`[action] preflight failed, ${why}${fix}; nothing was provisioned or run`);
      await safeSummary({
        stepRunId,
        engineUrl: cfg.engineUrl,
        note: `Preflight failed: ${why}${fix}`,
        phases,
      });
      core.setOutput("status", "preflight_failed");
      core.setOutput("overall", "fail");
      process.exitCode = 1;
      return;
    }
    const target: CallbackTarget = {
      url: payload.callback_url,
      step_run_id: payload.step_run_id,
      run_id: runId,
      run_attempt: runAttempt,
      attempt: accepted.data.attempt,
      result_dir: resultDir,
      engine_url: cfg.engineUrl,
    };
    // From here on the post step can report if this step is cut short.
    save(STATE.callback, JSON.stringify(target));
    save(STATE.timings, JSON.stringify(timings));

    let ready = !missing;
    if (missing)
      actionFailure(
        resultDir,
        "failed",
        { name: "tool", status: "failed", class: "tool_not_found", message: missing },
        false,
      );

    // 5. The SSH key: 0600 file, normalised, masked; encrypted without passphrase stops here.
    let keyPath = "";
    if (ready) {
      const prov = await phase(
        "5. provision SSH key",
        () => {
          keyDir = makeKeyDir(runnerTemp);
          save(STATE.keyDir, keyDir);
          return provisionKey(keyDir, cfg.sshKey, cfg.sshPassphrase);
        },
        (p) => (p.ok ? "ok" : p.errorClass),
      );
      if (prov.ok) keyPath = prov.keyPath;
      else {
        annotateError(prov.message);
        actionFailure(
          resultDir,
          "failed",
          { name: "ssh-key", status: "failed", class: prov.errorClass, message: prov.message },
          false,
        );
        ready = false;
      }
    }

    // 6. The tool, with an overall deadline that leaves time for the report.
    if (ready) {
      const argsPath = join(attemptDir, "args.json");
      writeFileSync(argsPath, JSON.stringify(payload.args));
      const timeoutMs =
        Number(env.BATON_TOOL_TIMEOUT_MS) > 0
          ? Number(env.BATON_TOOL_TIMEOUT_MS)
          : DEFAULT_TOOL_TIMEOUT_MS;
      const exit = await phase(
        "6. run tool",
        async () => {
          timings.tool_started_at = Date.now();
          save(STATE.timings, JSON.stringify(timings));
          const r = await runTool(
            toolPath,
            [
              "--args",
              argsPath,
              "--key",
              keyPath,
              "--result-dir",
              resultDir,
              "--operation-key",
              payload.release.operation_key,
            ],
            toolEnvironment(env, {
              BATON_SSH_PASSPHRASE: cfg.sshPassphrase,
              // For the target's generation fence (rule 7); env, so the documented command
              // line of every allowlisted tool stays as it is.
              BATON_RELEASE_ID: payload.release.id,
              BATON_RELEASE_GENERATION: String(payload.release.generation),
            }),
            timeoutMs,
          );
          timings.tool_finished_at = r.finishedAt;
          save(STATE.timings, JSON.stringify(timings));
          removeKeyDir(keyDir); // the key is needed by nothing after the tool
          return r;
        },
        (r) => (r.timedOut ? "timeout" : r.signal ? `signal ${r.signal}` : `exit ${r.exitCode}`),
      );
      const verdict = judgeToolExit(exit, resultDir);
      if (verdict) {
        annotateError(verdict.check.message as string);
        // The tool did not record this ending itself: keep what it printed (e.g. a stack trace).
        if (exit.outputTail.trim())
          appendLog(
            resultDir,
            `--- tool output (last ${OUTPUT_TAIL_CHARS} characters) ---\n${exit.outputTail}`,
          );
        actionFailure(
          resultDir,
          verdict.status,
          verdict.check,
          verdict.check.class !== "tool_not_found",
        );
      }
    }

    // 7. Report.
    const { results, delivery } = await phase(
      "7. report",
      async () => {
        const r = await sendCallback(target, credentialOf(cfg), timings, secretsOf(cfg));
        if (r.delivery.final) save(STATE.acked, "true");
        timings.callback_acked_at = Date.now();
        core.info(`[action] ${r.delivery.message}`);
        core.info(`[action] timings ${JSON.stringify(timings)}`);
        return r;
      },
      (r) => (r.delivery.acked ? `acked ${r.delivery.status}` : `not acked ${r.delivery.status}`),
    );
    await safeSummary({ stepRunId, engineUrl: cfg.engineUrl, results, delivery, phases });
    core.setOutput("status", results.status);
    core.setOutput("overall", results.overall);
    if (!delivery.final)
      annotateError(`[action] ${delivery.message}; the post step will try once more`);
    else if (!delivery.acked) core.setFailed(`[action] callback refused: ${delivery.message}`);
    if (results.overall !== "pass") {
      // The engine's answer says what comes next (re-run window, compensation, engine retry);
      // without one (the callback was not acknowledged), the step-run page has the truth.
      const next =
        delivery.advice ??
        `see ${cfg.engineUrl}/step-runs/${stepRunId} for what the release does next`;
      core.setFailed(
        `[action] step run ${stepRunId} ${results.status} (overall ${results.overall}); ${next}`,
      );
    }
  } catch (e) {
    core.setFailed(`[action] unexpected error: ${(e as Error).message}`);
  } finally {
    removeKeyDir(keyDir);
    flushAnnotations();
    core.info(`[action] phases: ${phases.map((p) => `${p.name}=${p.outcome}`).join(", ")}`);
  }
}

function secretsOf(cfg: Inputs): string[] {
  const lines = cfg.sshKey
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length >= 8 && !l.startsWith("-----"));
  return [cfg.callbackSecret, cfg.sshPassphrase, ...lines].filter(Boolean);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

async function safeSummary(opts: Parameters<typeof writeSummary>[0]): Promise<void> {
  try {
    await writeSummary(opts);
  } catch (e) {
    core.info(`[action] no job summary written: ${(e as Error).message}`);
  }
}
