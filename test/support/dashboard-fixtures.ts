/**
 * Fixture `ReleaseRecord`s for dashboard render tests and the dashboard benchmark, plus an
 * in-memory `ReleaseApi` that serves them. The fake implements only what the dashboard calls
 * (get, list, abort, resume, retry, health); protocol methods throw.
 */
import { expect } from "vitest";
import { BatonError } from "../../engine/src/domain/errors.ts";
import type { ReleaseState } from "../../engine/src/domain/states.ts";
import type {
  Attempt,
  HistoryEntry,
  Json,
  Manifest,
  ManifestStep,
  Release,
  StepRun,
} from "../../engine/src/domain/types.ts";
import { dashboardApp } from "../../engine/src/http/dashboard/index.tsx";
import type { AttemptResult, ReleaseSummary } from "../../engine/src/ports/store.ts";
import type { Accepted, Refusal, ReleaseApi, ReleaseRecord } from "../../engine/src/service/api.ts";

export const T0 = Date.UTC(2026, 10, 29, 2, 0, 0);
const DIGEST = "a".repeat(64);
const IMAGE = `ghcr.io/acme/model@sha256:${"b".repeat(64)}`;
const PREV_IMAGE = `ghcr.io/acme/model@sha256:${"c".repeat(64)}`;

function lane(id: string) {
  return {
    id,
    host: `${id}.example.internal`,
    port: 22,
    user: "deploy",
    host_key: `SHA256:${"A".repeat(43)}`,
    queue: `q-${id}`,
    capabilities: ["chat"],
    health_url: `http://${id}.example.internal/health`,
    baseline_weight: 50,
  };
}

const laneArgs = (id: string): Record<string, Json> => ({
  lane: { id, host: `${id}.example.internal` },
  image: IMAGE,
  previous_image: PREV_IMAGE,
});

/** The seven steps of one lane's wave (shared decisions: step table per wave). */
function waveSteps(laneId: string, wave: number, first: number, traffic: number): ManifestStep[] {
  const base = {
    lane: laneId,
    wave,
    retries: 0,
    on_failure: "compensate" as const,
    start_deadline_ms: 600_000,
    callback_deadline_ms: 1_800_000,
  };
  const marker = (present: boolean) => ({
    op: "set_marker" as const,
    lane: laneId,
    marker: "excluded" as const,
    present,
  });
  const caps = (advertised: boolean) => ({
    op: "set_capabilities" as const,
    lane: laneId,
    capabilities: ["chat"],
    advertised,
  });
  const steps: Omit<ManifestStep, "index">[] = [
    {
      ...base,
      name: "exclude_lane",
      kind: "control_plane",
      forward: {
        kind: "control_plane",
        name: "exclude_lane",
        target: `lane=${laneId}:excluded`,
        request: marker(true),
      },
      backward: {
        kind: "control_plane",
        name: "include_lane",
        target: `lane=${laneId}:included`,
        request: marker(false),
      },
    },
    {
      ...base,
      name: "attach_queue_lane",
      kind: "runner",
      forward: {
        kind: "runner",
        name: "attach_queue_lane",
        target: `lane=${laneId}`,
        tool: "attach-queue-lane",
        args: laneArgs(laneId),
      },
      backward: {
        kind: "runner",
        name: "restore_queue_lane",
        target: `lane=${laneId}`,
        tool: "restore-queue-lane",
        args: laneArgs(laneId),
      },
    },
    {
      ...base,
      name: "assert_smoke_passed",
      kind: "runner",
      forward: {
        kind: "runner",
        name: "assert_smoke_passed",
        target: `lane=${laneId}`,
        tool: "run-smoke",
        args: laneArgs(laneId),
      },
      backward: null,
    },
    {
      ...base,
      name: "advertise_capabilities",
      kind: "control_plane",
      forward: {
        kind: "control_plane",
        name: "advertise_capabilities",
        target: `lane=${laneId}:caps`,
        request: caps(true),
      },
      backward: {
        kind: "control_plane",
        name: "withdraw_capabilities",
        target: `lane=${laneId}:caps`,
        request: caps(false),
      },
    },
    {
      ...base,
      name: "include_lane",
      kind: "control_plane",
      forward: {
        kind: "control_plane",
        name: "include_lane",
        target: `lane=${laneId}:included`,
        request: marker(false),
      },
      backward: {
        kind: "control_plane",
        name: "exclude_lane",
        target: `lane=${laneId}:excluded`,
        request: marker(true),
      },
    },
    {
      ...base,
      lane: null,
      name: "set_traffic",
      kind: "control_plane",
      forward: {
        kind: "control_plane",
        name: "set_traffic",
        target: `traffic=${traffic}`,
        request: { op: "set_traffic", weights: { [laneId]: traffic }, percent: traffic },
      },
      backward: {
        kind: "control_plane",
        name: "set_traffic",
        target: "traffic=0",
        request: { op: "set_traffic", weights: { [laneId]: 0 }, percent: 0 },
      },
    },
    {
      ...base,
      lane: null,
      name: "assert_traffic_observed",
      kind: "control_plane",
      forward: {
        kind: "control_plane",
        name: "assert_traffic_observed",
        target: `traffic=${traffic}`,
        request: { op: "assert_traffic", weights: { [laneId]: traffic }, percent: traffic },
      },
      backward: null,
    },
  ];
  return steps.map((s, i) => ({ ...s, index: first + i }));
}

/** A manifest of `waves` one-lane waves (7 steps each). */
export function fixtureManifest(waves = 1): Manifest {
  const lanes = Array.from({ length: Math.max(waves, 2) }, (_, i) => lane(`lane-${i + 1}`));
  const steps: ManifestStep[] = [];
  const plan: Manifest["waves"] = [];
  for (let w = 0; w < waves; w++) {
    const traffic = Math.round((100 * (w + 1)) / waves);
    plan.push({ lanes: [lanes[w]!.id], traffic });
    steps.push(...waveSteps(lanes[w]!.id, w, steps.length, traffic));
  }
  return {
    v: 1,
    recipe_name: "chat-model-v7",
    model: "chat-model",
    image: IMAGE,
    previous_image: PREV_IMAGE,
    tool_revision: null,
    lanes,
    waves: plan,
    steps,
  };
}

interface RunSpec {
  step: number;
  dir?: "fwd" | "bwd";
  state: StepRun["state"];
  /** Runner attempts as [run_id, run_attempt, state]. */
  attempts?: [string, number, Attempt["state"]][];
  tries?: number;
  start: number;
  end?: number | null;
  error?: string | null;
}

function stepRun(n: number, kind: StepRun["kind"], s: RunSpec): StepRun {
  const dir = s.dir ?? "fwd";
  const attempts: Attempt[] = (s.attempts ?? []).map(([run, ra, state], i) => ({
    n: i + 1,
    dispatch: 1,
    run_id: run,
    run_attempt: ra,
    sha: "0123456789abcdef0123456789abcdef01234567",
    state,
    preflight_at: s.start + 5_000 + i * 60_000,
    callback_at: state === "running" ? null : s.start + 50_000 + i * 60_000,
    status: state === "running" ? null : state,
    overall: state === "succeeded" ? "pass" : state === "running" ? null : "fail",
  }));
  return {
    id: `sr_${n}_${s.step}_${dir === "fwd" ? "f" : "b"}`,
    step_index: s.step,
    direction: dir,
    kind,
    state: s.state,
    operation_key: `r${n}:${s.step}:${dir}:lane=lane-1`,
    dispatch: 1,
    bound_run_id: attempts[0]?.run_id ?? null,
    attempts,
    tries: s.tries ?? 1,
    retries_used: 0,
    created_at: s.start,
    started_at: s.start,
    finished_at: s.end === undefined ? s.start + 60_000 : s.end,
    last_error: s.error ?? null,
  };
}

function release(
  n: number,
  state: ReleaseState,
  manifest: Manifest,
  runs: RunSpec[],
  extra: Partial<Release>,
): Release {
  const start = T0 + n * 3_600_000;
  return {
    id: `r${n}`,
    state,
    generation: 1,
    resource_version: 10,
    manifest_digest: DIGEST,
    manifest,
    high_water_mark: -1,
    cursor: 0,
    step_runs: runs.map((r) => stepRun(n, manifest.steps[r.step]!.kind, { ...r })),
    reason: null,
    created_at: start,
    updated_at: start + 600_000,
    ...extra,
  };
}

function entry(
  id: string,
  at: number,
  kind: string,
  stepRunId: string | null,
  message: string,
  outcome: HistoryEntry["outcome"] = "accepted",
  data: Json = {},
): HistoryEntry {
  return { release_id: id, at, kind, step_run_id: stepRunId, outcome, message, data };
}

/** The failing check of the compensated release's smoke step (asserted by tests). */
export const FAILING_CHECK = "health_endpoint";
/** Reason text of the refused late callback in the compensated release (asserted by tests). */
export const LATE_REASON = "late callback: the release is rolled_back and no longer wants sr_3_2_f";

/** r3: smoke check failed on step 2, compensated back to step 0: `rolled_back`. */
export function compensatedRecord(): ReleaseRecord {
  const m = fixtureManifest(1);
  const s = T0 + 3 * 3_600_000;
  const rel = release(
    3,
    "rolled_back",
    m,
    [
      { step: 0, state: "succeeded", start: s, end: s + 2_000 },
      {
        step: 1,
        state: "succeeded",
        attempts: [["9001", 1, "succeeded"]],
        start: s + 3_000,
        end: s + 90_000,
      },
      {
        step: 2,
        state: "failed",
        attempts: [
          ["9002", 1, "fenced"],
          ["9002", 2, "failed"],
        ],
        start: s + 91_000,
        end: s + 200_000,
        error: "smoke check health_endpoint failed",
      },
      {
        step: 1,
        dir: "bwd",
        state: "succeeded",
        attempts: [["9003", 1, "succeeded"]],
        start: s + 201_000,
        end: s + 260_000,
      },
      { step: 0, dir: "bwd", state: "succeeded", start: s + 261_000, end: s + 262_000 },
    ],
    {
      high_water_mark: 2,
      cursor: -1,
      generation: 2,
      reason: "step 3 assert_smoke_passed failed: smoke check health_endpoint failed",
      updated_at: s + 262_000,
    },
  );
  const id = rel.id;
  const history: HistoryEntry[] = [
    entry(id, s, "start", null, "[engine] release r3 started"),
    entry(id, s + 2_000, "applied", "sr_3_0_f", "[engine] exclude_lane applied"),
    entry(id, s + 3_500, "dispatch_accepted", "sr_3_1_f", "[engine] dispatch accepted"),
    entry(id, s + 8_000, "preflight", "sr_3_1_f", "[engine] attempt 1 (run 9001/1) may proceed"),
    entry(id, s + 90_000, "callback", "sr_3_1_f", "[engine] attempt 1 succeeded"),
    entry(id, s + 96_000, "preflight", "sr_3_2_f", "[engine] attempt 1 (run 9002/1) may proceed"),
    entry(id, s + 150_000, "preflight", "sr_3_2_f", "[engine] attempt 2 (run 9002/2) fences 1"),
    entry(
      id,
      s + 155_000,
      "callback",
      "sr_3_2_f",
      "[engine] step run sr_3_2_f is fenced: attempt 1 < current attempt 2; the newer attempt's result stands",
      "refused",
      { reason: "fenced" },
    ),
    entry(id, s + 200_000, "callback", "sr_3_2_f", "[engine] attempt 2 failed: health_endpoint"),
    entry(id, s + 200_500, "transition", null, "[engine] compensating from step 2"),
    entry(id, s + 260_000, "callback", "sr_3_1_b", "[engine] restore-queue-lane succeeded"),
    entry(id, s + 262_000, "applied", "sr_3_0_b", "[engine] include_lane applied"),
    entry(id, s + 262_100, "transition", null, "[engine] release r3 rolled_back"),
    entry(id, s + 300_000, "callback", "sr_3_2_f", `[engine] ${LATE_REASON}`, "refused", {
      reason: "late",
    }),
  ];
  const checks: Json = [
    { name: "pull", status: "passed", exit_code: 0, duration_ms: 1200 },
    {
      name: FAILING_CHECK,
      status: "failed",
      exit_code: 7,
      signal: null,
      duration_ms: 30_000,
      message: "GET /health answered 503",
    },
    { name: "latency_p99", status: "passed", exit_code: 0, duration_ms: 800 },
  ];
  const callback = {
    step_run_id: "sr_3_2_f",
    run_id: "9002",
    run_attempt: 2,
    status: "failed",
    overall: "fail",
    checks,
    log: "x",
    log_truncated: false,
  };
  const attempt_results: AttemptResult[] = [
    {
      step_run_id: "sr_3_2_f",
      attempt: 2,
      release_id: id,
      received_at: s + 200_000,
      status: "failed",
      overall: "fail",
      checks,
      log: `${Array.from({ length: 400 }, (_, i) => `line ${i + 1}: probing`).join("\n")}\n<script>alert(1)</script>\n`,
      log_truncated: false,
      raw_callback: JSON.stringify(callback),
      preflight: { run_id: "9002", run_attempt: 2, sha: "0123456789abcdef", tool: "run-smoke" },
    },
  ];
  return { release: rel, history, attempt_results };
}

/** r4: running on step 1 (attempt 1 in progress). */
export function runningRecord(): ReleaseRecord {
  const m = fixtureManifest(2);
  const s = T0 + 4 * 3_600_000;
  const rel = release(
    4,
    "running",
    m,
    [
      { step: 0, state: "succeeded", start: s, end: s + 1_000 },
      {
        step: 1,
        state: "running",
        attempts: [["9101", 1, "running"]],
        start: s + 2_000,
        end: null,
      },
    ],
    { high_water_mark: 1, cursor: 1 },
  );
  return {
    release: rel,
    history: [entry(rel.id, s, "start", null, "[engine] release r4 started")],
    attempt_results: [],
  };
}

/** r5: paused on an `unknown` step run (dispatch lost). */
export function pausedRecord(): ReleaseRecord {
  const m = fixtureManifest(1);
  const s = T0 + 5 * 3_600_000;
  const rel = release(
    5,
    "paused",
    m,
    [
      { step: 0, state: "succeeded", start: s, end: s + 1_000 },
      {
        step: 1,
        state: "unknown",
        start: s + 2_000,
        end: s + 602_000,
        error: "dispatch lost: no preflight before the start deadline",
      },
    ],
    {
      high_water_mark: 1,
      cursor: 1,
      reason: "step 2 attach_queue_lane is unknown: dispatch lost",
    },
  );
  return {
    release: rel,
    history: [entry(rel.id, s, "start", null, "[engine] release r5 started")],
    attempt_results: [],
  };
}

/** r2: succeeded. */
export function succeededRecord(): ReleaseRecord {
  const m = fixtureManifest(1);
  const s = T0 + 2 * 3_600_000;
  const rel = release(
    2,
    "succeeded",
    m,
    m.steps.map((st) => ({
      step: st.index,
      state: "succeeded" as const,
      attempts:
        st.kind === "runner" ? ([[`88${st.index}`, 1, "succeeded"]] as RunSpec["attempts"]) : [],
      start: s + st.index * 10_000,
      end: s + st.index * 10_000 + 5_000,
    })),
    { high_water_mark: 6, cursor: 7 },
  );
  return {
    release: rel,
    history: [entry(rel.id, s, "start", null, "[engine] release r2 started")],
    attempt_results: [],
  };
}

/**
 * A large release for the benchmark: `stepRuns` step runs (forward for every step, backward
 * for the rest), `attempts` runner attempts each, `events` history entries.
 */
export function bigRecord(stepRuns = 200, attempts = 3, events = 2_000): ReleaseRecord {
  const forward = Math.ceil(stepRuns * 0.6);
  const waves = Math.ceil(forward / 7);
  const m = fixtureManifest(waves);
  const steps = m.steps.slice(0, forward);
  const s = T0;
  const runs: RunSpec[] = [];
  const att = (k: number): RunSpec["attempts"] =>
    Array.from({ length: attempts }, (_, i) => [
      `7${k}`,
      i + 1,
      i === attempts - 1 ? "succeeded" : "fenced",
    ]);
  for (const st of steps) {
    runs.push({
      step: st.index,
      state: "succeeded",
      attempts: att(st.index),
      start: s + st.index * 1000,
    });
  }
  for (const st of [...steps].reverse()) {
    if (runs.length >= stepRuns) break;
    runs.push({
      step: st.index,
      dir: "bwd",
      state: "succeeded",
      attempts: att(st.index + 5000),
      start: s + 500_000 + st.index * 1000,
    });
  }
  const rel = release(1, "rolled_back", { ...m, steps: m.steps }, runs, {
    high_water_mark: forward - 1,
    cursor: -1,
  });
  // Force runner-style attempts on every step run so the table carries 3 attempts each.
  for (const r of rel.step_runs) r.kind = "runner";
  const history = Array.from({ length: events }, (_, i) =>
    entry(
      rel.id,
      s + i * 500,
      i % 10 === 9 ? "callback" : "preflight",
      rel.step_runs[i % rel.step_runs.length]!.id,
      i % 10 === 9
        ? "[engine] late callback refused: the release no longer wants this step run"
        : `[engine] attempt ${1 + (i % 3)} may proceed`,
      i % 10 === 9 ? "refused" : "accepted",
    ),
  );
  return { release: rel, history, attempt_results: [] };
}

function summary(r: Release): ReleaseSummary {
  return {
    id: r.id,
    state: r.state,
    recipe_name: r.manifest.recipe_name,
    model: r.manifest.model,
    high_water_mark: r.high_water_mark,
    cursor: r.cursor,
    step_count: r.manifest.steps.length,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

/** Calls made to the fake's operator methods, for assertions. */
export interface FakeCall {
  method:
    | "abort"
    | "confirm_restore"
    | "restore_state"
    | "verify"
    | "resume"
    | "retry"
    | "resolve"
    | "abandon"
    | "promote"
    | "pause"
    | "release"
    | "rollback";
  target: string;
  actor: string;
}

/** An in-memory `ReleaseApi` over fixture records; operator methods change state simply. */
export function fakeApi(records: ReleaseRecord[] = defaultRecords()): ReleaseApi & {
  calls: FakeCall[];
} {
  const byId = new Map(records.map((r) => [r.release.id, structuredClone(r)]));
  const calls: FakeCall[] = [];
  const refuse = (reason: string): Refusal => ({
    ok: false,
    status: 409,
    code: "conflict",
    reason,
  });
  const accept = (r: ReleaseRecord): Accepted => {
    r.release.resource_version += 1;
    return { ok: true, changed: true, release: structuredClone(r.release), reply: {} };
  };
  const notFound = (id: string) =>
    new BatonError(
      "not_found",
      `[engine] release ${id} not found; list releases with GET /v1/releases`,
    );
  const get = (id: string) => {
    const r = byId.get(id);
    if (!r) throw notFound(id);
    return r;
  };
  const unsupported = () => {
    throw new Error("[fake] not used by the dashboard");
  };
  return {
    calls,
    get incidents() {
      return unsupported();
    },
    get drills() {
      return unsupported();
    },
    // No kill switch in force (what a fresh engine's book holds): the fleet page reads it.
    get killSwitches() {
      return { list: async () => [] } as unknown as ReleaseApi["killSwitches"];
    },
    get credentials() {
      return unsupported();
    },
    async start() {
      return unsupported();
    },
    async get(id) {
      return structuredClone(get(id));
    },
    async peek(id) {
      const r = byId.get(id);
      return r ? structuredClone(r.release) : null;
    },
    async releaseRecord() {
      return unsupported();
    },
    async sourceMark() {
      return unsupported();
    },
    async acknowledgeSource() {
      return unsupported();
    },
    async accept() {
      return unsupported();
    },
    async rollback(id, actor) {
      calls.push({ method: "rollback", target: id, actor });
      const r = get(id);
      if (r.release.state !== "succeeded") {
        return refuse(`[engine] rollback takes a succeeded release; ${id} is ${r.release.state}`);
      }
      // The new release: the previous manifest (image and previous image swapped), pending.
      const next = structuredClone(r);
      const n = Math.max(...[...byId.keys()].map((k) => Number(k.slice(1)))) + 1;
      next.release.id = `r${n}`;
      next.release.state = "pending";
      next.release.manifest.image = r.release.manifest.previous_image;
      next.release.manifest.previous_image = r.release.manifest.image;
      next.history = [];
      byId.set(next.release.id, next);
      return { ok: true, changed: true, release: structuredClone(next.release), reply: {} };
    },
    async rollForward() {
      return unsupported();
    },
    async liveMark(id) {
      const r = byId.get(id);
      return r ? `${r.release.resource_version}:${r.history.length}` : null;
    },
    async liveState(id) {
      const r = byId.get(id);
      return r
        ? { mark: `${r.release.resource_version}:${r.history.length}`, state: r.release.state }
        : null;
    },
    async list(q) {
      return [...byId.values()]
        .map((r) => r.release)
        .filter((r) => !q.state || r.state === q.state)
        .filter((r) => q.before === undefined || r.created_at < q.before)
        .sort((a, b) => b.created_at - a.created_at)
        .slice(0, q.limit)
        .map(summary);
    },
    async abort(id, actor) {
      calls.push({ method: "abort", target: id, actor });
      const r = get(id);
      if (["succeeded", "rolled_back", "aborted"].includes(r.release.state)) {
        return refuse(
          `[engine] release ${id} is ${r.release.state}; a finished release cannot be aborted`,
        );
      }
      r.release.state = "compensating";
      return accept(r);
    },
    async resume(id, actor) {
      calls.push({ method: "resume", target: id, actor });
      const r = get(id);
      if (r.release.state !== "paused") return refuse(`[engine] release ${id} is not paused`);
      r.release.state = "running";
      return accept(r);
    },
    async verify(id, actor) {
      calls.push({ method: "verify", target: id, actor });
      return accept(get(id));
    },
    async confirmRestore(id, actor) {
      calls.push({ method: "confirm_restore", target: id, actor });
      const r = get(id);
      if (r.release.state !== "needs_operator" || !r.release.restore)
        return refuse(`[engine] release ${id} waits for no restore action`);
      r.release.state = "rolled_back";
      return accept(r);
    },
    async restoreState(id, actor) {
      calls.push({ method: "restore_state", target: id, actor });
      return refuse(`[engine] release ${id} declares no restore tool`);
    },
    async pause(id, actor, reason) {
      calls.push({ method: "pause", target: id, actor });
      const r = get(id);
      if (r.release.state !== "running") return refuse(`[engine] release ${id} is not running`);
      r.release.state = "paused";
      r.release.hold = { kind: "pause", actor, reason, at: r.release.updated_at };
      return accept(r);
    },
    async release(id, actor) {
      calls.push({ method: "release", target: id, actor });
      const r = get(id);
      if (r.release.hold?.kind !== "dark") return refuse(`[engine] release ${id} is not dark`);
      r.release.state = "running";
      r.release.hold = null;
      r.release.exposure = "released";
      return accept(r);
    },
    async promote(id, actor) {
      calls.push({ method: "promote", target: id, actor });
      const r = get(id);
      if (r.release.state !== "paused" || !r.release.gate) {
        return refuse(`[engine] release ${id} is not paused at an inconclusive gate`);
      }
      r.release.state = "running";
      r.release.gate = null;
      return accept(r);
    },
    async retry(stepRunId, actor) {
      calls.push({ method: "retry", target: stepRunId, actor });
      const id = `r${stepRunId.split("_")[1]}`;
      const r = get(id);
      const sr = r.release.step_runs.find((x) => x.id === stepRunId);
      if (!sr || !["failed", "unknown", "dispatch_failed"].includes(sr.state)) {
        return refuse(`[engine] step run ${stepRunId} is not waiting for a retry`);
      }
      if (!["paused", "needs_operator"].includes(r.release.state)) {
        return refuse(
          `[engine] release ${id} is ${r.release.state}; retry needs paused or needs_operator`,
        );
      }
      sr.state = "dispatching";
      r.release.state = "running";
      return accept(r);
    },
    async resolve(stepRunId, actor) {
      calls.push({ method: "resolve", target: stepRunId, actor });
      return refuse(`[fake] resolve of ${stepRunId} is not modelled`);
    },
    async abandon(id, actor) {
      calls.push({ method: "abandon", target: id, actor });
      return refuse(`[fake] abandon of ${id} is not modelled`);
    },
    async preflight() {
      return unsupported();
    },
    async callback() {
      return unsupported();
    },
    async recordRefused() {},
    async health() {},
  };
}

/** The four fixture releases: succeeded r2, compensated r3, running r4, paused r5. */
export function defaultRecords(): ReleaseRecord[] {
  return [succeededRecord(), compensatedRecord(), runningRecord(), pausedRecord()];
}

/**
 * The HTML of the dashboard's page of release `id` over `fakeApi(records)`, as a viewer logged
 * in with `viewerToken` sees it at `now` (epoch ms); expects 200.
 */
export async function releasePageHtml(
  records: ReleaseRecord[],
  id: string,
  now: number,
  o: { viewerToken?: string; publicUrl?: string } = {},
): Promise<string> {
  const viewer = o.viewerToken ?? "view-secret-token";
  const base = o.publicUrl ?? "http://127.0.0.1:8787";
  const app = dashboardApp({
    api: fakeApi(records),
    tokens: { operator: "op-secret-token", viewer },
    publicUrl: base,
    now: () => now,
  });
  const login = await app.request(`${base}/login`, {
    method: "POST",
    body: new URLSearchParams({ token: viewer, next: "/releases" }),
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
  const cookie = /^(baton_session=[^;]+)/.exec(login.headers.get("set-cookie") ?? "")?.[1] ?? "";
  const res = await app.request(`${base}/releases/${id}`, { headers: { cookie } });
  expect(res.status).toBe(200);
  return res.text();
}

/** `html` as the words a reader sees: tags dropped, white space collapsed. */
export const visibleText = (html: string): string =>
  html.replace(/<[^>]+>/g, " ").replace(/\s+/g, " ");
