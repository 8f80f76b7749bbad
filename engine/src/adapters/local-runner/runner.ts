/**
 * The local runner: a Dispatcher that performs each dispatch by running the bundled
 * release-step action exactly as a GitHub runner would — the `repository_dispatch` event
 * file, the runner's environment and file commands, `node dist/index.js`, then the post
 * step `node dist/post.js` with the main step's saved state — so the embedded default
 * exercises the real action, the real tools and the real SSH path.
 *
 * Like GitHub, `dispatch()` answers as soon as the run is queued (GitHub's 204); the run
 * happens in the background, bounded in time. Re-runs (`rerun`) keep the run id and raise
 * `GITHUB_RUN_ATTEMPT`. Knobs simulate what GitHub does to us: a dispatch accepted but never
 * run (failure case F02a), a duplicate delivery, and a cancelled run (F04).
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import type { Dispatcher, DispatchResult } from "../../ports/dispatcher.ts";
import { DISPATCH_EVENT_TYPE, DispatchPayload } from "../../protocol/messages.ts";
import { checkDispatchLimits } from "../github/limits.ts";
import { parseCommandFile, stateToEnv } from "./command-files.ts";
import {
  type ActionInputs,
  type RunnerContext,
  repositoryDispatchEvent,
  runnerEnv,
} from "./environment.ts";
import { MaskingLineWriter, MaskSet } from "./mask.ts";
import { type StepExit, type StepHandle, startStep } from "./step-process.ts";

export interface LocalRunnerOptions {
  /** Repository root: GITHUB_WORKSPACE, where the action and the tools are. */
  repoRoot: string;
  /** The action's inputs as the workflow passes them (`engine-url`, `callback-secret`, `ssh-key`, …). */
  inputs: ActionInputs;
  /** Folder for per-attempt files (event file, RUNNER_TEMP, command files). */
  workDir: string;
  /** Folder for one log per attempt; default `<workDir>/logs`. */
  logDir?: string;
  /** `owner/name` reported as GITHUB_REPOSITORY; default `local/baton`. */
  repository?: string;
  /** Folder holding action.yml and dist/; default `<repoRoot>/actions/release-step`. */
  actionDir?: string;
  /** GITHUB_SHA; default `git rev-parse HEAD` of repoRoot (sha1 of "local" without git). */
  sha?: string;
  /** Bound of the main step (ms), like a job's `timeout-minutes`; default 10 minutes. */
  runTimeoutMs?: number;
  /** Bound of the post step (ms); default 60 s. */
  postTimeoutMs?: number;
  /** Runs executing at once (more wait queued, like runners busy); default 4. */
  maxConcurrentRuns?: number;
  /** Extra environment for both steps (e.g. test knobs). The engine's own env is not passed. */
  env?: Record<string, string>;
  /** Told about every change of a run (queued, started, finished, never_ran). */
  onEvent?: (event: LocalRunEvent) => void;
}

export type LocalRunState = "queued" | "running" | "completed" | "never_ran";
export type LocalRunConclusion = "success" | "failure" | "cancelled" | "timed_out";

/** The login the local runner starts runs as (GITHUB_ACTOR, and GITHUB_TRIGGERING_ACTOR of first attempts). */
export const RUNNER_ACTOR = "baton-local-runner[bot]";

/** One attempt of one run, as the Actions UI would show it. */
export interface LocalRun {
  runId: string;
  attempt: number;
  /** Who started this attempt (GITHUB_TRIGGERING_ACTOR): the run's bot, or who re-ran it. */
  triggeringActor: string;
  stepRunId: string;
  payload: DispatchPayload;
  state: LocalRunState;
  conclusion?: LocalRunConclusion;
  main?: StepExit;
  post?: StepExit;
  /** Outputs the main step set (`status`, `overall`, `step-run-id`). */
  outputs: Record<string, string>;
  /** Per-attempt folder, the log file (masked stdout/stderr of both steps), the job summary. */
  dir: string;
  logFile: string;
  summaryFile: string;
  queuedAt: number;
  startedAt?: number;
  finishedAt?: number;
}

export interface LocalRunEvent {
  type: "queued" | "started" | "finished" | "never_ran";
  run: LocalRun;
}

const COMPONENT = "[local-runner]";
/** Host variables a hosted runner also has; nothing else of the engine's environment. */
const PASSED_THROUGH = ["PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SYSTEMROOT"];
/** Inputs GitHub would mask because they come from secrets. */
const SECRET_INPUTS = ["callback-secret", "ssh-key", "ssh-passphrase"];

interface ActionMetadata {
  main: string;
  post: string | null;
  defaults: Record<string, string>;
}

/** Runs dispatched step runs through the real action bundle, in the background. */
export class LocalRunner implements Dispatcher {
  private readonly repoRoot: string;
  private readonly actionDir: string;
  private readonly repository: string;
  private readonly logDir: string;
  private readonly sha: string;
  private readonly runs: LocalRun[] = [];
  private readonly queue: LocalRun[] = [];
  private readonly active = new Map<LocalRun, { step?: StepHandle; done: Promise<void> }>();
  private readonly idleWaiters: (() => void)[] = [];
  private neverRunRules: { match: (p: DispatchPayload) => boolean; times: number }[] = [];
  private duplicates = 0;
  private lastRunId = 0;
  private runNumber = 0;
  private closed = false;

  constructor(private readonly options: LocalRunnerOptions) {
    this.repoRoot = resolve(options.repoRoot);
    this.actionDir = resolve(options.actionDir ?? join(this.repoRoot, "actions/release-step"));
    this.repository = options.repository ?? "local/baton";
    this.logDir = resolve(options.logDir ?? join(options.workDir, "logs"));
    this.sha = options.sha ?? headSha(this.repoRoot);
    mkdirSync(this.logDir, { recursive: true });
  }

  /** GITHUB_SHA the runs report (what a recipe's `tool_revision` is compared with). */
  get commitSha(): string {
    return this.sha;
  }

  /**
   * Queues a run of the action for `payload` and answers at once, like GitHub's 204.
   * A payload over GitHub's limits or off the wire schema is refused as GitHub would (422).
   */
  async dispatch(payload: DispatchPayload): Promise<DispatchResult> {
    const id = (payload as { step_run_id?: unknown })?.step_run_id;
    const stepRunId = typeof id === "string" ? id : "(no step_run_id)";
    if (this.closed) {
      return {
        ok: false,
        retryable: true,
        status: 503,
        message: `${COMPONENT} dispatch of ${stepRunId} refused: the local runner is shut down; the same step run will be sent again`,
      };
    }
    const violations = checkDispatchLimits(DISPATCH_EVENT_TYPE, payload);
    const parsed = DispatchPayload.safeParse(payload);
    if (violations.length > 0 || !parsed.success) {
      const why =
        violations.length > 0
          ? violations.map((v) => `${v.field}: ${v.githubMessage}`).join("; ")
          : parsed
              .error!.issues.map((i) => `client_payload.${i.path.join(".")} ${i.message}`)
              .join("; ");
      return {
        ok: false,
        retryable: false,
        status: 422,
        message: `${COMPONENT} dispatch of ${stepRunId} refused (HTTP 422): ${why}`,
      };
    }
    const rule = this.neverRunRules.find((r) => r.times > 0 && r.match(parsed.data));
    if (rule) {
      rule.times -= 1;
      const run = this.newRun(parsed.data, this.nextRunId(), 1);
      run.state = "never_ran";
      this.emit("never_ran", run);
      return { ok: true };
    }
    this.enqueue(this.newRun(parsed.data, this.nextRunId(), 1));
    if (this.duplicates > 0) {
      // GitHub may deliver one dispatch twice: two runs with different run ids.
      this.duplicates -= 1;
      this.enqueue(this.newRun(parsed.data, this.nextRunId(), 1));
    }
    return { ok: true };
  }

  /**
   * Re-runs a finished run ("Re-run jobs" in the Actions UI): same run id and payload,
   * attempt + 1, fresh runner folders; `by` is who re-ran it (GITHUB_TRIGGERING_ACTOR of the new
   * attempt; GITHUB_ACTOR stays the run's starter, as on GitHub).
   * @throws Error when the run is unknown, never ran, or is still queued or running.
   */
  rerun(runId: string, by: string = RUNNER_ACTOR): { runId: string; attempt: number } {
    const latest = this.runs.filter((r) => r.runId === runId).at(-1);
    if (!latest) throw new Error(`${COMPONENT} no run ${runId}; list runs with runner.list()`);
    if (latest.state === "never_ran")
      throw new Error(
        `${COMPONENT} run ${runId} never started, so it cannot be re-run; dispatch the step run again`,
      );
    if (latest.state !== "completed")
      throw new Error(
        `${COMPONENT} run ${runId} attempt ${latest.attempt} is still ${latest.state}; re-run it after it completes`,
      );
    const run = this.newRun(latest.payload, runId, latest.attempt + 1, by);
    this.enqueue(run);
    return { runId, attempt: run.attempt };
  }

  /** Cancels a queued or running attempt; its post step still runs (as on GitHub). */
  cancel(runId: string): boolean {
    const run = this.runs.filter((r) => r.runId === runId).at(-1);
    if (!run) return false;
    if (run.state === "queued") {
      this.queue.splice(this.queue.indexOf(run), 1);
      this.finish(run, "cancelled");
      this.pump();
      return true;
    }
    const a = this.active.get(run);
    if (!a) return false;
    run.conclusion = "cancelled";
    a.step?.cancel();
    return true;
  }

  /** The next `times` dispatches matching `match` answer 204 but never run (failure case F02a). */
  acceptButNeverRun(match: (p: DispatchPayload) => boolean = () => true, times = 1): void {
    this.neverRunRules.push({ match, times });
  }

  /** The next `times` dispatches are delivered twice, with two different run ids. */
  deliverTwice(times = 1): void {
    this.duplicates += times;
  }

  /** Every attempt so far, oldest first (copies are not made: treat as read-only). */
  list(): readonly LocalRun[] {
    return this.runs;
  }

  /** Attempts of the runs of one step run, oldest first. */
  runsOf(stepRunId: string): LocalRun[] {
    return this.runs.filter((r) => r.stepRunId === stepRunId);
  }

  /**
   * Resolves when nothing is queued or running.
   * @throws Error after `timeoutMs` (default 120,000) if runs are still going.
   */
  async idle(timeoutMs = 120_000): Promise<void> {
    if (this.queue.length === 0 && this.active.size === 0) return;
    await new Promise<void>((ok, fail) => {
      const timer = setTimeout(
        () => fail(new Error(`${COMPONENT} runs still going after ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        ok();
      });
    });
  }

  /** Stops accepting dispatches, drops queued runs, cancels running ones and waits for them. */
  async close(): Promise<void> {
    this.closed = true;
    for (const run of this.queue.splice(0)) this.finish(run, "cancelled");
    this.pump();
    for (const [run, a] of this.active) {
      run.conclusion = "cancelled";
      a.step?.cancel();
    }
    await Promise.all([...this.active.values()].map((a) => a.done));
  }

  private nextRunId(): string {
    // Digits like GitHub's run ids; time-based so ids stay unique across engine restarts.
    this.lastRunId = Math.max(this.lastRunId + 1, Date.now() * 1000);
    return String(this.lastRunId);
  }

  private newRun(
    payload: DispatchPayload,
    runId: string,
    attempt: number,
    triggeringActor: string = RUNNER_ACTOR,
  ): LocalRun {
    const dir = join(resolve(this.options.workDir), `run-${runId}-${attempt}`);
    const run: LocalRun = {
      runId,
      attempt,
      triggeringActor,
      stepRunId: payload.step_run_id,
      payload,
      state: "queued",
      outputs: {},
      dir,
      logFile: join(this.logDir, `${runId}-${attempt}.log`),
      summaryFile: join(dir, "summary.md"),
      queuedAt: Date.now(),
    };
    this.runs.push(run);
    return run;
  }

  private enqueue(run: LocalRun): void {
    this.queue.push(run);
    this.emit("queued", run);
    this.pump();
  }

  private pump(): void {
    const max = this.options.maxConcurrentRuns ?? 4;
    while (!this.closed && this.active.size < max && this.queue.length > 0) {
      const run = this.queue.shift()!;
      const slot: { step?: StepHandle; done: Promise<void> } = { done: Promise.resolve() };
      this.active.set(run, slot);
      slot.done = this.execute(run, slot)
        .catch((e: unknown) => {
          appendFileSync(
            run.logFile,
            `${COMPONENT} run failed to execute: ${e instanceof Error ? e.message : String(e)}\n`,
          );
          run.conclusion ??= "failure";
        })
        .finally(() => {
          this.active.delete(run);
          this.finish(run, run.conclusion ?? "failure");
          this.pump();
        });
    }
    if (this.queue.length === 0 && this.active.size === 0) {
      for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  private finish(run: LocalRun, conclusion: LocalRunConclusion): void {
    run.state = "completed";
    run.conclusion = conclusion;
    run.finishedAt = Date.now();
    this.emit("finished", run);
  }

  private emit(type: LocalRunEvent["type"], run: LocalRun): void {
    try {
      this.options.onEvent?.({ type, run });
    } catch {
      // A listener's failure must not stop a run.
    }
  }

  private metadata(): ActionMetadata {
    const file = join(this.actionDir, "action.yml");
    const meta: ActionMetadata = { main: "dist/index.js", post: "dist/post.js", defaults: {} };
    if (!existsSync(file)) return meta;
    const doc = parseYaml(readFileSync(file, "utf8")) as {
      runs?: { main?: string; post?: string };
      inputs?: Record<string, { default?: unknown }>;
    };
    if (doc?.runs?.main) meta.main = doc.runs.main;
    meta.post = doc?.runs?.post ?? null;
    for (const [name, spec] of Object.entries(doc?.inputs ?? {})) {
      if (spec?.default !== undefined && spec.default !== null)
        meta.defaults[name] = String(spec.default);
    }
    return meta;
  }

  private async execute(run: LocalRun, slot: { step?: StepHandle }): Promise<void> {
    run.state = "running";
    run.startedAt = Date.now();
    this.emit("started", run);
    const meta = this.metadata();
    const ctx = this.prepare(run);
    const inputs = { ...meta.defaults, ...this.options.inputs };
    const base: Record<string, string> = {};
    for (const k of PASSED_THROUGH) if (process.env[k]) base[k] = process.env[k]!;
    const env = { ...runnerEnv(ctx, inputs, base), ...this.options.env };
    const masks = new MaskSet();
    for (const k of SECRET_INPUTS) if (inputs[k]) masks.add(inputs[k]);
    const log = (line: string) => appendFileSync(run.logFile, line);
    const writers = () =>
      [new MaskingLineWriter(masks, log, true), new MaskingLineWriter(masks, log, false)] as const;

    log(
      `${COMPONENT} run ${run.runId} attempt ${run.attempt} of step run ${run.stepRunId} (tool ${run.payload.tool}) at ${new Date().toISOString()}\n`,
    );
    log(`${COMPONENT} main: node ${meta.main}\n`);
    const mainFile = join(this.actionDir, meta.main);
    if (!existsSync(mainFile)) {
      // What GitHub shows when an action's entry file is missing; say how to produce it.
      log(
        `${COMPONENT} the action's main file ${mainFile} is missing; build the bundle with npm run build\n`,
      );
      run.conclusion = "failure";
      return;
    }
    const [mo, me] = writers();
    slot.step = startStep(
      mainFile,
      this.repoRoot,
      env,
      this.options.runTimeoutMs ?? 600_000,
      mo,
      me,
    );
    run.main = await slot.step.exit;
    log(`${COMPONENT} main ended: ${describeExit(run.main)}\n`);
    run.outputs = safeParseFile(ctx.outputFile, log);

    if (meta.post) {
      // The post step gets the main step's saved state as STATE_*, and its exported env.
      const exported = safeParseFile(ctx.envFile, log);
      const addedPath = existsSync(ctx.pathFile)
        ? readFileSync(ctx.pathFile, "utf8")
            .split(/\r?\n/)
            .filter((l) => l.trim() !== "")
        : [];
      const postEnv: Record<string, string> = {
        ...env,
        ...exported,
        // GITHUB_PATH lines go first on PATH for later steps, newest first (runner behaviour).
        PATH: [...addedPath.reverse(), exported.PATH ?? env.PATH ?? ""].filter(Boolean).join(":"),
        ...stateToEnv(safeParseFile(ctx.stateFile, log)),
        GITHUB_OUTPUT: `${ctx.outputFile}.post`,
        GITHUB_STATE: `${ctx.stateFile}.post`,
        GITHUB_STEP_SUMMARY: `${ctx.summaryFile}.post`,
      };
      for (const f of [postEnv.GITHUB_OUTPUT!, postEnv.GITHUB_STATE!, postEnv.GITHUB_STEP_SUMMARY!])
        writeFileSync(f, "");
      log(`${COMPONENT} post: node ${meta.post}\n`);
      const [po, pe] = writers();
      slot.step = startStep(
        join(this.actionDir, meta.post),
        this.repoRoot,
        postEnv,
        this.options.postTimeoutMs ?? 60_000,
        po,
        pe,
      );
      run.post = await slot.step.exit;
      log(`${COMPONENT} post ended: ${describeExit(run.post)}\n`);
    }
    // One job summary from both steps, as the run page shows it.
    const summary = [ctx.summaryFile, `${ctx.summaryFile}.post`]
      .filter((f) => existsSync(f))
      .map((f) => readFileSync(f, "utf8"))
      .join("");
    writeFileSync(run.summaryFile, summary);
    const failed = (e?: StepExit) => !!e && (e.code !== 0 || e.signal !== null);
    run.conclusion =
      run.conclusion === "cancelled" || run.main.cancelled
        ? "cancelled"
        : run.main.timedOut
          ? "timed_out"
          : failed(run.main) || failed(run.post)
            ? "failure"
            : "success";
  }

  private prepare(run: LocalRun): RunnerContext {
    const files = join(run.dir, "files");
    const ctx: RunnerContext = {
      repository: this.repository,
      workspace: this.repoRoot,
      runId: run.runId,
      runAttempt: run.attempt,
      triggeringActor: run.triggeringActor,
      runNumber: ++this.runNumber,
      sha: this.sha,
      eventPath: join(run.dir, "event.json"),
      runnerTemp: join(run.dir, "temp"),
      home: join(run.dir, "home"),
      outputFile: join(files, "output"),
      summaryFile: join(files, "step_summary"),
      stateFile: join(files, "state"),
      envFile: join(files, "env"),
      pathFile: join(files, "path"),
    };
    for (const d of [files, ctx.runnerTemp, ctx.home]) mkdirSync(d, { recursive: true });
    for (const f of [ctx.outputFile, ctx.summaryFile, ctx.stateFile, ctx.envFile, ctx.pathFile])
      writeFileSync(f, "");
    writeFileSync(
      ctx.eventPath,
      `${JSON.stringify(repositoryDispatchEvent(run.payload, this.repository), null, 2)}\n`,
    );
    return ctx;
  }
}

function describeExit(e: StepExit): string {
  const how = e.signal ? `signal ${e.signal}` : `exit code ${e.code}`;
  return `${how}${e.timedOut ? " (timed out)" : ""}${e.cancelled ? " (cancelled)" : ""}`;
}

function safeParseFile(file: string, log: (line: string) => void): Record<string, string> {
  try {
    return existsSync(file) ? parseCommandFile(readFileSync(file, "utf8")) : {};
  } catch (e) {
    log(`${e instanceof Error ? e.message : String(e)}\n`);
    return {};
  }
}

/** `git rev-parse HEAD` of `dir`, or a stable stand-in sha when it is not a git checkout. */
export function headSha(dir: string): string {
  try {
    const sha = execFileSync("git", ["rev-parse", "HEAD"], {
      cwd: dir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 5_000,
    }).trim();
    if (/^[0-9a-f]{40,64}$/.test(sha)) return sha;
  } catch {
    // not a git checkout
  }
  return createHash("sha1").update("local").digest("hex");
}
