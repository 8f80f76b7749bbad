/**
 * What a GitHub-hosted runner hands a JavaScript action for a `repository_dispatch` run:
 * the event file and the environment (GitHub docs, "Variables" > "Default environment
 * variables"; "Events that trigger workflows" > `repository_dispatch`; action inputs as
 * `INPUT_<NAME>` upper-cased with hyphens kept, e.g. `INPUT_SSH-KEY`).
 */
import type { DispatchPayload } from "../../protocol/messages.ts";
import { DISPATCH_EVENT_TYPE } from "../../protocol/messages.ts";

/** The `repository_dispatch` webhook payload as the runner writes it to `GITHUB_EVENT_PATH`. */
export function repositoryDispatchEvent(
  payload: DispatchPayload | Record<string, unknown>,
  repository: string,
  defaultBranch = "main",
): Record<string, unknown> {
  const [owner = "local", name = "baton"] = repository.split("/");
  return {
    action: DISPATCH_EVENT_TYPE,
    branch: defaultBranch,
    client_payload: payload,
    repository: {
      name,
      full_name: repository,
      owner: { login: owner, type: "Organization" },
      default_branch: defaultBranch,
      private: true,
    },
    sender: { login: "baton-local-runner[bot]", type: "Bot" },
  };
}

/** Paths and identities of one attempt of one run. */
export interface RunnerContext {
  repository: string;
  /** Repository root: GITHUB_WORKSPACE and the action's working directory. */
  workspace: string;
  runId: string;
  runAttempt: number;
  /** GITHUB_TRIGGERING_ACTOR: who started this attempt (GITHUB_ACTOR stays the run's starter). */
  triggeringActor?: string;
  runNumber: number;
  sha: string;
  eventPath: string;
  runnerTemp: string;
  outputFile: string;
  summaryFile: string;
  stateFile: string;
  envFile: string;
  pathFile: string;
  /** Runner home (HOME); a per-attempt folder, as a fresh hosted runner would have. */
  home: string;
}

/** The action's inputs by name as in action.yml (`engine-url`, `ssh-key`, …). */
export type ActionInputs = Record<string, string>;

/** Converts inputs to the runner's `INPUT_*` variables (upper case, spaces to `_`, hyphens kept). */
export function inputEnv(inputs: ActionInputs): Record<string, string> {
  return Object.fromEntries(
    Object.entries(inputs).map(([k, v]) => [`INPUT_${k.replace(/ /g, "_").toUpperCase()}`, v]),
  );
}

/**
 * The full environment of the action's main step. `base` is what the host passes through
 * (PATH, locale); nothing else of the engine's environment (its secrets) reaches the action.
 */
export function runnerEnv(
  ctx: RunnerContext,
  inputs: ActionInputs,
  base: Record<string, string>,
): Record<string, string> {
  return {
    ...base,
    CI: "true",
    HOME: ctx.home,
    GITHUB_ACTIONS: "true",
    GITHUB_EVENT_NAME: "repository_dispatch",
    GITHUB_EVENT_PATH: ctx.eventPath,
    GITHUB_REPOSITORY: ctx.repository,
    GITHUB_REPOSITORY_OWNER: ctx.repository.split("/")[0] ?? "local",
    GITHUB_RUN_ID: ctx.runId,
    GITHUB_RUN_ATTEMPT: String(ctx.runAttempt),
    GITHUB_RUN_NUMBER: String(ctx.runNumber),
    GITHUB_SHA: ctx.sha,
    GITHUB_REF: "refs/heads/main",
    GITHUB_REF_NAME: "main",
    GITHUB_REF_TYPE: "branch",
    GITHUB_WORKFLOW: "release-step",
    GITHUB_WORKFLOW_REF: `${ctx.repository}/.github/workflows/release-step.yml@refs/heads/main`,
    GITHUB_JOB: "release-step",
    GITHUB_ACTION: "release-step",
    GITHUB_ACTOR: "baton-local-runner[bot]",
    GITHUB_TRIGGERING_ACTOR: ctx.triggeringActor ?? "baton-local-runner[bot]",
    GITHUB_WORKSPACE: ctx.workspace,
    GITHUB_SERVER_URL: "https://github.com",
    GITHUB_API_URL: "https://api.github.com",
    GITHUB_GRAPHQL_URL: "https://api.github.com/graphql",
    GITHUB_OUTPUT: ctx.outputFile,
    GITHUB_STEP_SUMMARY: ctx.summaryFile,
    GITHUB_STATE: ctx.stateFile,
    GITHUB_ENV: ctx.envFile,
    GITHUB_PATH: ctx.pathFile,
    RUNNER_TEMP: ctx.runnerTemp,
    RUNNER_OS: "Linux",
    RUNNER_ARCH: process.arch === "arm64" ? "ARM64" : "X64",
    RUNNER_NAME: "baton-local-runner",
    RUNNER_ENVIRONMENT: "self-hosted",
    ...inputEnv(inputs),
  };
}
