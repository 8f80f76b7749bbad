/**
 * What the phases of one main step share, and the wrapper that runs each phase in its own log
 * group and records its outcome word and duration (for the job summary and the last log line).
 */
import * as core from "@actions/core";

/** One recorded phase (name, outcome word, duration in ms). */
export interface PhaseRecord {
  name: string;
  outcome: string;
  ms: number;
}

/** The main step's shared facts. Phases fill in `stepRunId`, `engineUrl` and `keyDir`. */
export interface StepContext {
  readonly env: NodeJS.ProcessEnv;
  /** GITHUB_RUN_ID ("" outside a runner). */
  readonly runId: string;
  /** GITHUB_RUN_ATTEMPT, counted from 1. */
  readonly runAttempt: number;
  /** RUNNER_TEMP, or /tmp. */
  readonly runnerTemp: string;
  /** Epoch-ms marks sent with the callback (started_at, tool_started_at, …). */
  readonly timings: Record<string, number>;
  /** The phases run so far, in order. */
  readonly phases: PhaseRecord[];
  /** The payload's step run id once read ("" before). */
  stepRunId: string;
  /** The engine-url input once read ("" before). */
  engineUrl: string;
  /** The SSH key's directory while it may exist (removed after the tool, on a signal, at the end). */
  keyDir?: string;
}

/** A fresh context from the runner's environment. */
export function stepContext(env: NodeJS.ProcessEnv): StepContext {
  return {
    env,
    runId: env.GITHUB_RUN_ID ?? "",
    runAttempt: Number(env.GITHUB_RUN_ATTEMPT ?? "1"),
    runnerTemp: env.RUNNER_TEMP || "/tmp",
    timings: { started_at: Date.now() },
    phases: [],
    stepRunId: "",
    engineUrl: "",
  };
}

/**
 * Runs `fn` as the phase `name` (a log group), records `outcome(result)` ("failed" when it
 * throws, and rethrows).
 */
export async function inPhase<T>(
  ctx: StepContext,
  name: string,
  fn: () => Promise<T> | T,
  outcome: (v: T) => string = () => "ok",
): Promise<T> {
  const t0 = Date.now();
  try {
    const v = await core.group(name, async () => fn());
    ctx.phases.push({ name, outcome: outcome(v), ms: Date.now() - t0 });
    return v;
  } catch (e) {
    ctx.phases.push({ name, outcome: "failed", ms: Date.now() - t0 });
    throw e;
  }
}
