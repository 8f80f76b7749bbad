/**
 * The post step (always runs, also after cancellation or a failed main step): remove the key
 * directory; if a preflight was accepted but no callback was acknowledged, send what the
 * result files say (`not_run`, partial, or the tool's real result when only the report was cut
 * short, F04).
 */
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import * as core from "@actions/core";
import { annotateError, failStep } from "./annotate.ts";
import { credentialOf, readInputs, secretsOf } from "./inputs.ts";
import { removeKeyDir } from "./key-file.ts";
import { type CallbackTarget, load, STATE } from "./state.ts";

/** Entry point of dist/post.js. Never throws. */
export async function runPost(): Promise<void> {
  try {
    const keyDir = load(STATE.keyDir);
    if (keyDir) {
      removeKeyDir(keyDir);
      core.info("[action] SSH key directory removed");
    }
    const targetText = load(STATE.callback);
    if (!targetText) {
      core.info(
        load(STATE.started) === "true"
          ? "[action] the main step had no preflight accepted: nothing to report"
          : "[action] the post step got no state from the main step (it did not start, or the runner did not pass the state it saved): nothing to report from here",
      );
      return;
    }
    if (load(STATE.acked) === "true") {
      core.info(
        "[action] the main step reported already: the engine gave its final answer to the callback (accepted or refused: the main step's log says which); nothing to send again",
      );
      return;
    }
    const target = JSON.parse(targetText) as CallbackTarget;
    if (await stopLeftoverTool())
      (await import("./tool-verdict.ts")).recordVerdict(
        target.result_dir,
        {
          status: "cancelled",
          check: {
            name: "tool",
            status: "cancelled",
            class: "tool_stopped",
            message:
              "[action] the main step ended while the tool ran; the post step stopped what was left of it: what it did on the lane before that is not known",
          },
        },
        true,
      );
    // Loaded only here: a post step after a main step that reported (the usual case) starts
    // without compiling the callback's schemas and HTTP client (its own chunk of the bundle).
    const { sendCallback } = await import("./report.ts");
    const inputs = readInputs();
    let timings: Record<string, number> = {};
    try {
      timings = JSON.parse(load(STATE.timings) || "{}");
    } catch {}
    core.info(
      `[action] the main step did not deliver a callback for ${target.step_run_id}; sending what the result files say`,
    );
    const { results, delivery } = await sendCallback(
      target,
      credentialOf(inputs),
      { ...timings, from_post: 1 },
      secretsOf(inputs),
    );
    core.info(
      `[action] post callback: status ${results.status}, overall ${results.overall}; ${delivery.message}`,
    );
    if (delivery.advice)
      annotateError(`[action] step run ${target.step_run_id}: ${delivery.advice}`);
    if (!delivery.acked)
      failStep(
        `[action] ${delivery.message}; the engine will mark the step run unknown at its deadline`,
      );
  } catch (e) {
    failStep(`[action] post step error: ${(e as Error).message}`);
  }
}

/**
 * A main step killed while its tool ran (SIGKILL, or the runner's last resort) leaves the tool
 * running in its own process group. Before reporting, the post step stops it (SIGKILL to the
 * group, then waits up to 2 s for it to go), so that what it reports is what happened and
 * nothing keeps working on a lane after the job. Returns whether it stopped one. The saved pid counts only while it still
 * names that tool: a live leader's command line (Linux /proc) must contain the tool's file.
 */
async function stopLeftoverTool(): Promise<boolean> {
  let tool: { pid?: unknown; path?: unknown };
  try {
    tool = JSON.parse(load(STATE.tool) || "{}");
  } catch {
    return false;
  }
  const { pid, path } = tool;
  if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 1 || typeof path !== "string")
    return false;
  const alive = () => {
    try {
      process.kill(-pid, 0);
    } catch {
      return false;
    }
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(path);
    } catch {
      // The leader is gone (or there is no /proc, as on macOS) but its group is not: a group's
      // id is not given to another process while the group exists, so it is still the tool's.
      return true;
    }
  };
  if (!alive()) return false;
  core.warning(
    `[action] the tool (process group ${pid}) was still running after the main step ended: stopping it before reporting`,
  );
  try {
    process.kill(-pid, "SIGKILL");
  } catch {}
  for (let i = 0; i < 20 && alive(); i++) await sleep(100);
  return true;
}
