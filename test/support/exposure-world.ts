/**
 * Fleet truth over generated releases (docs/guarantees.md "Exposure, baseline and read-back"):
 * a real engine (`createEngine`, a real store) drives generated recipes against the reference
 * control plane (embedded HTTP server, fault injection on) through the engine's real HTTP
 * adapter. A simulated runner answers each dispatch through the engine's HTTP app (preflight,
 * signed callback) and keeps the target's ledger: which image each lane runs, changed by the
 * deploy (`attach-queue-lane`) and restore (`restore-queue-lane`) tools.
 *
 * The checks read the environment, never the engine's tables:
 * - exposure: the control plane's own history is replayed change by change, interleaved with
 *   the target ledger, and at every point the router (`route`, the reference router's function)
 *   splits requests over the lanes; the candidate image's share must be ≤ the declared percent
 *   of the wave in force (the highest wave whose forward `set_traffic` the control plane
 *   applied; 0 before the first), must never rise during compensation, and a lane's image only
 *   changes while it carries no traffic;
 * - restore: a release that ends `succeeded` leaves every lane in the state it declared (final
 *   weights, included, capabilities advertised, the new image); one that ends `rolled_back` or
 *   `aborted` leaves every lane exactly in its observed baseline (weight, marker, capabilities,
 *   image); lanes outside the recipe are never changed; never a mix;
 * - read-back: every write the control plane answered 2xx (the wire log of the adapter's
 *   requests, answered or not) is followed by a read of what it changed before that lane (or
 *   that model's traffic) is written again; when every such read went unanswered, the next
 *   write there must be the step's backward write (compensation replaced the step).
 *
 * Generated failures: runner failures forward (with or without a re-run) and backward,
 * control-plane writes that lie (200, nothing applied) or fail (500), control-plane writes
 * and reads that hang past the engine's timeout (`hang`: nothing applied; `apply_then_hang`:
 * applied, answer never in time), aborts, and engine crashes (the engine is closed between two
 * reconciler passes and a new one opened on the same store and clock). Lanes may run a hotfix
 * at start that the control plane reports: compensation must leave the hotfix running there.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { HttpControlPlane } from "../../engine/src/adapters/http-control-plane/index.ts";
import type { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import type { ControlPlaneCore } from "../../engine/src/control-plane/core.ts";
import { startEmbeddedControlPlane } from "../../engine/src/control-plane/embedded.ts";
import type { LaneState } from "../../engine/src/control-plane/model.ts";
import { route } from "../../engine/src/control-plane/router.ts";
import type { ControlPlaneHandle } from "../../engine/src/control-plane/server.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { ControlPlaneOp } from "../../engine/src/domain/types.ts";
import { largestRemainder } from "../../engine/src/domain/weights.ts";
import { actionOf } from "../../engine/src/protocol/control-plane.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  type Harness,
  makeHarness,
  op,
  pumpOnce,
  type RunIdentity,
  runStep,
  type StoreKind,
} from "../integration/service-harness.ts";
import { lane as fixtureLane, IMAGE, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";

const CAPS = ["long-context", "summarize", "vision"] as const;

/** A hotfix some lanes run at start instead of the recipe's previous_image. */
export const HOTFIX_IMAGE = `ghcr.io/acme/summarizer@sha256:${"c".repeat(64)}`;

/**
 * The engine's control-plane timeout in this world (ms): a hung answer costs this much real
 * time, and a hang lasts `HANG_MS`, past it.
 */
const CP_TIMEOUT_MS = 5_000;
const HANG_MS = 6_000;

/** One generated lane: its observed baseline at the control plane. */
export interface GenLane {
  weight: number;
  excluded: boolean;
  capabilities: string[];
  advertised: boolean;
  /** Capabilities the recipe gives the lane (advertised when the release succeeds). */
  recipeCaps: string[];
  /** The lane runs `HOTFIX_IMAGE` at start (reported to the control plane), not previous_image. */
  hotfix: boolean;
}

/** One generated failure. Step numbers are taken modulo the steps of the right kind. */
export type GenFailure =
  | { kind: "runner_fail"; step: number; times: number; rerun: boolean }
  | { kind: "runner_fail_bwd"; times: number }
  | { kind: "cp_fault"; mode: "lie" | "error"; dir: "fwd" | "bwd"; step: number; count: number }
  /** A write (by step) or a read (of a lane or of the model's traffic) that never answers in time. */
  | {
      kind: "cp_hang";
      mode: "hang" | "apply_then_hang";
      on: "write" | "read";
      dir: "fwd" | "bwd";
      step: number;
      count: number;
    }
  | { kind: "abort"; round: number }
  /** The engine crashes after reconciler pass `round` and restarts on the same store. */
  | { kind: "crash"; round: number };

export interface Scenario {
  lanes: GenLane[];
  /** Wave sizes (sum = lanes.length) and their declared percents (non-decreasing, last 100). */
  waves: { size: number; traffic: number }[];
  /** Lanes of the model the recipe does not name (weight 0 at the control plane). */
  outside: { excluded: boolean; capabilities: string[]; advertised: boolean }[];
  /** A lane of another model (weight 100 there): never touched. */
  otherModel: boolean;
  retries: number;
  rerunWindowMinutes: number;
  failures: GenFailure[];
  /**
   * Parallel waves (absent or null: serial): every wave of more than one lane declares
   * `max_unavailable`, lanes get `failure_domain` rack-(i mod domains), and `min_serving` a
   * count of lanes when above 0.
   */
  parallel?: { maxUnavailable: number; domains: number; minServing: number } | null;
}

const caps = fc.subarray([...CAPS]);

/** Generated scenarios: 1–6 lanes, 1–4 waves, random baselines, failures. */
export const scenarioArb: fc.Arbitrary<Scenario> = fc.integer({ min: 1, max: 6 }).chain((n) =>
  fc.record({
    lanes: fc.array(
      fc.record({
        weight: fc.nat({ max: 10 }),
        excluded: fc.oneof(
          { weight: 6, arbitrary: fc.constant(false) },
          { weight: 1, arbitrary: fc.constant(true) },
        ),
        capabilities: caps,
        advertised: fc.boolean(),
        recipeCaps: fc.subarray([...CAPS], { minLength: 1 }),
        hotfix: fc.oneof(
          { weight: 4, arbitrary: fc.constant(false) },
          { weight: 1, arbitrary: fc.constant(true) },
        ),
      }),
      { minLength: n, maxLength: n },
    ),
    waves: fc
      .tuple(
        fc.uniqueArray(fc.integer({ min: 1, max: Math.max(1, n - 1) }), {
          maxLength: Math.min(3, n - 1),
        }),
        fc.array(fc.integer({ min: 0, max: 100 }), { minLength: 3, maxLength: 3 }),
      )
      .map(([cuts, pcts]) => {
        const points = [...new Set(cuts.filter((c) => c < n))].sort((a, b) => a - b);
        const bounds = [0, ...points, n];
        const sorted = [...pcts].sort((a, b) => a - b);
        return bounds.slice(1).map((b, i) => ({
          size: b - bounds[i]!,
          traffic: i === bounds.length - 2 ? 100 : sorted[i]!,
        }));
      }),
    outside: fc.array(
      fc.record({ excluded: fc.boolean(), capabilities: caps, advertised: fc.boolean() }),
      { maxLength: 2 },
    ),
    otherModel: fc.boolean(),
    retries: fc.constantFrom(0, 0, 1),
    rerunWindowMinutes: fc.constantFrom(0, 0, 1),
    failures: fc.array(
      fc.oneof(
        fc.record({
          kind: fc.constant("runner_fail" as const),
          step: fc.nat({ max: 40 }),
          times: fc.constantFrom(1, 99),
          rerun: fc.boolean(),
        }),
        fc.record({
          kind: fc.constant("runner_fail_bwd" as const),
          times: fc.constantFrom(1, 99),
        }),
        fc.record({
          kind: fc.constant("cp_fault" as const),
          mode: fc.constantFrom<"lie" | "error">("lie", "lie", "error"),
          dir: fc.constantFrom<"fwd" | "bwd">("fwd", "bwd"),
          step: fc.nat({ max: 60 }),
          count: fc.integer({ min: 1, max: 4 }),
        }),
        fc.record({
          kind: fc.constant("cp_hang" as const),
          mode: fc.constantFrom<"hang" | "apply_then_hang">("hang", "apply_then_hang"),
          on: fc.constantFrom<"write" | "read">("write", "write", "read"),
          dir: fc.constantFrom<"fwd" | "bwd">("fwd", "bwd"),
          step: fc.nat({ max: 60 }),
          count: fc.integer({ min: 1, max: 2 }),
        }),
        fc.record({ kind: fc.constant("abort" as const), round: fc.nat({ max: 40 }) }),
        fc.record({ kind: fc.constant("crash" as const), round: fc.nat({ max: 60 }) }),
      ),
      { maxLength: 2 },
    ),
    parallel: fc.option(
      fc.record({
        maxUnavailable: fc.integer({ min: 2, max: 4 }),
        domains: fc.integer({ min: 1, max: 3 }),
        minServing: fc.integer({ min: 0, max: 2 }),
      }),
      { freq: 2 },
    ),
  }),
);

/** What one release showed. `problems` lists every violated rule (empty = all held). */
export interface RunReport {
  release: string | null;
  /** Final release state, or `refused` (422 at start: nothing written). */
  outcome: string;
  /** Points (control-plane changes and image changes) at which exposure was measured. */
  stepsChecked: number;
  /** Largest candidate share above the declared percent in force, in % (0 when none). */
  maxOvershootPct: number;
  /** Lanes not in their observed baseline or declared state at the end (or in a mix). */
  restoreMismatches: number;
  /** Writes answered 2xx without a read of what they changed before the next write. */
  unreadWrites: number;
  /** The compiled manifest has a parallel wave (`max_unavailable` above 1). */
  parallel: boolean;
  /** Most lanes of one parallel wave excluded at the control plane at once (0: none). */
  maxOut: number;
  /**
   * Times the release took a lane out of service beyond a limit: more than its parallel
   * wave's `max_unavailable` lanes out, every lane of its failure domain out, or fewer than
   * `min_serving` of the recipe's lanes in service (read from the control plane's history).
   */
  limitViolations: number;
  /** What happened on the way (abort, rerun, resolve), for the benchmark's counts. */
  paths: string[];
  problems: string[];
}

/**
 * One request of the engine's control-plane adapter. `status` 0: no answer (the adapter's
 * timeout aborted it, or the connection failed). `sent` and `done` are positions on one
 * counter shared by every request (sending and ending each take the next number), so the order
 * of a request's end and another's start is exact.
 */
interface WireEntry {
  method: string;
  path: string;
  key: string | null;
  status: number;
  sent: number;
  done: number;
}

interface ManifestStepView {
  index: number;
  name: string;
  kind: string;
  lane: string | null;
  wave: number;
  forward: { request?: ControlPlaneOp } | null;
  backward: { request?: ControlPlaneOp; kind?: string } | null;
}

interface RecordView {
  state: string;
  manifest: {
    waves: { lanes: string[]; traffic: number; max_unavailable?: number }[];
    lanes: { id: string; failure_domain?: string }[];
    min_serving?: number;
    steps: ManifestStepView[];
  };
  step_runs: { id: string; state: string; step_index: number; direction: string }[];
}

type LaneView = Pick<LaneState, "weight" | "excluded" | "capabilities" | "advertised">;
const view = (l: LaneState): LaneView => ({
  weight: l.weight,
  excluded: l.excluded,
  capabilities: [...l.capabilities],
  advertised: l.advertised,
});
const same = (a: LaneView, b: LaneView) => JSON.stringify(a) === JSON.stringify(b);

/** Bound on reconciler passes per release (liveness: a release must end within it). */
const MAX_ROUNDS = 600;

/**
 * One engine, one reference control plane and the simulated runner/target, reused by many
 * releases (each with its own model and lanes, so nothing carries over).
 */
export class ExposureWorld {
  private seq = 0;
  /** Target ledger: lane -> image it runs. */
  private readonly ledger = new Map<string, string>();
  /** Image changes, each after the control-plane history entry `after` (an id). */
  private imageEvents: { after: number; lane: string; image: string }[] = [];

  /** Image each watched lane ran when the current release started (the target's ledger). */
  private imagesAtStart = new Map<string, string>();

  private constructor(
    /** The running engine; replaced by `restart` (a crash: same store, same clock). */
    public h: Harness,
    readonly cp: ControlPlaneHandle,
    private readonly dir: string,
    /** The adapter's requests to the control plane, in order (method, path, key, status). */
    private readonly wire: WireEntry[],
    private readonly kind: StoreKind,
    private readonly controlPlane: HttpControlPlane,
  ) {}

  /**
   * The engine crashes between two reconciler passes and a new one starts on the same store,
   * clock and control plane (nothing of the old engine's memory survives; its dispatches were
   * all answered in the pass that made them).
   */
  private async restart(): Promise<void> {
    const old = this.h;
    await old.close(true);
    this.h = await makeHarness({
      kind: this.kind,
      dir: this.dir,
      store: old.store,
      clock: old.clock,
      dispatcher: new MemoryDispatcher(),
      cp: this.controlPlane as unknown as MemoryControlPlane,
    });
  }

  /** Starts the control plane (faults on) and an engine on a store of `kind`. */
  static async open(kind: StoreKind): Promise<ExposureWorld> {
    const dir = mkdtempSync(join(tmpdir(), "baton-exposure-"));
    const { handle } = await startEmbeddedControlPlane({ dataDir: ":memory:", faults: true });
    const wire: WireEntry[] = [];
    let tick = 0;
    // Every request is logged when it ends, answered or not: a read the adapter gave up on
    // (timeout) was still sent, and the read-back check must see it (status 0).
    const recordingFetch: typeof fetch = async (input, init) => {
      const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
      const headers = new Headers(init?.headers);
      const entry = {
        method: init?.method ?? "GET",
        path: url.pathname + url.search,
        key: headers.get("idempotency-key"),
        sent: ++tick,
      };
      try {
        const res = await fetch(input, init);
        wire.push({ ...entry, status: res.status, done: ++tick });
        return res;
      } catch (err) {
        wire.push({ ...entry, status: 0, done: ++tick });
        throw err;
      }
    };
    const controlPlane = new HttpControlPlane({
      baseUrl: handle.url,
      token: handle.writeToken,
      timeoutMs: CP_TIMEOUT_MS,
      fetch: recordingFetch,
    });
    const h = await makeHarness({
      kind,
      dir,
      cp: controlPlane as unknown as MemoryControlPlane,
    });
    return new ExposureWorld(h, handle, dir, wire, kind, controlPlane);
  }

  async close(): Promise<void> {
    await this.h.close().catch(() => {});
    await this.cp.close().catch(() => {});
    rmSync(this.dir, { recursive: true, force: true });
  }

  private get core(): ControlPlaneCore {
    return this.cp.core;
  }

  private historyMark = 0;

  /** Id of the newest control-plane history entry (reads only what is newer than the last). */
  private lastHistoryId(): number {
    const rows = this.core.history({ after: this.historyMark });
    if (rows.length > 0) this.historyMark = rows[rows.length - 1]!.id;
    return this.historyMark;
  }

  /** Runs one generated release to its end and checks the environment. Never throws for a violation. */
  async run(s: Scenario): Promise<RunReport> {
    const n = ++this.seq;
    const model = `exp-m${n}`;
    const ids = s.lanes.map((_, i) => `exp${n}-l${i}`);
    const outsideIds = s.outside.map((_, i) => `exp${n}-o${i}`);
    const otherId = `exp${n}-x`;
    const report: RunReport = {
      release: null,
      outcome: "",
      stepsChecked: 0,
      maxOvershootPct: 0,
      restoreMismatches: 0,
      unreadWrites: 0,
      parallel: false,
      maxOut: 0,
      limitViolations: 0,
      paths: [],
      problems: [],
    };

    // The fleet before the release: weights summing to 100 over the recipe's lanes.
    const raw = s.lanes.map((l) => l.weight);
    const weights = largestRemainder(100, raw.every((w) => w === 0) ? raw.map(() => 1) : raw);
    this.core.seed([
      ...s.lanes.map((l, i) => ({
        id: ids[i]!,
        model,
        weight: weights[i]!,
        excluded: l.excluded,
        capabilities: [...l.capabilities].sort(),
        advertised: l.advertised,
        // A hotfix lane reports it; the others report nothing (their image is unknown).
        ...(l.hotfix ? { image: HOTFIX_IMAGE } : {}),
      })),
      ...s.outside.map((l, i) => ({
        id: outsideIds[i]!,
        model,
        weight: 0,
        excluded: l.excluded,
        capabilities: [...l.capabilities].sort(),
        advertised: l.advertised,
      })),
      ...(s.otherModel ? [{ id: otherId, model: `${model}-other`, weight: 100 }] : []),
    ]);
    for (const [i, l] of s.lanes.entries())
      this.ledger.set(ids[i]!, l.hotfix ? HOTFIX_IMAGE : PREVIOUS_IMAGE);
    for (const id of outsideIds) this.ledger.set(id, PREVIOUS_IMAGE);
    this.imagesAtStart = new Map([...ids, ...outsideIds].map((id) => [id, this.ledger.get(id)!]));
    const watched = [...ids, ...outsideIds, ...(s.otherModel ? [otherId] : [])];
    const before = new Map(watched.map((id) => [id, view(this.core.lane(id))]));
    const historyStart = this.lastHistoryId();
    this.imageEvents = [];
    const wireStart = this.wire.length;

    let offset = 0;
    const recipe: RecipeInput = {
      name: `exposure-${n}`,
      model,
      image: IMAGE,
      previous_image: PREVIOUS_IMAGE,
      lanes: s.lanes.map((l, i) => ({
        ...fixtureLane(i),
        id: ids[i]!,
        capabilities: l.recipeCaps,
        ...(s.parallel ? { failure_domain: `rack-${i % s.parallel.domains}` } : {}),
      })),
      rollout: {
        waves: s.waves.map((w) => {
          const lanes = ids.slice(offset, offset + w.size);
          offset += w.size;
          return {
            lanes,
            traffic: w.traffic,
            ...(s.parallel && w.size > 1 ? { max_unavailable: s.parallel.maxUnavailable } : {}),
          };
        }),
      },
      ...(s.parallel && s.parallel.minServing > 0 ? { min_serving: s.parallel.minServing } : {}),
      policy: { retries: s.retries, rerun_window_minutes: s.rerunWindowMinutes },
    };
    const created = await op(this.h, "POST", "/v1/releases", recipe);
    if (created.status !== 201) {
      report.outcome = "refused";
      if (created.status !== 422)
        report.problems.push(`start answered ${created.status}: ${await created.text()}`);
      if (this.lastHistoryId() !== historyStart)
        report.problems.push("a refused start wrote to the control plane");
      return report;
    }
    const rid = ((await created.json()) as { id: string }).id;
    report.release = rid;
    let rec = await this.record(rid);
    const steps = rec.manifest.steps;
    report.parallel = rec.manifest.waves.some((w) => (w.max_unavailable ?? 1) > 1);

    // Arm the control-plane faults on the chosen steps' operation keys.
    const cpSteps = steps.filter((st) => st.kind === "control_plane");
    const runnerFwd = steps.filter((st) => st.kind === "runner");
    for (const f of s.failures) {
      if (f.kind !== "cp_fault") continue;
      const pool = cpSteps.filter((st) => (f.dir === "fwd" ? st.forward : st.backward)?.request);
      const writes = pool.filter((st) => {
        const r = (f.dir === "fwd" ? st.forward : st.backward)?.request;
        return r && r.op !== "assert_traffic";
      });
      const st = writes[f.step % Math.max(1, writes.length)];
      if (st)
        this.cp.faults!.arm({
          mode: f.mode,
          match: `${rid}:${st.index}:${f.dir}:`,
          count: f.count,
        });
    }
    // Hangs: a write of the chosen step, or a read of its lane (or of the model's traffic),
    // answers only after the engine's timeout (the write applied or not, as the mode says).
    for (const f of s.failures) {
      if (f.kind !== "cp_hang") continue;
      const pool = cpSteps.filter((st) => {
        const r = (f.dir === "fwd" ? st.forward : st.backward)?.request;
        return r && (f.on === "read" || r.op !== "assert_traffic");
      });
      const st = pool[f.step % Math.max(1, pool.length)];
      if (!st) continue;
      report.paths.push(`hang:${f.on}`);
      this.cp.faults!.arm(
        f.on === "write"
          ? {
              mode: f.mode,
              match: `${rid}:${st.index}:${f.dir}:`,
              count: f.count,
              hang_ms: HANG_MS,
            }
          : {
              mode: "hang",
              on: "read",
              match: st.lane ? `/v1/lanes/${st.lane}` : `/v1/models/${model}/traffic`,
              count: f.count,
              hang_ms: HANG_MS,
            },
      );
    }
    const crashes = new Set(s.failures.flatMap((f) => (f.kind === "crash" ? [f.round + 1] : [])));
    const failFwd = new Map<number, { times: number; rerun: boolean }>();
    for (const f of s.failures) {
      if (f.kind !== "runner_fail" || runnerFwd.length === 0) continue;
      const st = runnerFwd[f.step % runnerFwd.length]!;
      failFwd.set(st.index, { times: f.times, rerun: f.rerun });
    }
    const bwdFail = s.failures.find((f) => f.kind === "runner_fail_bwd");
    const abortAt = s.failures.find((f) => f.kind === "abort")?.round;

    const failures = new Map<string, number>();
    const failedRuns = new Map<string, { p: DispatchPayload; run: RunIdentity }>();
    const decide = (p: DispatchPayload): "pass" | "fail" => {
      const m = /^sr_\d+_(\d+)_([fb])$/.exec(p.step_run_id);
      const idx = Number(m?.[1]);
      const done = failures.get(p.step_run_id) ?? 0;
      let fail = false;
      if (m?.[2] === "f") fail = done < (failFwd.get(idx)?.times ?? 0);
      else if (p.tool === "restore-queue-lane") fail = done < (bwdFail?.times ?? 0);
      if (fail) failures.set(p.step_run_id, done + 1);
      return fail ? "fail" : "pass";
    };

    let rounds = 0;
    let resolves = 0;
    let reran = false;
    for (;;) {
      if (rounds++ > MAX_ROUNDS) {
        report.problems.push(`release ${rid} did not end within ${MAX_ROUNDS} rounds`);
        break;
      }
      if (abortAt !== undefined && rounds === abortAt + 1) {
        const res = await op(this.h, "POST", `/v1/releases/${rid}/abort`, {
          reason: "generated abort",
        });
        report.paths.push(`abort:${res.status}`);
      }
      const { t, fresh } = await this.pump(decide, failedRuns);
      if (crashes.has(rounds)) {
        crashes.delete(rounds);
        report.paths.push("crash");
        await this.restart();
        continue;
      }
      if (t.performed > 0 || t.failed > 0 || fresh.length > 0) continue;
      const pending = (await this.h.store.pendingOutbox(rid))
        .filter((r) => r.effect.type !== "deadline")
        .map((r) => r.due_at)
        .sort((a, b) => a - b)[0];
      if (pending !== undefined) {
        this.h.clock.t = Math.max(this.h.clock.t, pending);
        continue;
      }
      rec = await this.record(rid);
      if (["succeeded", "rolled_back", "aborted", "abandoned"].includes(rec.state)) break;
      if (rec.state === "paused") {
        // Waiting for a re-run: re-run the failed job (attempt 2) or let the window close.
        const waiting = [...failedRuns.values()].at(-1);
        const plan = waiting ? failFwd.get(stepIndexOf(waiting.p)) : undefined;
        if (!reran && waiting && plan?.rerun) {
          reran = true;
          report.paths.push("rerun");
          failures.set(waiting.p.step_run_id, 99); // the re-run passes
          const again = await runStep(this.h, waiting.p, "pass", {
            run_id: waiting.run.run_id,
            run_attempt: waiting.run.run_attempt + 1,
          });
          if (again.preflight.status === 200) this.deployed(waiting.p, false);
        } else {
          report.paths.push("window_closed");
          this.h.clock.advance(s.rerunWindowMinutes * 60_000 + 1_000);
        }
        continue;
      }
      if (rec.state === "needs_operator" && resolves < 10) {
        // The operator does the backward effect by hand, then resolves the step run.
        resolves++;
        report.paths.push("resolve");
        const waited = rec.step_runs.find((r) => r.direction === "bwd" && r.state === "failed");
        const st = waited ? steps[waited.step_index] : undefined;
        if (!waited || !st) {
          report.problems.push(`needs_operator without a failed backward step run`);
          break;
        }
        this.handFix(rid, model, st, resolves);
        const res = await op(this.h, "POST", `/v1/releases/step-runs/${waited.id}/resolve`, {
          reason: "done by hand",
        });
        if (res.status !== 200) {
          report.problems.push(`resolve answered ${res.status}: ${await res.text()}`);
          break;
        }
        continue;
      }
      report.problems.push(`release ${rid} stopped in ${rec.state}`);
      break;
    }
    this.cp.faults!.clear();
    rec = await this.record(rid);
    report.outcome = rec.state;

    this.checkExposure(rid, model, rec, historyStart, before, report);
    this.checkEnd(rec, model, ids, watched, before, report);
    this.checkReadBack(this.wire.slice(wireStart), report);
    return report;
  }

  private async pump(
    decide: (p: DispatchPayload) => "pass" | "fail",
    failedRuns: Map<string, { p: DispatchPayload; run: RunIdentity }>,
  ) {
    const { t, fresh } = await pumpOnce(this.h, () => "skip");
    for (const p of fresh) {
      const v = decide(p);
      const r = await runStep(this.h, p, v);
      // The action runs its tool only after an accepted preflight; then a failed deploy may
      // still have changed the machine.
      if (r.preflight.status === 200) this.deployed(p, v === "fail");
      if (v === "fail") failedRuns.set(p.step_run_id, { p, run: r.run });
    }
    return { t, fresh };
  }

  /** The target's ledger after a deploy or restore ran (a failed deploy may have run). */
  private deployed(p: DispatchPayload, failed: boolean): void {
    const lane = (p.args as { lane?: { id?: string } }).lane?.id;
    const image = (p.args as { image?: string }).image;
    if (!lane || !image) return;
    if (p.tool === "attach-queue-lane" || (p.tool === "restore-queue-lane" && !failed)) {
      if (this.ledger.get(lane) === image) return;
      this.ledger.set(lane, image);
      this.imageEvents.push({ after: this.lastHistoryId(), lane, image });
    }
  }

  /** What an operator does by hand before `resolve`: the failed backward step's effect. */
  private handFix(rid: string, model: string, st: ManifestStepView, n: number): void {
    const back = st.backward;
    if (!back) return;
    if (back.request) {
      const action = actionOf(back.request, model);
      if (action)
        this.core.write(
          {
            operation_key: `hand:${rid}:${st.index}:${n}`,
            release_id: `hand-${rid}`,
            generation: 1,
          },
          action,
        );
      return;
    }
    // The operator redeploys what the lane ran at start.
    const was = st.lane ? this.imagesAtStart.get(st.lane) : undefined;
    if (st.lane && was && this.ledger.get(st.lane) !== was) {
      this.ledger.set(st.lane, was);
      this.imageEvents.push({ after: this.lastHistoryId(), lane: st.lane, image: was });
    }
  }

  private async record(rid: string): Promise<RecordView> {
    const res = await op(this.h, "GET", `/v1/releases/${rid}`);
    return (await res.json()) as RecordView;
  }

  /**
   * Replays the control plane's history since the release started, with the image changes in
   * between, and measures the candidate's share at the router after every change.
   */
  private checkExposure(
    rid: string,
    model: string,
    rec: RecordView,
    historyStart: number,
    before: Map<string, LaneView>,
    report: RunReport,
  ): void {
    const lanes = new Map<string, LaneState>();
    for (const id of before.keys()) {
      const l = this.core.lane(id);
      lanes.set(id, { ...l, ...before.get(id)! });
    }
    const images = new Map<string, string>(
      [...before.keys()].map((id) => [id, this.imagesAtStart.get(id) ?? PREVIOUS_IMAGE]),
    );
    let ceiling = 0;
    // A wave declaring 100% that leaves no lane serving the previous image (the others are in
    // this or earlier waves, or were excluded at start) is in force from its first step: its
    // traffic has nowhere else to go while its lanes are redeployed (docs/state-machine.md).
    const waves = rec.manifest.waves;
    const early = waves.map((w, i) => {
      if (w.traffic !== 100) return false;
      const later = new Set(waves.slice(i + 1).flatMap((x) => x.lanes));
      return [...later].every((id) => before.get(id)?.excluded === true);
    });
    let compensating = false;
    let lastDuringComp = Number.POSITIVE_INFINITY;
    const limits = limitChecker(rid, rec, before, (id) => lanes.get(id)?.excluded === true, report);

    const carries = (id: string) => {
      const l = lanes.get(id);
      return !!l && l.model === model && !l.excluded && l.weight > 0;
    };
    const measure = (what: string) => {
      const modelLanes = [...lanes.values()].filter((l) => l.model === model);
      const served = modelLanes.filter((l) => !l.excluded && l.weight > 0);
      // requests = 100 × the served weights: every lane's quota is then an exact integer.
      const requests = 100 * served.reduce((a, l) => a + l.weight, 0);
      const r = route(model, modelLanes, requests);
      let cand = 0;
      for (const [id, c] of Object.entries(r.counts)) if (images.get(id) === IMAGE) cand += c;
      const share = requests === 0 ? 0 : (cand * 100) / requests;
      report.stepsChecked++;
      const over = share - ceiling;
      if (over > 1e-9) {
        report.maxOvershootPct = Math.max(report.maxOvershootPct, over);
        report.problems.push(
          `${rid}: after ${what} the candidate gets ${share.toFixed(2)}% at the router, above the declared ${ceiling}%`,
        );
      }
      if (compensating) {
        if (share > lastDuringComp + 1e-9) {
          report.maxOvershootPct = Math.max(report.maxOvershootPct, share - lastDuringComp);
          report.problems.push(
            `${rid}: during compensation exposure rose from ${lastDuringComp.toFixed(2)}% to ${share.toFixed(2)}% after ${what}`,
          );
        }
        lastDuringComp = share;
      }
    };

    const history = this.core.history({ after: historyStart });
    const events = [...this.imageEvents];
    const applyImages = (upTo: number) => {
      while (events.length > 0 && events[0]!.after <= upTo) {
        const e = events.shift()!;
        if (carries(e.lane))
          report.problems.push(
            `${rid}: lane ${e.lane} was redeployed to ${e.image.slice(-12)} while it carried ${lanes.get(e.lane)!.weight}% of traffic`,
          );
        images.set(e.lane, e.image);
        measure(
          `lane ${e.lane} now runs ${e.image === IMAGE ? "the candidate" : "the previous image"}`,
        );
      }
    };
    applyImages(historyStart);
    for (const h of history) {
      const m = /^([^:]+):(\d+):(fwd|bwd):/.exec(h.operation_key);
      const ours = m?.[1] === rid || h.release_id === `hand-${rid}`;
      if (!ours) {
        applyImages(h.id);
        continue;
      }
      if (m?.[3] === "bwd") compensating = true;
      if (h.lane !== null) {
        const after = h.after as unknown as LaneState;
        const wasOut = lanes.get(h.lane)?.excluded === true;
        lanes.set(h.lane, { ...after });
        // The release's own writes only: an operator's hand fix is the operator's call.
        if (m?.[1] === rid && !wasOut && after.excluded) limits.tookOut(h.lane, h.operation_key);
      } else if (h.kind === "set_traffic") {
        const after = h.after as Record<string, number>;
        for (const [id, w] of Object.entries(after)) {
          const l = lanes.get(id);
          if (l) lanes.set(id, { ...l, weight: w });
        }
      }
      const step = m ? rec.manifest.steps[Number(m[2])] : undefined;
      if (m?.[3] === "fwd" && step && (step.name === "set_traffic" || early[step.wave])) {
        ceiling = Math.max(ceiling, waves[step.wave]?.traffic ?? 0);
      }
      measure(h.operation_key);
      applyImages(h.id);
    }
    applyImages(Number.POSITIVE_INFINITY);
  }

  /** Every lane in its observed baseline (undone) or its declared state (succeeded), never a mix. */
  private checkEnd(
    rec: RecordView,
    model: string,
    ids: string[],
    watched: string[],
    before: Map<string, LaneView>,
    report: RunReport,
  ): void {
    const mismatch = (msg: string) => {
      report.restoreMismatches++;
      report.problems.push(msg);
    };
    const inRecipe = new Set(ids);
    let declared: Record<string, number> | null = null;
    for (const st of rec.manifest.steps) {
      if (st.name === "set_traffic" && st.forward?.request?.op === "set_traffic")
        declared = st.forward.request.weights;
    }
    for (const id of watched) {
      const now = view(this.core.lane(id));
      const was = before.get(id)!;
      const image = this.ledger.get(id);
      if (!inRecipe.has(id)) {
        if (!same(now, was))
          mismatch(`lane ${id} outside the recipe changed: ${JSON.stringify(now)}`);
        continue;
      }
      if (rec.state === "succeeded") {
        const want: LaneView = {
          weight: declared?.[id] ?? 0,
          excluded: false,
          capabilities: now.capabilities,
          advertised: true,
        };
        if (!same(now, want) || image !== IMAGE)
          mismatch(
            `succeeded, but lane ${id} is ${JSON.stringify(now)} running ${image?.slice(-12)}; declared ${JSON.stringify(want)} on the new image`,
          );
      } else if (rec.state === "rolled_back" || rec.state === "aborted") {
        const ran = this.imagesAtStart.get(id);
        if (!same(now, was) || image !== ran)
          mismatch(
            `${rec.state}, but lane ${id} is ${JSON.stringify(now)} running ${image?.slice(-12)}; observed baseline ${JSON.stringify(was)} on ${ran?.slice(-12)}`,
          );
      }
    }
    void model;
  }

  /**
   * Every write answered 2xx is read back before the next write to the same thing: a lane's
   * write (`PUT /v1/lanes/<lane>…`) by a read of that lane (or a list of lanes), a model's
   * traffic write by a read of that traffic (or the model's lanes). The window opens when the
   * write was answered and ends when the next write to the same thing is sent, not at any
   * write: in a parallel wave the engine performs several lanes' rows at once, so lane B's
   * write can come between lane A's write and its read. A read that got no answer (timeout) was
   * still sent: when every read in the window went unanswered, the write counts as read back
   * only if the next write to the same thing is its own step's backward write (compensation
   * replaced the step whose outcome could not be read); a write with no read sent at all, or
   * whose unanswered reads were followed by any other write (or by none), is a problem.
   */
  private checkReadBack(wire: WireEntry[], report: RunReport): void {
    const laneOf = (path: string) => /^\/v1\/lanes\/([^/?]+)/.exec(path)?.[1];
    const modelOf = (path: string) => /^\/v1\/models\/([^/?]+)\/traffic/.exec(path)?.[1];
    const answered = (r: WireEntry) => r.status >= 200 && r.status <= 299;
    const bySent = [...wire].sort((a, b) => a.sent - b.sent);
    for (const w of wire) {
      if (w.method !== "PUT" || !answered(w)) continue;
      const lane = laneOf(w.path);
      const model = modelOf(w.path);
      const reads = (r: WireEntry) =>
        r.method === "GET" &&
        ((lane !== undefined &&
          (r.path === `/v1/lanes/${lane}` || r.path.startsWith("/v1/lanes?"))) ||
          (model !== undefined &&
            (r.path === `/v1/models/${model}/traffic` || r.path === `/v1/lanes?model=${model}`)));
      const rewrites = (r: WireEntry) =>
        r.method === "PUT" &&
        ((lane !== undefined && laneOf(r.path) === lane) ||
          (model !== undefined && modelOf(r.path) === model));
      let unanswered = 0;
      let readBack = false;
      let next: WireEntry | undefined;
      for (const r of bySent) {
        if (r.sent < w.done) continue;
        if (rewrites(r)) {
          next = r;
          break;
        }
        if (!reads(r)) continue;
        if (answered(r)) {
          readBack = true;
          break;
        }
        unanswered++;
      }
      if (readBack) continue;
      const what = `write ${w.key ?? w.path} (HTTP ${w.status})`;
      const then = next ? `the next write ${next.key ?? next.path}` : "the release's end";
      const step = /^([^:]+:\d+):fwd:/.exec(w.key ?? "")?.[1];
      if (unanswered > 0 && step && next?.key?.startsWith(`${step}:bwd:`)) {
        report.paths.push("read_back_unanswered_compensated");
        continue;
      }
      report.unreadWrites++;
      report.problems.push(
        unanswered === 0
          ? `${what} was not read back: no read of it was sent before ${then}`
          : `${what} was not read back: ${unanswered} reads of it went unanswered, then ${then}, not its step's backward write`,
      );
    }
  }
}

/**
 * The safety limits of parallel waves (docs/recipes.md "Parallel waves"), judged each time a
 * write of the release takes a lane out of service (`excluded` false -> true at the control
 * plane; a lane going back to an `excluded` observed baseline is the baseline restored, not
 * taken out): after it, at most the wave's `max_unavailable` lanes of a parallel wave are out
 * (those excluded since the start count), the lane's failure domain (of more than one lane,
 * every lane of the recipe in it counted) still has a lane in service, and at least
 * `min_serving` of the recipe's lanes are in service. `isOut` reads the replayed state.
 */
function limitChecker(
  rid: string,
  rec: RecordView,
  before: Map<string, LaneView>,
  isOut: (id: string) => boolean,
  report: RunReport,
): { tookOut: (lane: string, key: string) => void } {
  const m = rec.manifest;
  const waveOf = new Map(m.waves.flatMap((w, i) => w.lanes.map((id) => [id, i] as const)));
  const domainOf = new Map(m.lanes.map((l) => [l.id, l.failure_domain]));
  const violation = (msg: string) => {
    report.limitViolations++;
    report.problems.push(`${rid}: ${msg}`);
  };
  return {
    tookOut(lane, key) {
      const w = waveOf.get(lane);
      if (w === undefined || before.get(lane)?.excluded === true) return;
      const out = m.lanes.filter((l) => isOut(l.id)).map((l) => l.id);
      const at = `after ${key} (lanes out: ${out.join(", ")})`;
      const limit = m.waves[w]?.max_unavailable ?? 1;
      if (limit > 1) {
        const waveOut = out.filter((id) => waveOf.get(id) === w).length;
        report.maxOut = Math.max(report.maxOut, waveOut);
        if (waveOut > limit)
          violation(
            `${waveOut} lanes of wave ${w + 1} out of service, max_unavailable ${limit}, ${at}`,
          );
        const domain = domainOf.get(lane);
        const members = m.lanes.filter((l) => domain !== undefined && l.failure_domain === domain);
        if (members.length > 1 && members.every((l) => isOut(l.id)))
          violation(`every lane of failure domain ${domain} out of service ${at}`);
      }
      const serving = m.lanes.length - out.length;
      if (m.min_serving !== undefined && serving < m.min_serving)
        violation(`${serving} lanes in service, min_serving ${m.min_serving}, ${at}`);
    },
  };
}

function stepIndexOf(p: DispatchPayload): number {
  return Number(/^sr_\d+_(\d+)_/.exec(p.step_run_id)?.[1]);
}
