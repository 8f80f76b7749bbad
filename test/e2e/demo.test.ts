/**
 * `npm run demo` as a new user runs it (a child process, real parts, SQLite in a temp dir):
 * exit 0 and `succeeded`; with `--fail-at` exit 1 and `rolled_back` with the backward steps
 * printed in reverse. Plus bad arguments (exit 2, nothing started) and the step labels.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { pausedVerb, runDemo, waitingLines } from "../../engine/src/demo/main.ts";
import { resolveStep, stepLabel } from "../../engine/src/demo/progress.ts";
import { loadRecipe } from "../../engine/src/demo/stack.ts";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { demoToEnd } from "../support/demo-process.ts";
import { recordSchemaErrors } from "../support/record-schema.ts";

const manifest = compileRecipeInput(loadRecipe()).manifest;

/**
 * The record `--record` wrote, checked against the published JSON Schema file
 * (engine/schema/release-record.schema.json) by Ajv, not by the engine's own type.
 */
function publishedSchemaRecord(file: string) {
  const doc = JSON.parse(readFileSync(file, "utf8")) as {
    release: { state: string; closed: boolean };
    digest: string | null;
    intended: { recovery_class: unknown };
    evidence: { admission: { checks: { check: string; outcome: string }[] } | null };
    decisions: { kind: string; automatic: boolean }[];
    ran: { observed_lanes: { lane: string; source: string; observed: Record<string, unknown> }[] };
    recovery: { exercised: boolean; rto_ms: number | null };
    lineage: unknown;
    recovery_verification: {
      state: string;
      by: string | null;
      lanes: { lane: string; ok: boolean; target_source: string | null }[];
    } | null;
  };
  expect(recordSchemaErrors(doc)).toBeNull();
  return doc;
}

/** Runs the demo through the npm script's command; resolves with exit code and output. */
const demo = (args: string[]) => demoToEnd(args, 560_000);

/** Step lines as printed: [index, label, direction, attempt, result]. */
function stepLines(out: string): [number, string, string, number, string][] {
  const re = /^\s+(\d+)\s+(\S+)\s+(fwd|bwd)\s+attempt (\d+)\s+(\w+)\s+\d+ ms$/gm;
  return [...out.matchAll(re)].map((m) => [Number(m[1]), m[2]!, m[3]!, Number(m[4]), m[5]!]);
}

describe("npm run demo", () => {
  it.concurrent("runs recipes/example.yaml to succeeded, prints every step, exits 0; --record writes a schema-valid record", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-demo-record-"));
    const file = join(dir, "record.json");
    const { code, out } = await demo(["--record", file]);
    expect(code, out).toBe(0);
    const rec = publishedSchemaRecord(file);
    rmSync(dir, { recursive: true, force: true });
    expect(rec.release).toMatchObject({ state: "succeeded", closed: true });
    expect(rec.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(rec.evidence.admission?.checks.length).toBeGreaterThan(0);
    expect(rec.decisions.some((d) => d.kind === "gate" && d.automatic)).toBe(true);
    expect(rec.recovery.exercised).toBe(false);
    expect(rec.lineage).toBeNull();
    // Observed lane states: the control plane at start and the image each lane's target
    // reported running (the candidate's, as the manifest says).
    const sources = new Set(rec.ran.observed_lanes.map((o) => o.source));
    expect([...sources].sort()).toEqual([
      "control_plane_at_start",
      "target_report",
      "traffic_assert",
    ]);
    const reported = rec.ran.observed_lanes.filter((o) => o.source === "target_report");
    expect(new Set(reported.map((o) => o.lane))).toEqual(new Set(manifest.lanes.map((l) => l.id)));
    for (const o of reported) expect(o.observed.images).toContain(manifest.image);
    const lines = stepLines(out);
    expect(lines.map((l) => l[0])).toEqual(manifest.steps.map((s) => s.index + 1));
    for (const l of lines) expect(l.slice(2), out).toEqual(["fwd", 1, "succeeded"]);
    expect(out).toMatch(/release r1 ended succeeded in [\d.]+ s/);
    // The demo's gates passed on the router's traffic (docs/gate.md).
    expect(out).toMatch(/\[demo\] gate wave 1 \(10%\): pass after \d+ evaluations/);
    expect(out).toMatch(/\[demo\] gate wave 2 \(50%\): pass after \d+ evaluations/);
    // Every evaluation the summary counts was printed as it came, once, numbered 1, 2, …
    for (const wave of ["wave 1 \\(10%\\)", "wave 2 \\(50%\\)"]) {
      const said = [...out.matchAll(new RegExp(`\\[demo\\] gate ${wave} evaluation (\\d+):`, "g"))];
      const total = Number(
        new RegExp(`\\[demo\\] gate ${wave}: pass after (\\d+) evaluations`).exec(out)?.[1],
      );
      expect(
        said.map((m) => Number(m[1])),
        out,
      ).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    }
    // Each gate's pass is printed before the steps it let through (the next wave's first step).
    for (const wave of [0, 1]) {
      const next = manifest.steps.find((s) => s.wave === wave + 1);
      if (!next) continue;
      const passAt = out.search(
        new RegExp(`\\[demo\\] gate wave ${wave + 1} \\(\\d+%\\) evaluation \\d+: pass`),
      );
      const nextAt = out.search(new RegExp(`^\\s+${next.index + 1}\\s+\\S+\\s+fwd`, "m"));
      expect(passAt, out).toBeGreaterThan(0);
      expect(passAt, out).toBeLessThan(nextAt);
    }
    // The terminal state comes after the gates' summary.
    expect(out.indexOf("[demo] release r1 is succeeded"), out).toBeGreaterThan(
      out.search(/\[demo\] gate wave 2 \(50%\): pass after/),
    );
    // The dashboard URL and the sign-in link come first, before the release starts, so a new
    // user can watch it live; without --serve the engine stops at the end (said so at the end).
    const dash = out.search(/\[demo\] dashboard\s+http:\/\/127\.0\.0\.1:\d+\/releases/);
    const signIn = out.search(
      /\[demo\] sign in\s+http:\/\/127\.0\.0\.1:\d+\/login\?next=\/releases {2}with the operator token \S{16,}/,
    );
    expect(dash, out).toBeGreaterThanOrEqual(0);
    expect(signIn, out).toBeGreaterThan(dash);
    expect(signIn).toBeLessThan(out.indexOf("[demo] release r1:"));
    expect(out).toMatch(/\[demo\] watch live\s+http:\/\/127\.0\.0\.1:\d+\/releases\/r1/);
    expect(out).toContain("[demo] (run with --serve to keep the dashboard up)");
  }, 600_000);

  it.concurrent("--fail-at attach_queue_lane:lane-b shows compensation and exits 1; its record has the RTO", async () => {
    const dir = mkdtempSync(join(tmpdir(), "baton-demo-record-"));
    const file = join(dir, "record.json");
    const { code, out } = await demo(["--fail-at", "attach_queue_lane:lane-b", "--record", file]);
    expect(code, out).toBe(1);
    const rec = publishedSchemaRecord(file);
    rmSync(dir, { recursive: true, force: true });
    expect(rec.release).toMatchObject({ state: "rolled_back", closed: true });
    expect(rec.recovery.exercised).toBe(true);
    expect(rec.recovery.rto_ms).toBeGreaterThan(0);
    // rolled_back only after the undo was read back: the control plane's lanes, and the two
    // deployed lanes' machines asked over SSH (deploy.sh smoke: the restored image runs, healthy).
    const v = rec.recovery_verification;
    expect(v).toMatchObject({ state: "passed", trigger: "compensation", desired_from: "baseline" });
    expect(v?.by).toContain("target probe (deploy.sh smoke over SSH)");
    expect(
      v?.lanes.filter((l) => l.target_source === "target_probe").map((l) => [l.lane, l.ok]),
    ).toEqual([
      ["lane-a", true],
      ["lane-b", true],
    ]);
    const lines = stepLines(out);
    expect(lines.find((l) => l[1] === "attach_queue_lane:lane-b")?.[4]).toBe("failed");
    const backward = lines.filter((l) => l[2] === "bwd");
    expect(backward.map((l) => `${l[0]} ${l[1]}`)).toEqual([
      "11 restore_queue_lane:lane-b",
      "10 include_lane:lane-b",
      "9 set_traffic(10%)",
      "7 set_traffic(0%)",
      "6 exclude_lane:lane-a",
      "5 withdraw_capabilities:lane-a",
      "3 restore_queue_lane:lane-a",
      "2 include_lane:lane-a",
      "1 set_traffic(baseline)",
    ]);
    for (const l of backward) expect(l[4]).toBe("succeeded");
    expect(out).toMatch(/release r1 ended rolled_back/);
  }, 600_000);

  it.concurrent("--fail-at a lane of a parallel wave fails that lane's health check and rolls back", async () => {
    // Wave 1 is [lane-a, lane-b] with max_unavailable 2: lane-b's step runs are queued while
    // lane-a's deploy (the faulted one) is still in flight. The fault used to end at the first
    // other step run queued, so lane-a's health check passed and the release succeeded.
    const dir = mkdtempSync(join(tmpdir(), "baton-demo-parallel-"));
    const file = join(dir, "parallel.yaml");
    const recipe = loadRecipe();
    const parallel = {
      ...recipe,
      rollout: {
        waves: [
          { lanes: ["lane-a", "lane-b"], traffic: 50, max_unavailable: 2 },
          { lanes: ["lane-c"], traffic: 100 },
        ],
      },
    };
    writeFileSync(file, JSON.stringify(parallel, null, 2)); // JSON is YAML
    const { code, out } = await demo(["--recipe", file, "--fail-at", "attach_queue_lane:lane-a"]);
    rmSync(dir, { recursive: true, force: true });
    expect(code, out).toBe(1);
    const lines = stepLines(out);
    expect(lines.find((l) => l[1] === "attach_queue_lane:lane-a" && l[2] === "fwd")?.[4], out).toBe(
      "failed",
    );
    // Only lane-a's deploy fails: lane-b's (same wave, in flight at once) and every restore pass.
    expect(lines.find((l) => l[1] === "attach_queue_lane:lane-b")?.[4], out).toBe("succeeded");
    for (const l of lines.filter((x) => x[2] === "bwd")) expect(l[4], out).toBe("succeeded");
    expect(out).toMatch(/health check on lane-a answered 503: model not loaded: CUDA OOM/);
    expect(out).toMatch(/release r1 ended rolled_back/);
  }, 600_000);

  it.concurrent("--candidate-error-rate 0.02 (twice the baseline's 1%) fails the first gate and rolls back with the reason", async () => {
    const { code, out } = await demo(["--candidate-error-rate", "0.02"]);
    expect(code, out).toBe(1);
    expect(out).toMatch(/release r1 ended rolled_back/);
    expect(out).toMatch(
      // Either the anytime-valid bound or the test at the margin decides (docs/gate.md); the
      // margin is relative (50% of the control's rate), here at its 0.5-point floor or near it.
      /\[demo\] reason\s+gate of wave 1 \(10%\) failed: error-rate: candidate \d+\.\d+% vs control \d+\.\d+%, allowed \+0\.5\d? points.*: worse \((at least|more than 0\.5\d? points worse than the control, tested at the margin)/,
    );
    // The next wave never began; the router's weights are the baseline again.
    expect(stepLines(out).some((l) => l[1] === "exclude_lane:lane-b")).toBe(false);
    expect(out).toMatch(/weights now lane-a 34%, lane-b 33%, lane-c 33%/);
  }, 600_000);

  it.concurrent("--candidate-latency-ms 400 fails the first wave on the p99 metric and rolls back", async () => {
    const { code, out } = await demo(["--candidate-latency-ms", "400"]);
    expect(code, out).toBe(1);
    expect(out).toMatch(/release r1 ended rolled_back/);
    // The p99 metric decided (through the gate or the stop condition that watches the same
    // guardrail), not the slow-requests guardrail.
    const reason = /^\[demo\] reason\s+(.*)$/m.exec(out)?.[1] ?? "";
    expect(reason, out).toMatch(
      /latency-p99: candidate p99 [\d,–]+ ms vs control [\d,–≤ ]+ ms, allowed \+100 ms: worse \(at the buckets' resolution the candidate's p99 is above [\d,]+ ms and the control's at most [\d,]+ ms/,
    );
    expect(reason).not.toMatch(/slow-requests/);
    expect(stepLines(out).some((l) => l[1] === "exclude_lane:lane-b")).toBe(false);
    expect(out).toMatch(/weights now lane-a 34%, lane-b 33%, lane-c 33%/);
  }, 600_000);
});

describe("demo arguments", () => {
  const quiet = () => {
    const err = vi.spyOn(console, "error").mockImplementation(() => {});
    const log = vi.spyOn(console, "log").mockImplementation(() => {});
    return {
      text: () => err.mock.calls.flat().join("\n"),
      restore: () => {
        err.mockRestore();
        log.mockRestore();
      },
    };
  };

  it("refuses an unknown --fail-at step with the accepted values, before starting anything (exit 2)", async () => {
    const q = quiet();
    try {
      expect(await runDemo(["--fail-at", "set_traffic"])).toBe(2);
      expect(q.text()).toContain("--fail-at set_traffic: not a runner step of a lane");
      expect(q.text()).toContain("11 (attach_queue_lane:lane-b)");
      expect(q.text()).not.toContain("starting the control plane");
    } finally {
      q.restore();
    }
  });

  it("--help names only step indexes that --fail-at accepts", async () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runDemo(["--help"])).toBe(0);
      const help = log.mock.calls.flat().join("\n");
      const listed = /recipe ([\d, or]+)\)/.exec(help.replace(/\s+/g, " "))?.[1] ?? "";
      const indexes = listed.match(/\d+/g) ?? [];
      expect(indexes.length).toBeGreaterThan(0);
      for (const i of indexes) expect(resolveStep(manifest, i).index).toBe(Number(i) - 1);
      expect(stepLabel(resolveStep(manifest, "attach_queue_lane:lane-b"))).toBe(
        "attach_queue_lane:lane-b",
      );
    } finally {
      log.mockRestore();
    }
  });

  it("refuses unknown options, a bad --timeout, a missing recipe and a --record path it cannot write (exit 2)", async () => {
    const q = quiet();
    try {
      expect(await runDemo(["--bogus"])).toBe(2);
      expect(q.text()).toMatch(/bogus/);
      expect(await runDemo(["--timeout", "soon"])).toBe(2);
      expect(q.text()).toContain("--timeout must be a positive number of seconds");
      // A negative value after a space: the flag's own message, not parseArgs' "ambiguous".
      for (const [flag, says] of [
        ["--timeout", "--timeout must be a positive number of seconds (got -1)"],
        ["--port", "--port must be a port number 1..65535, e.g. 8787 (got -1)"],
        ["--candidate-error-rate", "--candidate-error-rate must be a share between 0 and 1"],
        [
          "--candidate-latency-ms",
          "--candidate-latency-ms must be a number of ms between 0 and 60000",
        ],
      ] as const) {
        expect(await runDemo([flag, "-1"])).toBe(2);
        expect(q.text()).toContain(says);
      }
      expect(q.text()).not.toContain("ambiguous");
      expect(await runDemo(["--candidate-latency-ms", "slow"])).toBe(2);
      expect(q.text()).toContain(
        "--candidate-latency-ms must be a number of ms between 0 and 60000",
      );
      expect(await runDemo(["--recipe", "/nonexistent/recipe.yaml"])).toBe(2);
      expect(q.text()).toContain("[demo] cannot read recipe /nonexistent/recipe.yaml");
      // A record that could not be written at the end is refused before anything starts.
      for (const file of ["/nonexistent-dir/record.json", tmpdir()]) {
        expect(await runDemo(["--record", file])).toBe(2);
        expect(q.text()).toContain(`[demo] --record ${file} cannot be written (`);
        expect(q.text()).toContain("fix: name a file in a folder this user can write");
      }
      expect(q.text()).not.toContain("starting the control plane");
    } finally {
      q.restore();
    }
  });

  it("a paused release's hint names the verb it waits for: promote at a manual promotion, resume for a pause", () => {
    const stack = { url: "http://127.0.0.1:1", operatorToken: "tok" };
    const at = 0;
    const promotion = { kind: "promotion", actor: "recipe", reason: "r", at, wave: 1 } as const;
    const held = { id: "r1", state: "paused", hold: promotion, gate: null } as const;
    const served = waitingLines(stack, held, true).join("\n");
    expect(served).toMatch(
      /\[demo\] promote\s+BATON_ENGINE_URL=\S+ BATON_TOKEN=tok npx baton promote r1 /,
    );
    expect(served).not.toContain("baton resume");
    expect(waitingLines(stack, held, false).join("\n")).toContain(
      '`baton promote r1 --reason "<why>"`',
    );
    const pause = { kind: "pause", actor: "alice", reason: "look", at } as const;
    const paused = { id: "r1", state: "paused", hold: pause, gate: null } as const;
    expect(waitingLines(stack, paused, true)[0]).toMatch(
      /\[demo\] resume\s+BATON_ENGINE_URL=\S+ BATON_TOKEN=tok npx baton resume r1 /,
    );
    expect(pausedVerb({ hold: { kind: "dark", actor: "bob", reason: "d", at }, gate: null })).toBe(
      "release",
    );
  });

  it("resolves steps by index or name:lane; labels wave steps by percent", () => {
    // Step numbers are 1-based, as the dashboard and `baton status` show them.
    expect(resolveStep(manifest, "11").index).toBe(10);
    expect(resolveStep(manifest, "assert_smoke_passed:lane-c").index).toBe(19);
    expect(() => resolveStep(manifest, "6")).toThrow(/not a runner step/);
    expect(() => resolveStep(manifest, "9")).toThrow(/not a runner step/);
    expect(() => resolveStep(manifest, "0")).toThrow(/not a runner step/);
    expect(() => resolveStep(manifest, "99")).toThrow(/not a runner step/);
    expect(stepLabel(manifest.steps[0]!)).toBe("drain_wave(0%)");
    expect(stepLabel(manifest.steps[6]!)).toBe("set_traffic(10%)");
    expect(stepLabel(manifest.steps[14]!, "bwd")).toBe("set_traffic(10%)");
    // Backward of the first set_traffic: the drained state; of the first drain: the baseline.
    expect(stepLabel(manifest.steps[6]!, "bwd")).toBe("set_traffic(0%)");
    expect(stepLabel(manifest.steps[0]!, "bwd")).toBe("set_traffic(baseline)");
    expect(stepLabel(manifest.steps[1]!, "bwd")).toBe("include_lane:lane-a");
  });
});
