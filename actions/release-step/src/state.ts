/**
 * What the main step hands to the post step (core.saveState -> STATE_* env). Saved as soon as
 * each fact is known, so a cancelled main step still leaves the post step enough to clean up
 * (key directory) and report (callback target, result directory).
 */
import * as core from "@actions/core";

export const STATE = {
  /** "true" as soon as the main step starts: its absence means the post step got no state at all. */
  started: "main_started",
  /** Directory holding the key file; removed by post. */
  keyDir: "key_dir",
  /** JSON of {@link CallbackTarget}; present once preflight said 200. */
  callback: "callback",
  /** "true" once the engine gave a final answer to a callback (2xx or 4xx; 5xx/network are retried). */
  acked: "callback_acked",
  /** JSON timings (epoch ms). */
  timings: "timings",
  /**
   * JSON `{pid, path}` of the tool while it runs (its process group's id and its file), "" once
   * it ended: a post step after a main step killed mid-tool stops what is left of it.
   */
  tool: "tool",
} as const;

/** Where and as whom to call back. */
export interface CallbackTarget {
  url: string;
  step_run_id: string;
  run_id: string;
  run_attempt: number;
  attempt: number;
  result_dir: string;
  engine_url: string;
  /** GITHUB_ACTOR: who started the workflow run (the same on every re-run). */
  actor?: string;
  /** GITHUB_TRIGGERING_ACTOR: who started this run attempt (a re-run's person). */
  triggering_actor?: string;
}

export function save(name: (typeof STATE)[keyof typeof STATE], value: string): void {
  core.saveState(name, value);
}

export function load(name: (typeof STATE)[keyof typeof STATE]): string {
  return core.getState(name);
}
