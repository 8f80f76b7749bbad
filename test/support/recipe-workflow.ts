/**
 * The recipe workflow's start step (`.github/workflows/recipe.yml`, job `start`, the step whose
 * `run:` calls `baton start-pending`), run as a GitHub runner runs a `run:` step: bash with
 * `--noprofile --norc -e -o pipefail`, in the checkout (made one first: `asCheckout`), with the
 * given environment.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { bundled } from "./bundles.ts";
import { REPO } from "./standin-target.ts";

const workflow = parse(readFileSync(join(REPO, ".github/workflows/recipe.yml"), "utf8")) as {
  jobs: { start: { steps: { run?: string }[] } };
};

/** The `run:` script of the start job's start-pending step (throws if the workflow lost it). */
export const START_STEP: string = (() => {
  const run = workflow.jobs.start.steps.find((s) => s.run?.includes("start-pending"))?.run;
  if (!run) throw new Error("recipe.yml: the start job has no step that runs start-pending");
  return run;
})();

/**
 * Makes `cwd` what actions/checkout leaves: a git checkout whose HEAD holds every file there. A
 * folder that is no checkout yet becomes one; changes since its last commit are committed (a
 * new push). The start step passes `--commit` and start-pending refuses files HEAD lacks.
 */
export function asCheckout(cwd: string): void {
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: "t",
    GIT_AUTHOR_EMAIL: "t@example.com",
    GIT_COMMITTER_NAME: "t",
    GIT_COMMITTER_EMAIL: "t@example.com",
  };
  const git = (...args: string[]) =>
    execFileSync("git", ["-C", cwd, ...args], { encoding: "utf8", env }).trim();
  if (!existsSync(join(cwd, ".git"))) git("init", "-q", "-b", "main");
  if (git("status", "--porcelain") !== "") {
    git("add", "-A");
    git("commit", "-q", "-m", "push");
  }
}

/**
 * Runs `argv` (default: the start step as a runner runs a `run:` step) in `cwd` with `PATH`,
 * `HOME`, `RUNNER_TEMP=cwd`, `BATON_BIN` (this checkout's CLI, bundled: test/support/bundles.ts) and `env`; killed after
 * `timeoutMs` (default 90,000). Resolves with the exit code (null when killed) and
 * stdout+stderr together.
 */
export async function runWorkflowStep(
  cwd: string,
  env: Record<string, string>,
  o: { argv?: string[]; timeoutMs?: number } = {},
): Promise<{ code: number | null; out: string }> {
  if (!o.argv) asCheckout(cwd);
  const [cmd, ...args] = o.argv ?? [
    "bash",
    "--noprofile",
    "--norc",
    "-e",
    "-o",
    "pipefail",
    "-c",
    START_STEP,
  ];
  const child = spawn(cmd as string, args, {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      RUNNER_TEMP: cwd,
      BATON_BIN: await bundled("engine/src/cli/main.ts"),
      ...env,
    },
  });
  let out = "";
  child.stdout.on("data", (d) => {
    out += d;
  });
  child.stderr.on("data", (d) => {
    out += d;
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), o.timeoutMs ?? 90_000);
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  clearTimeout(timer);
  return { code, out };
}
