/**
 * Phase 2: the triggering event and its payload. Only `repository_dispatch` with action
 * `release-step`, or `workflow_dispatch` with a `step_run_id` input (+ `payload` JSON input),
 * is accepted (F02b). The payload must satisfy `DispatchPayload` and its callback URL must
 * point at the configured engine (same origin, this step run's callback path) (F05).
 */
import { readFileSync } from "node:fs";
import { StepRunId } from "../../../engine/src/protocol/ids.ts";
import { DISPATCH_EVENT_TYPE, DispatchPayload } from "../../../engine/src/protocol/messages.ts";
import { plainZodMessage } from "../../../engine/src/protocol/zod-words.ts";

/** Validation failure: `problems` are `path: message` lines for the log and summary. */
export class PayloadError extends Error {
  constructor(
    message: string,
    readonly problems: string[] = [],
  ) {
    super(message);
  }
}

/** `client_payload.<field>: <what it must be>` per issue, in plain words (protocol/zod-words.ts). */
function problemsOf(error: { issues: { path: PropertyKey[]; message: string }[] }): string[] {
  return error.issues.map(
    (i) =>
      `client_payload.${i.path.map(String).join(".") || "(root)"}: ${plainZodMessage(i.message)}`,
  );
}

/**
 * Reads `GITHUB_EVENT_PATH` for `GITHUB_EVENT_NAME` and returns the validated payload.
 * Throws {@link PayloadError} on any other event, action, or a payload that fails its schema.
 */
export function readDispatch(
  env: NodeJS.ProcessEnv,
  engineUrl: string,
  engineOrigin: string,
): DispatchPayload {
  const name = env.GITHUB_EVENT_NAME ?? "";
  let event: Record<string, unknown>;
  try {
    event = JSON.parse(readFileSync(env.GITHUB_EVENT_PATH ?? "", "utf8"));
  } catch (e) {
    throw new PayloadError(
      `[action] cannot read the event file GITHUB_EVENT_PATH: ${(e as Error).message}`,
    );
  }
  let candidate: unknown;
  if (name === "repository_dispatch") {
    if (event.action !== DISPATCH_EVENT_TYPE) {
      throw new PayloadError(
        `[action] repository_dispatch type '${String(event.action)}' is not '${DISPATCH_EVENT_TYPE}'; this workflow only runs release steps, nothing was provisioned or run`,
      );
    }
    candidate = event.client_payload;
  } else if (name === "workflow_dispatch") {
    const inputs = (event.inputs ?? {}) as Record<string, unknown>;
    const id = StepRunId.safeParse(inputs.step_run_id);
    if (!id.success)
      throw new PayloadError(
        "[action] workflow_dispatch input step_run_id must look like sr_17_6_f",
      );
    try {
      candidate = JSON.parse(String(inputs.payload ?? ""));
    } catch {
      throw new PayloadError(
        "[action] workflow_dispatch input payload must be the step run's dispatch payload as JSON (see the engine's step-run page)",
      );
    }
    if ((candidate as { step_run_id?: unknown })?.step_run_id !== id.data) {
      throw new PayloadError(
        "[action] workflow_dispatch input step_run_id does not match payload.step_run_id",
      );
    }
  } else {
    throw new PayloadError(
      `[action] event '${name}' cannot run a release step; use repository_dispatch (type ${DISPATCH_EVENT_TYPE}) or workflow_dispatch with step_run_id`,
    );
  }
  const parsed = DispatchPayload.safeParse(candidate);
  if (!parsed.success) {
    throw new PayloadError(
      "[action] the dispatch payload is invalid; nothing was provisioned or run",
      problemsOf(parsed.error),
    );
  }
  const payload = parsed.data;
  const cb = new URL(payload.callback_url);
  const expectedPath = `${new URL(engineUrl).pathname.replace(/\/+$/, "")}/v1/releases/step-runs/${payload.step_run_id}/callback`;
  if (cb.origin !== engineOrigin || cb.pathname !== expectedPath || cb.search || cb.hash) {
    throw new PayloadError(
      "[action] the payload's callback_url does not point at the configured engine; nothing was provisioned or run",
      [
        `client_payload.callback_url: origin ${cb.origin} must equal engine-url origin ${engineOrigin} with path ${expectedPath}`,
      ],
    );
  }
  return payload;
}
