/**
 * The main step's phases 1–7 (docs/runner.md), one function each. Each runs in its own log
 * group (`inPhase`) and returns what it found as data: the next phase's input, or an
 * {@link Outcome} that ends the step.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import * as core from "@actions/core";
import {
  type DispatchPayload,
  PreflightAccepted,
  type PreflightRequest,
} from "../../../engine/src/protocol/messages.ts";
import { payloadDigestOf } from "../../../engine/src/protocol/payload-digest.ts";
import { seedResults } from "../../../scripts/lib/result.ts";
import {
  AllowlistError,
  pinProblem,
  type ResolvedTool,
  resolveTool,
  toolProblem,
} from "./allowlist.ts";
import { annotateError } from "./annotate.ts";
import { errorCode, errorMessage, postSigned, retryPolicy } from "./engine-client.ts";
import { PayloadError, readDispatch } from "./event.ts";
import type { Outcome } from "./finish.ts";
import { credentialOf, type Inputs, readInputs, secretsOf } from "./inputs.ts";
import { makeKeyDir, maskKey, type Provisioned, provisionKey, removeKeyDir } from "./key-file.ts";
import { sendCallback } from "./report.ts";
import { currentToolPid, runTool, type ToolExit, toolEnvironment } from "./run-tool.ts";
import { type CallbackTarget, STATE, save } from "./state.ts";
import { inPhase, type StepContext } from "./step-context.ts";

/** Overall tool deadline unless BATON_TOOL_TIMEOUT_MS says otherwise. */
const DEFAULT_TOOL_TIMEOUT_MS = 20 * 60_000;

/** What phase 2 accepted. */
export interface Validated {
  kind: "valid";
  inputs: Inputs;
  payload: DispatchPayload;
  tool: ResolvedTool;
}

/** Preflight said 200: where and as which attempt to report. */
export interface Accepted {
  kind: "accepted";
  target: CallbackTarget;
  /** A resumable step's last checkpoint, from the preflight's answer; given to the tool. */
  checkpoint?: Record<string, unknown>;
}

/**
 * 1. A fresh directory per run attempt, its result files seeded `not_run` before anything else
 * happens. Returns the result directory (`<attempt dir>/results`).
 */
export function seedPhase(ctx: StepContext): Promise<string> {
  return inPhase(ctx, "1. seed result files", () => {
    mkdirSync(ctx.runnerTemp, { recursive: true });
    const dir = mkdtempSync(
      join(ctx.runnerTemp, `baton-${ctx.runId || "local"}-${ctx.runAttempt}-`),
    );
    seedResults(join(dir, "results"));
    core.info(`result files in ${join(dir, "results")}`);
    return join(dir, "results");
  });
}

/** 2. Inputs, event, payload, allowlist. Any failure is `invalid`: nothing provisioned or run. */
export async function validatePhase(ctx: StepContext): Promise<Validated | Outcome> {
  try {
    return await inPhase(ctx, "2. validate event and payload", () => {
      const inputs = readInputs();
      ctx.engineUrl = inputs.engineUrl;
      maskKey(inputs.sshKey);
      const payload = readDispatch(ctx.env, inputs.engineUrl, inputs.engineOrigin);
      ctx.stepRunId = payload.step_run_id;
      const tool = resolveTool(
        ctx.env.GITHUB_WORKSPACE || process.cwd(),
        inputs.allowlist,
        payload.tool,
      );
      core.info(
        `step run ${payload.step_run_id}, tool ${payload.tool} -> ${tool.path}${tool.pin ? ` (${tool.pin.repository} at ${tool.pin.ref})` : ""}`,
      );
      return { kind: "valid" as const, inputs, payload, tool };
    });
  } catch (e) {
    const problems = e instanceof PayloadError || e instanceof AllowlistError ? e.problems : [];
    return { kind: "invalid", message: (e as Error).message, problems };
  }
}

/**
 * 3. The tool file must be there and executable, and a tool of another repository checked out at
 * its pinned commit. Returns the problem (reported after preflight), or null.
 */
export function verifyToolPhase(ctx: StepContext, v: Validated): Promise<string | null> {
  return inPhase(
    ctx,
    "3. verify tool file",
    () => {
      const problem =
        (v.tool.pin && pinProblem(v.payload.tool, v.tool.pin)) || toolProblem(v.tool.path);
      if (problem) annotateError(problem);
      return problem;
    },
    (p) => (p ? "tool_not_found" : "ok"),
  );
}

/**
 * 4. May this (run id, run attempt) proceed? Only 200 goes on; from then on the post step can
 * report if this step is cut short.
 */
export async function preflightPhase(
  ctx: StepContext,
  v: Validated,
  resultDir: string,
): Promise<Accepted | Outcome> {
  const { payload, inputs } = v;
  const request: PreflightRequest = {
    step_run_id: payload.step_run_id,
    release_id: payload.release.id,
    generation: payload.release.generation,
    manifest_digest: payload.release.manifest_digest,
    dispatch: payload.release.dispatch,
    run_id: ctx.runId,
    run_attempt: ctx.runAttempt,
    sha: ctx.env.GITHUB_SHA ?? "",
    tool: payload.tool,
    // Binds the attempt to this exact work: the engine refuses (409 payload_mismatch) a
    // payload whose tool, args or operation key it did not dispatch.
    payload_digest: payloadDigestOf(payload),
  };
  const url = `${inputs.engineUrl}/v1/releases/step-runs/${payload.step_run_id}/preflight`;
  const pre = await inPhase(
    ctx,
    "4. preflight",
    () =>
      postSigned(url, JSON.stringify(request), credentialOf(inputs), retryPolicy(ctx.env), (l) =>
        core.info(l),
      ),
    (r) => String(r.status || "unreachable"),
  );
  if (pre.status === 409) {
    const reason = errorMessage(pre.text);
    return errorCode(pre.text) === "rerun_declined"
      ? { kind: "rerun_declined", reason }
      : { kind: "declined", reason };
  }
  const accepted = pre.status === 200 ? PreflightAccepted.safeParse(safeJson(pre.text)) : undefined;
  if (!accepted?.success) {
    const why =
      pre.status === 0
        ? `engine unreachable at ${url} after ${pre.attempts} attempt(s): ${pre.error}`
        : `HTTP ${pre.status} from ${url}: ${errorMessage(pre.text)}`;
    const fix =
      pre.status === 401
        ? " (check that callback-secret matches the engine's BATON_CALLBACK_SECRETS)"
        : pre.status === 200
          ? " (a 200 that is not the engine's preflight answer: check that engine-url is the Baton engine's base URL, not a proxy's or a login page's)"
          : "";
    return { kind: "preflight_failed", why: `${why}${fix}` };
  }
  const target: CallbackTarget = {
    url: payload.callback_url,
    step_run_id: payload.step_run_id,
    run_id: ctx.runId,
    run_attempt: ctx.runAttempt,
    attempt: accepted.data.attempt,
    result_dir: resultDir,
    engine_url: inputs.engineUrl,
    // Who ran it: a re-run from the Actions UI keeps GITHUB_ACTOR (the run's starter) and sets
    // GITHUB_TRIGGERING_ACTOR to the person who re-ran the job; the engine records both.
    ...(ctx.env.GITHUB_ACTOR ? { actor: ctx.env.GITHUB_ACTOR } : {}),
    ...(ctx.env.GITHUB_TRIGGERING_ACTOR
      ? { triggering_actor: ctx.env.GITHUB_TRIGGERING_ACTOR }
      : {}),
  };
  save(STATE.callback, JSON.stringify(target));
  save(STATE.timings, JSON.stringify(ctx.timings));
  const checkpoint = accepted.data.checkpoint;
  return { kind: "accepted", target, ...(checkpoint ? { checkpoint } : {}) };
}

/** 5. The SSH key: 0600 file, normalised, masked; an encrypted key without passphrase stops here. */
export function provisionKeyPhase(ctx: StepContext, inputs: Inputs): Promise<Provisioned> {
  return inPhase(
    ctx,
    "5. provision SSH key",
    () => {
      ctx.keyDir = makeKeyDir(ctx.runnerTemp);
      save(STATE.keyDir, ctx.keyDir);
      return provisionKey(ctx.keyDir, inputs.sshKey, inputs.sshPassphrase);
    },
    (p) => (p.ok ? "ok" : p.errorClass),
  );
}

/** 6. The tool, with an overall deadline that leaves time for the report. Removes the key after. */
export function runToolPhase(
  ctx: StepContext,
  v: Validated,
  keyPath: string,
  resultDir: string,
  checkpoint?: Record<string, unknown>,
): Promise<ToolExit> {
  const { payload, inputs } = v;
  const argsPath = join(dirname(resultDir), "args.json");
  // A resumable step continues from the checkpoint the engine answered the preflight with.
  writeFileSync(
    argsPath,
    JSON.stringify(checkpoint ? { ...payload.args, checkpoint } : payload.args),
  );
  const configured = Number(ctx.env.BATON_TOOL_TIMEOUT_MS);
  const timeoutMs = configured > 0 ? configured : DEFAULT_TOOL_TIMEOUT_MS;
  return inPhase(
    ctx,
    "6. run tool",
    async () => {
      ctx.timings.tool_started_at = Date.now();
      save(STATE.timings, JSON.stringify(ctx.timings));
      const running = runTool(
        v.tool.path,
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
        toolEnvironment(ctx.env, {
          BATON_SSH_PASSPHRASE: inputs.sshPassphrase,
          // For the target's generation fence (rule 7); env, so the documented command
          // line of every allowlisted tool stays as it is.
          BATON_RELEASE_ID: payload.release.id,
          BATON_RELEASE_GENERATION: String(payload.release.generation),
        }),
        timeoutMs,
      );
      const pid = currentToolPid();
      if (pid) save(STATE.tool, JSON.stringify({ pid, path: v.tool.path }));
      const exit = await running;
      save(STATE.tool, "");
      ctx.timings.tool_finished_at = exit.finishedAt;
      save(STATE.timings, JSON.stringify(ctx.timings));
      removeKeyDir(ctx.keyDir); // the key is needed by nothing after the tool
      return exit;
    },
    (r) => (r.timedOut ? "timeout" : r.signal ? `signal ${r.signal}` : `exit ${r.exitCode}`),
  );
}

/** 7. Reads the four result files and sends the callback. */
export async function reportPhase(
  ctx: StepContext,
  inputs: Inputs,
  target: CallbackTarget,
): Promise<Outcome> {
  const { results, delivery } = await inPhase(
    ctx,
    "7. report",
    async () => {
      const r = await sendCallback(target, credentialOf(inputs), ctx.timings, secretsOf(inputs));
      if (r.delivery.final) save(STATE.acked, "true");
      ctx.timings.callback_acked_at = Date.now();
      core.info(`[action] ${r.delivery.message}`);
      core.info(`[action] timings ${JSON.stringify(ctx.timings)}`);
      return r;
    },
    (r) => (r.delivery.acked ? `acked ${r.delivery.status}` : `not acked ${r.delivery.status}`),
  );
  return { kind: "reported", results, delivery };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
