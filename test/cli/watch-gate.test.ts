/**
 * Following a release from a terminal while a gate decides: `baton watch` prints each gate
 * evaluation (wait, pass, fail, with its reason) and each hold as it happens, not only the
 * state it ends in; `baton status -w` draws one screen (state, step n of m, what holds it, per
 * lane the image and the weight set vs observed, the gate's latest bounds) and redraws it in
 * place on a terminal, or appends each changed screen when stdout is not a terminal.
 * Scripted engine answers (in process), then a real gated release on a real engine.
 */
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { describe, expect, it } from "vitest";
import { EngineClient } from "../../engine/src/cli/client.ts";
import type { RecordJson } from "../../engine/src/cli/output.ts";
import { runCli } from "../../engine/src/cli/program.ts";
import { statusWatch } from "../../engine/src/cli/status-watch.ts";
import { watch } from "../../engine/src/cli/watch.ts";
import type { GateSummary } from "../../engine/src/domain/gate/summary.ts";
import type { GateWait, HistoryEntry, Release } from "../../engine/src/domain/types.ts";
import type { LanesView } from "../../engine/src/views/lanes.ts";
import {
  createRelease,
  OPERATOR,
  pumpOnce,
  STORE_KINDS,
  skipStore,
} from "../integration/service-harness.ts";
import { runningRecord, succeededRecord } from "../support/dashboard-fixtures.ts";
import { gatedRecipe, rig, runner } from "../support/gate-rig.ts";

type Rec = RecordJson & { gate?: GateWait | null; hold?: Release["hold"] };

/** r4 of the fixtures (waves at 50% and 100%), wave 1 done and held at its gate. */
function heldAtGate(): Rec {
  const rec = runningRecord();
  const r = rec.release;
  for (let i = 1; i < 7; i++) {
    const sr = structuredClone(r.step_runs[0]!);
    Object.assign(sr, { id: `sr_4_${i}_f`, step_index: i, state: "succeeded", attempts: [] });
    r.step_runs[i] = sr;
  }
  r.cursor = 7;
  r.high_water_mark = 6;
  r.gate = {
    wave: 0,
    phase: "gate",
    since: r.updated_at,
    seq: 0,
    decision: "pending",
    reason: null,
    at: null,
    progress: null,
  };
  return { ...r, history: rec.history, attempt_results: [] } as Rec;
}

function evaluation(rec: Rec, seq: number, reason: string, samples: number): Rec {
  const next = structuredClone(rec);
  const at = rec.updated_at + seq * 5_000;
  next.gate = {
    ...(next.gate as GateWait),
    seq,
    decision: "wait",
    reason,
    at,
    progress: {
      waiting_for: "samples",
      elapsed_ms: seq * 5_000,
      bake_ms: 30_000,
      samples: { have: samples, need: 5_000 },
      metric: "error-rate",
    },
  };
  const entry: HistoryEntry = {
    release_id: rec.id,
    at,
    kind: "gate",
    step_run_id: "sr_4_6_f",
    outcome: "accepted",
    message: `[engine] gate of wave 1 (50%) evaluation ${seq}: wait: ${reason}`,
    data: { gate: { wave: 0, phase: "gate", seq, decision: "wait", elapsed_ms: seq * 5_000 } },
  };
  next.history = [...rec.history, entry];
  next.updated_at = at;
  return next;
}

function pausedBy(rec: Rec, actor: string, reason: string): Rec {
  const next = structuredClone(rec);
  next.state = "paused";
  next.hold = { kind: "pause", actor, reason, at: rec.updated_at };
  next.reason = `paused by ${actor}: ${reason}; nothing new starts until resume (baton resume r4)`;
  return next;
}

/** Answers each GET from a script: the release frames in turn, its lanes beside each. */
class Scripted extends EngineClient {
  calls = 0;
  constructor(
    private readonly frames: Rec[],
    private readonly lanes: LanesView | null = null,
  ) {
    super({ engine: "http://127.0.0.1:1", token: undefined });
  }
  override async call<T>(_method: string, path: string): Promise<T> {
    if (path.endsWith("/lanes")) return structuredClone(this.lanes) as T;
    const f = this.frames[Math.min(this.calls, this.frames.length - 1)]!;
    this.calls++;
    return structuredClone(f) as T;
  }
}

const quick = { intervalMs: 1, timeoutMs: 60_000, sleep: async () => {} };

describe("baton watch prints the gate as it decides", () => {
  it("each evaluation once, with its reason, and the hold when it begins", async () => {
    const held = heldAtGate();
    const e1 = evaluation(held, 1, "too few samples: 1,240 of 5,000 per arm", 1240);
    const e2 = evaluation(e1, 2, "too few samples: 2,480 of 5,000 per arm", 2480);
    const paused = pausedBy(e2, "maria", "checking GPU memory");
    let out = "";
    const code = await watch(new Scripted([held, e1, e1, e2, paused]), held.id, {
      ...quick,
      json: false,
      out: { write: (s: string) => (out += s) },
      now: () => held.updated_at,
    });
    expect(code).toBe(1); // it waits for an operator
    expect(out).toContain("release r4 running: Held at wave 1 gate (50%): waiting for its first");
    expect(out.match(/gate of wave 1 \(50%\) evaluation 1: wait: too few samples/g)).toHaveLength(
      1,
    );
    expect(out.match(/gate of wave 1 \(50%\) evaluation 2: wait: too few samples/g)).toHaveLength(
      1,
    );
    expect(out).toContain(
      "release r4 paused: Paused at wave 1 gate (50%) by maria: checking GPU memory",
    );
    // In the order they happened: the hold, the evaluations, the pause.
    const order = ["Held at wave 1", "evaluation 1", "evaluation 2", "Paused at wave 1"].map((s) =>
      out.indexOf(s),
    );
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it("--json: one gate event per evaluation, with its decision and figures", async () => {
    const held = heldAtGate();
    const e1 = evaluation(held, 1, "too few samples", 10);
    const done = { ...(succeededRecord().release as unknown as Rec), id: held.id };
    Object.assign(done, { history: e1.history, attempt_results: [] });
    let out = "";
    await watch(new Scripted([held, e1, done]), held.id, {
      ...quick,
      json: true,
      out: { write: (s: string) => (out += s) },
      now: () => held.updated_at,
    });
    const gates = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string })
      .filter((e) => e.type === "gate");
    expect(gates).toEqual([
      expect.objectContaining({
        type: "gate",
        wave: 1,
        seq: 1,
        decision: "wait",
        elapsed_ms: 5000,
      }),
    ]);
  });
});

const GATE: GateSummary = {
  generation: 1,
  manifest_digest: "a".repeat(64),
  wave: 0,
  phase: "gate",
  evaluations: 2,
  first_at: 0,
  last_at: 10_000,
  decision: "wait",
  reason: "too few samples",
  alpha: 0.05,
  elapsed_ms: 10_000,
  arms: { candidate: 2480, control: 2520 },
  srm: null,
  metrics: [
    {
      name: "error-rate",
      required: true,
      verdict: "undecided",
      missing: null,
      candidate: { x: 25, n: 2480 },
      control: { x: 20, n: 2520 },
      estimate: -0.002,
      lower: -0.03,
      upper: 0.02,
      margin: 0.01,
      slo: null,
    },
  ],
};

function lanesOf(rec: Rec, observed: number[]): LanesView {
  return {
    release_id: rec.id,
    model: rec.manifest.model,
    read_error: null,
    lanes: rec.manifest.lanes.map((l, i) => ({
      id: l.id,
      wave: i + 1,
      set: { image: rec.manifest.image, role: "candidate", weight: null },
      observed: { weight: observed[i] ?? 0, excluded: false, image: null },
    })),
  };
}

describe("baton status -w", () => {
  const frames = () => {
    const held = heldAtGate();
    held.gates = [GATE];
    const e1 = evaluation(held, 1, "too few samples", 1240);
    e1.gates = [GATE];
    const done = { ...(succeededRecord().release as unknown as Rec), id: held.id };
    Object.assign(done, { history: e1.history, attempt_results: [], gates: [GATE] });
    return { held, e1, done };
  };

  it("not a terminal: appends each changed screen (state, step, lanes set vs observed, gate), ends at the end", async () => {
    const { held, e1, done } = frames();
    let out = "";
    const client = new Scripted([held, held, e1, done], lanesOf(held, [50, 50]));
    const code = await statusWatch(client, held.id, {
      ...quick,
      out: { write: (s: string) => (out += s) },
      now: () => held.updated_at,
    });
    expect(code).toBe(0);
    expect(client.calls).toBe(4);
    // Three different screens (the repeated poll draws nothing), each under its own rule.
    expect(out.match(/^--- /gm)).toHaveLength(3);
    expect(out).not.toContain("\u001b[");
    const first = out.split(/^--- .*$/m)[1]!;
    expect(first).toContain("r4  running  chat-model-v7 / chat-model  ·  step 8 of 14");
    expect(first).toContain("Held at wave 1 gate (50%): waiting for its first evaluation");
    expect(first).toMatch(/LANE\s+WAVE\s+IMAGE\s+SET\s+OBSERVED/);
    expect(first).toMatch(/lane-1\s+1\s+model@sha256:bbbbbbbbbbbb… \(candidate\)\s+\S+\s+50%/);
    expect(first).toContain("wave 1 gate (50%): WAIT after 2 evaluations (10 s): too few samples");
    expect(first).toContain("candidate 2,480 / control 2,520 units (observed 49.6%)");
    expect(first).toContain("error-rate (primary): candidate 1.01% vs control 0.79%");
    expect(first).toContain("baton abort r4 --reason");
    expect(out).toContain("waiting for samples (1,240 of 5,000)");
  });

  it("on a terminal: redraws the screen in place, lines cut to the terminal's width", async () => {
    const { held, e1, done } = frames();
    const writes: string[] = [];
    const code = await statusWatch(
      new Scripted([held, e1, done], lanesOf(held, [50, 50])),
      held.id,
      {
        ...quick,
        out: { write: (s: string) => writes.push(s), isTTY: true, columns: 60 },
        now: () => held.updated_at,
      },
    );
    expect(code).toBe(0);
    expect(writes).toHaveLength(3);
    const firstLines = writes[0]!.split("\n").length - 1;
    // Each later screen first goes back to the first line of the one before and clears below.
    expect(writes[1]!.startsWith(`\u001b[${firstLines}F\u001b[J`)).toBe(true);
    for (const w of writes) {
      const redraw = w.indexOf("\u001b[J");
      for (const line of w.slice(redraw < 0 ? 0 : redraw + 3).split("\n")) {
        expect(line.length).toBeLessThanOrEqual(59);
      }
    }
  });

  it("refuses -w without an id, and with --json, as usage errors", async () => {
    let err = "";
    const io = { out: { write: () => true }, err: { write: (s: string) => (err += s) } };
    expect(await runCli(["status", "-w"], io)).toBe(2);
    expect(err).toContain("status -w follows one release: give its id");
    expect(await runCli(["status", "r1", "-w", "--json"], io)).toBe(2);
    expect(err).toContain("for one JSON object per change use baton watch <id> --json");
  });
});

describe.each(STORE_KINDS)("on a real engine on %s, a gated release", (kind) => {
  it.skipIf(skipStore(kind))(
    "watch prints the evaluations while the gate decides; status -w shows the lanes as the router holds them",
    {
      timeout: 120_000,
    },
    async () => {
      const g = await rig(kind);
      const id = await createRelease(
        g.h,
        gatedRecipe({ min_samples: 1_000_000, max_wait_ms: 30_000, bake_ms: 10_000 }),
      );
      const server = serve({ fetch: g.h.engine.app.fetch, port: 0, hostname: "127.0.0.1" });
      await new Promise<void>((resolve) => server.once("listening", () => resolve()));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      try {
        let out = "";
        const io = {
          out: { write: (s: string) => (out += s) },
          err: { write: (s: string) => (out += s) },
        };
        const following = runCli(
          ["--engine", url, "--token", OPERATOR, "watch", id, "--interval", "100"],
          io,
        );
        // Drive the release (fake clock, the router sending units) while watch polls.
        let ended = false;
        const decide = runner(g);
        void following.then(() => {
          ended = true;
        });
        for (let i = 0; i < 400 && !ended; i++) {
          await pumpOnce(g.h, decide);
          g.h.clock.advance(1_000);
          g.traffic.send(200);
          await new Promise((r) => setTimeout(r, 5));
        }
        expect(await following).toBe(1); // paused at the inconclusive gate: waits for an operator
        expect(out).toMatch(/Held at wave 1 gate \(20%\)/);
        expect(out).toMatch(/gate of wave 1 \(20%\) evaluation \d+: wait/);
        expect(out).toMatch(/Paused at wave 1 gate \(20%\): inconclusive/);

        let screen = "";
        const code = await runCli(
          [
            "--engine",
            url,
            "--token",
            OPERATOR,
            "status",
            id,
            "-w",
            "--timeout",
            "1",
            "--interval",
            "100",
          ],
          {
            out: { write: (s: string) => (screen += s) },
            err: { write: (s: string) => (screen += s) },
          },
        );
        expect(code).toBe(1); // still paused when the timeout passes
        expect(screen).toMatch(/lane-a\s+1\s+summarizer@sha256:\w{12}… \(candidate\)\s+20%\s+20%/);
        expect(screen).toMatch(/lane-b\s+2\s+summarizer@sha256:\w{12}… \(baseline\)/);
        expect(screen).toContain("still paused after 1 s");
      } finally {
        await new Promise<void>((resolve) => {
          (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
          server.close(() => resolve());
        });
        g.traffic.stop();
        await g.h.close();
      }
    },
  );
});
