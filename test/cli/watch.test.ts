/**
 * `watch` on a terminal: each step run printed once per change, and a progress line for the
 * running step run redrawn in place (`\r`), cleared before the next printed line.
 */
import { describe, expect, it } from "vitest";
import { EngineClient } from "../../engine/src/cli/client.ts";
import type { RecordJson } from "../../engine/src/cli/output.ts";
import { watch } from "../../engine/src/cli/watch.ts";
import { runningRecord, succeededRecord } from "../support/dashboard-fixtures.ts";

function asJson(rec: ReturnType<typeof runningRecord>): RecordJson {
  const r = rec.release;
  return { ...r, history: rec.history, attempt_results: rec.attempt_results };
}

class Scripted extends EngineClient {
  calls = 0;
  constructor(private readonly frames: RecordJson[]) {
    super({ engine: "http://127.0.0.1:1", token: undefined });
  }
  override async call<T>(): Promise<T> {
    const f = this.frames[Math.min(this.calls, this.frames.length - 1)]!;
    this.calls++;
    return structuredClone(f) as T;
  }
}

/**
 * The JSON events `watch --json` prints for `frames` (one poll each, no waiting), the
 * clock standing at the first frame's `updated_at`.
 */
async function jsonEvents<T = { type: string; id?: string; at?: number; state?: string }>(
  frames: RecordJson[],
): Promise<T[]> {
  let out = "";
  await watch(new Scripted(frames), frames[0]!.id, {
    intervalMs: 1,
    timeoutMs: 60_000,
    json: true,
    out: { write: (x: string) => (out += x) },
    now: () => frames[0]!.updated_at,
    sleep: async () => {},
  });
  return out
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as T);
}

describe("watch", () => {
  it("prints changes once and draws a progress line for the running step run on a TTY", async () => {
    const running = asJson(runningRecord());
    const done = asJson(succeededRecord());
    done.id = running.id;
    let out = "";
    const client = new Scripted([running, running, done]);
    const code = await watch(client, running.id, {
      intervalMs: 1,
      timeoutMs: 60_000,
      json: false,
      out: { write: (s: string) => (out += s), isTTY: true },
      now: () => running.updated_at + 42_000,
      sleep: async () => {},
    });
    expect(code).toBe(0);
    expect(client.calls).toBe(3);
    // The running step run's progress line: spinner, steps done, which step run, for how long.
    expect(out).toContain("\r\u001b[2K");
    expect(out).toMatch(/[|/\\-] 1\/14 steps done · step 2 running for \d+ m \d+ s/);
    // Printed once although it was seen in two polls.
    expect(out.match(/sr_4_0_f → step 1 /g)).toHaveLength(1);
    expect(out).toContain("release r4 succeeded");
  });

  it("prints a poll's changes in history order: a callback refused before a step run ended prints before it", async () => {
    const running = asJson(runningRecord());
    const done = structuredClone(running);
    done.state = "succeeded";
    const sr = done.step_runs.find((x) => x.state === "running")!;
    const s = sr.started_at!;
    sr.state = "succeeded";
    sr.finished_at = s + 3_000;
    for (const a of sr.attempts) a.state = "succeeded";
    const h = (at: number, outcome: "accepted" | "refused", kind: string, message: string) => ({
      release_id: done.id,
      at,
      kind,
      step_run_id: sr.id,
      outcome,
      message,
      data: null,
    });
    done.updated_at = s + 4_000;
    done.history.push(
      h(s + 1_000, "refused", "callback", "[engine] callback refused: bad credential"),
      h(s + 3_000, "accepted", "transition", `[engine] step run ${sr.id} succeeded`),
      h(s + 3_500, "refused", "callback", "[engine] callback refused: late"),
    );
    const events = (
      await jsonEvents<{ type: string; message?: string; id?: string; state?: string }>([
        running,
        done,
      ])
    ).slice(-4, -1);
    expect(events.map((e) => e.message ?? `${e.id} ${e.state}`)).toEqual([
      "[engine] callback refused: bad credential",
      `${sr.id} succeeded`,
      "[engine] callback refused: late",
    ]);
  });

  it("gives up after the timeout with a one-line error", async () => {
    const running = asJson(runningRecord());
    let t = 0;
    await expect(
      watch(new Scripted([running]), running.id, {
        intervalMs: 1,
        timeoutMs: 5_000,
        json: true,
        out: { write: () => true },
        now: () => (t += 1_000),
        sleep: async () => {},
      }),
    ).rejects.toThrow("[cli] still running after 5 s; watch again or raise --timeout");
  });
});

describe("watch ends on every terminal state", () => {
  it("an abandoned release ends the watch at once with exit 1 (it does not poll until the timeout)", async () => {
    const a = asJson(runningRecord());
    const gone = structuredClone(a);
    gone.state = "abandoned";
    gone.reason = "abandoned by an operator: lane-a confirmed on the previous image";
    let out = "";
    const client = new Scripted([a, gone]);
    let t = 0;
    const code = await watch(client, a.id, {
      intervalMs: 1,
      timeoutMs: 60_000,
      json: false,
      out: { write: (s: string) => (out += s) },
      now: () => (t += 1_000),
      sleep: async () => {},
    });
    expect(code).toBe(1);
    expect(client.calls).toBe(2);
    expect(out).toContain(`release ${a.id} abandoned`);
  });
});

describe("watch prints the release's reason once per change", () => {
  it("the same reason on every poll is printed once; a new one once more", async () => {
    const a = asJson(runningRecord());
    a.reason = "gate of wave 1 deciding: evaluation 1";
    const b = structuredClone(a);
    b.reason = "gate of wave 1 deciding: evaluation 2";
    const done = asJson(succeededRecord());
    done.id = a.id;
    let out = "";
    const client = new Scripted([a, a, a, b, b, done]);
    const code = await watch(client, a.id, {
      intervalMs: 1,
      timeoutMs: 60_000,
      json: false,
      out: { write: (s: string) => (out += s) },
      now: () => a.updated_at,
      sleep: async () => {},
    });
    expect(code).toBe(0);
    expect(client.calls).toBe(6);
    expect(out.match(/evaluation 1/g) ?? []).toHaveLength(1);
    expect(out.match(/evaluation 2/g) ?? []).toHaveLength(1);
    expect(out.match(new RegExp(`release ${a.id} running`, "g")) ?? []).toHaveLength(2);
  });
});

describe("watch prints in time order", () => {
  it("a finished release: housekeeping stamped after its final line prints after it", async () => {
    const running = asJson(runningRecord());
    const done = structuredClone(running);
    const sr = done.step_runs.find((x) => x.state === "running")!;
    const s = sr.started_at!;
    sr.state = "succeeded";
    sr.finished_at = s + 3_000;
    for (const a of sr.attempts) a.state = "succeeded";
    done.state = "succeeded";
    done.updated_at = s + 3_000;
    done.history.push(
      {
        release_id: done.id,
        at: s + 3_000,
        kind: "transition",
        step_run_id: sr.id,
        outcome: "accepted",
        message: `[engine] step run ${sr.id} succeeded`,
        data: null,
      },
      {
        release_id: done.id,
        at: s + 60_000,
        kind: "callback",
        step_run_id: sr.id,
        outcome: "refused",
        message: `[engine] callback for ${sr.id} attempt 1 is late: the step run is succeeded and release ${done.id} is succeeded`,
        data: { type: "callback", step_run_id: sr.id, run_id: "9001", run_attempt: 1 },
      },
    );
    // Watched once it has ended: one poll holds the final line and the later housekeeping.
    const events = await jsonEvents([done]);
    const stamped = events.filter((e) => typeof e.at === "number").map((e) => e.at as number);
    expect(stamped).toEqual([...stamped].sort((a, b) => a - b));
    expect(events.at(-1)).toMatchObject({ type: "refused", housekeeping: true });
    expect(events.at(-2)).toMatchObject({ type: "release", state: "succeeded" });
  });
});

describe("watch replays a finished release in the order its step runs ended", () => {
  it("a note about a step run written after it ended does not move it after later step runs", async () => {
    const done = asJson(succeededRecord());
    const ended = done.step_runs
      .filter((x) => x.finished_at !== null && x.direction === "fwd")
      .sort((a, b) => (a.finished_at ?? 0) - (b.finished_at ?? 0));
    const early = ended[0]!;
    const late = ended.at(-1)!;
    expect(late.finished_at!).toBeGreaterThan(early.finished_at!);
    // Written long after both ended, naming the early step run (as compensation notes a step
    // it passes over).
    done.history.push({
      release_id: done.id,
      at: late.finished_at! + 60_000,
      kind: "transition",
      step_run_id: early.id,
      outcome: "accepted",
      message: `[engine] step ${early.step_index + 1} has no undo: nothing to compensate`,
      data: null,
    });
    const ids = (await jsonEvents([done])).filter((e) => e.type === "step_run").map((e) => e.id);
    expect(ids.indexOf(early.id)).toBeGreaterThanOrEqual(0);
    expect(ids.indexOf(early.id)).toBeLessThan(ids.indexOf(late.id));
  });
});

describe("watch tells the engine's housekeeping from an operator's refused action", () => {
  it("a late callback reads as housekeeping in plain words; a refused abort as the operator's", async () => {
    const running = asJson(runningRecord());
    const next = structuredClone(running);
    const sr = next.step_runs.find((x) => x.state === "running")!;
    const s = sr.started_at!;
    next.history.push(
      {
        release_id: next.id,
        at: s + 1_000,
        kind: "callback",
        step_run_id: sr.id,
        outcome: "refused",
        message: `[engine] callback for ${sr.id} attempt 1 is late: the step run is succeeded and release ${next.id} is running`,
        data: { type: "callback", step_run_id: sr.id, run_id: "9001", run_attempt: 1 },
      },
      {
        release_id: next.id,
        at: s + 2_000,
        kind: "abort",
        step_run_id: null,
        outcome: "refused",
        message: `[engine] release ${next.id} is past its roll-forward point; wait for it to settle`,
        data: { type: "abort", actor: "operator:alice", reason: "p99 doubled" },
      },
    );
    const done = structuredClone(next);
    done.state = "succeeded";
    let out = "";
    await watch(new Scripted([running, next, done]), running.id, {
      intervalMs: 1,
      timeoutMs: 60_000,
      json: false,
      out: { write: (x: string) => (out += x) },
      now: () => running.updated_at,
      sleep: async () => {},
    });
    expect(out).toContain(
      `engine housekeeping: late callback from attempt 1 for ${sr.id} refused; it changed nothing`,
    );
    expect(out).not.toMatch(/refused callback/);
    expect(out).toContain(`refused abort: [engine] release ${running.id} is past its roll-forward`);
    expect(out.match(/late callback/g) ?? []).toHaveLength(1);
  });
});
