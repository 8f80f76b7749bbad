/**
 * The post step (always runs, also after cancellation or a failed main step): remove the key
 * directory; if a preflight was accepted but no callback was acknowledged, send what the
 * result files say (`not_run`, partial, or the tool's real result when only the report was cut
 * short, F04).
 */
import * as core from "@actions/core";
import { annotateError, failStep } from "./annotate.ts";
import { credentialOf, readInputs } from "./inputs.ts";
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
        "[action] the main step reported already: its callback was already acknowledged by the engine",
      );
      return;
    }
    const target = JSON.parse(targetText) as CallbackTarget;
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
      [inputs.callbackSecret, inputs.sshPassphrase],
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
