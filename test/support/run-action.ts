/**
 * Runs the bundled release-step action the way a GitHub runner does: an event file,
 * `INPUT_<NAME>` variables (hyphens kept, e.g. `INPUT_SSH-KEY`), GITHUB_OUTPUT / GITHUB_STATE /
 * GITHUB_STEP_SUMMARY / GITHUB_ENV files, RUNNER_TEMP, GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT,
 * GITHUB_SHA; then the post step with the main step's saved state as `STATE_<name>` and the
 * same inputs. Optionally signals the main step when its output matches, like a cancellation.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { REPO } from "./standin-target.ts";

export const ACTION_MAIN = join(REPO, "actions/release-step/dist/index.js");
export const ACTION_POST = join(REPO, "actions/release-step/dist/post.js");

/**
 * The allowlist of tests and benchmarks (relative to the repository): the production tools plus
 * the test-only `noop`, which scripts/release/allowlist.json does not name.
 */
export const TEST_ALLOWLIST = "test/support/tools-allowlist.json";

export interface StepResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface ActionRun {
  main: StepResult;
  post: StepResult | null;
  outputs: Record<string, string>;
  state: Record<string, string>;
  summary: string;
  /** Directory that stood in for this job's files (event, outputs, state). */
  jobDir: string;
  /** With `post: false`: runs the post step later (e.g. after another attempt). */
  runPost(): Promise<StepResult>;
}

export interface RunActionOptions {
  runnerTemp: string;
  eventName: string;
  event: unknown;
  inputs: Record<string, string>;
  runId?: string;
  runAttempt?: number;
  sha?: string;
  workspace?: string;
  env?: Record<string, string>;
  /** Send `signal` to the main step once its stdout matches `when`. */
  cancel?: { when: RegExp; signal: NodeJS.Signals };
  /** Run the post step (default true). */
  post?: boolean;
}

/** Parses a runner file-command file (`name<<delimiter\nvalue\ndelimiter`, or `name=value`). */
export function parseFileCommands(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const heredoc = /^([^=<]+)<<(.+)$/.exec(line);
    if (heredoc) {
      const [, name, delim] = heredoc;
      const value: string[] = [];
      for (i++; i < lines.length && lines[i] !== delim; i++) value.push(lines[i] as string);
      out[name as string] = value.join("\n");
    } else if (line.includes("=")) {
      const at = line.indexOf("=");
      out[line.slice(0, at)] = line.slice(at + 1);
    }
  }
  return out;
}

function step(
  script: string,
  env: NodeJS.ProcessEnv,
  cancel?: RunActionOptions["cancel"],
): Promise<StepResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let signalled = false;
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      if (cancel && !signalled && cancel.when.test(stdout)) {
        signalled = true;
        child.kill(cancel.signal);
      }
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    // Bounded like a job timeout: a hung step is killed after 120 s.
    const guard = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.on("close", (code, signal) => {
      clearTimeout(guard);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** The job's files and the main step's environment, as a runner prepares them. */
export function prepareJob(o: RunActionOptions) {
  const jobDir = mkdtempSync(join(o.runnerTemp, "job-"));
  const files = {
    event: join(jobDir, "event.json"),
    output: join(jobDir, "output"),
    state: join(jobDir, "state"),
    summary: join(jobDir, "summary.md"),
    envFile: join(jobDir, "env"),
  };
  writeFileSync(files.event, JSON.stringify(o.event));
  for (const f of [files.output, files.state, files.summary, files.envFile]) writeFileSync(f, "");
  const inputs = Object.fromEntries(
    Object.entries(o.inputs).map(([k, v]) => [`INPUT_${k.toUpperCase()}`, v]),
  );
  const base: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    CI: "true",
    GITHUB_ACTIONS: "true",
    GITHUB_EVENT_NAME: o.eventName,
    GITHUB_EVENT_PATH: files.event,
    GITHUB_OUTPUT: files.output,
    GITHUB_STATE: files.state,
    GITHUB_STEP_SUMMARY: files.summary,
    GITHUB_ENV: files.envFile,
    GITHUB_WORKSPACE: o.workspace ?? REPO,
    GITHUB_REPOSITORY: "acme/fleet",
    GITHUB_RUN_ID: o.runId ?? "9001",
    GITHUB_RUN_ATTEMPT: String(o.runAttempt ?? 1),
    GITHUB_SHA: o.sha ?? "0123456789abcdef0123456789abcdef01234567",
    RUNNER_TEMP: o.runnerTemp,
    ...inputs,
    ...o.env,
  };
  return { jobDir, files, base };
}

/** Runs main, then (by default) post. */
export async function runAction(o: RunActionOptions): Promise<ActionRun> {
  const { jobDir, files, base } = prepareJob(o);
  const main = await step(ACTION_MAIN, base, o.cancel);
  const state = parseFileCommands(readFileSync(files.state, "utf8"));
  const stateEnv = Object.fromEntries(Object.entries(state).map(([k, v]) => [`STATE_${k}`, v]));
  const runPost = () =>
    step(ACTION_POST, { ...base, ...stateEnv, GITHUB_STATE: join(jobDir, "post-state") });
  const post = o.post !== false ? await runPost() : null;
  return {
    runPost,
    main,
    post,
    outputs: parseFileCommands(readFileSync(files.output, "utf8")),
    state,
    summary: readFileSync(files.summary, "utf8"),
    jobDir,
  };
}
