/**
 * Fleet truth over generated releases (docs/guarantees.md "Exposure, baseline and read-back"),
 * observed by witnesses that share none of the engine's assumptions: a real engine
 * (`createEngine`, a real store) drives generated recipes against the reference control plane
 * (embedded HTTP server, fault injection on) through the engine's real HTTP adapter, and a
 * runner answers each dispatch through the engine's HTTP app (preflight, signed callback).
 *
 * Every lane is a serve endpoint that answers with the image it runs: an in-process HTTP
 * server whose image the simulated tools change (`sim` releases), or, for `real` releases, a
 * machine: scripts/target/deploy.sh run as the tools run it on a stand-in runtime in which every
 * container is its own process with its own address, the lane's port shared by the containers
 * that hold it (test/support/container-target.ts), so an old container answers on the new
 * one's port until it is stopped.
 *
 * The checks:
 * - exposure: after every change the control plane applied and every runner step, requests
 *   are routed over HTTP through the reference router as a proxy
 *   (engine/src/control-plane/router-proxy.ts), one whole batch of ≥ 100 (the router's
 *   per-batch split is exact), and counted per image where the lanes answer; the candidate's
 *   share must be ≤ the declared percent of the wave in force (the highest wave whose forward
 *   `set_traffic` the control plane applied; 0 before the first) and never rise during
 *   compensation; a lane's image only changes while it carries no traffic;
 * - restore: a release that ends `succeeded` leaves every lane in the state its recipe declared
 *   (final weights, included, the recipe's capabilities advertised) answering with the new
 *   image; one that ends `rolled_back` or `aborted` leaves every lane in its observed baseline
 *   (weight, marker, capabilities) answering with the image it ran at start (set up by this
 *   world, not read from the engine); lanes outside the recipe never change. On `real`
 *   releases the runtime (`ps`, `inspect`) and deploy.sh's ledger are read for every lane too;
 * - steps: on `real` releases, a runner step that reported success left its lane answering,
 *   on its own port, with the image it deployed;
 * - read-back: every write the control plane answered 2xx (the wire log of the adapter's
 *   requests, answered or not) is followed by a read of what it changed before that lane (or
 *   that model's traffic) is written again; when every such read went unanswered, the next
 *   write there must be the step's backward write (compensation replaced the step);
 * - forward after abort: once an abort is accepted, no forward write of the release reaches
 *   the control plane and no forward step is dispatched.
 *
 * Generated: lanes that run at start the previous image (reported to the control plane or
 * not), a third image (a hotfix) or the candidate (a start with such a lane in service must be
 * refused naming it); runner failures forward (with or without a re-run) and backward (a
 * failed restore may leave the lane as it was, serving nothing, or running the restored image);
 * control-plane writes that lie (200, nothing applied) or fail (500), writes and reads that hang
 * past the engine's timeout (`apply_then_hang`: applied, the answer comes too late); aborts;
 * engine crashes; on `real` releases candidates whose container never listens while the old
 * one still answers on the lane's port, and restores whose pull fails.
 */
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { HttpControlPlane } from "../../engine/src/adapters/http-control-plane/index.ts";
import type { MemoryControlPlane } from "../../engine/src/adapters/memory/control-plane.ts";
import { MemoryDispatcher } from "../../engine/src/adapters/memory/dispatcher.ts";
import type { ControlPlaneCore } from "../../engine/src/control-plane/core.ts";
import { startEmbeddedControlPlane } from "../../engine/src/control-plane/embedded.ts";
import type { LaneState } from "../../engine/src/control-plane/model.ts";
import {
  type RouterProxyHandle,
  startRouterProxy,
} from "../../engine/src/control-plane/router-proxy.ts";
import type { ControlPlaneHandle } from "../../engine/src/control-plane/server.ts";
import type { RecipeInput } from "../../engine/src/domain/recipe.ts";
import type { ControlPlaneOp } from "../../engine/src/domain/types.ts";
import { largestRemainder } from "../../engine/src/domain/weights.ts";
import { actionOf } from "../../engine/src/protocol/control-plane.ts";
import type { DispatchPayload } from "../../engine/src/protocol/messages.ts";
import {
  callbackBody,
  callbackUrl,
  type Harness,
  makeHarness,
  op,
  preflightBody,
  preflightUrl,
  type RunIdentity,
  type StoreKind,
  signedPost,
} from "../integration/service-harness.ts";
import { lane as fixtureLane, IMAGE, PREVIOUS_IMAGE } from "../unit/recipe-fixture.ts";
import { ContainerTarget, type DeployRun } from "./container-target.ts";

const CAPS = ["long-context", "summarize", "vision"] as const;

/** A third image some lanes run at start (a hotfix), neither previous_image nor the candidate. */
export const HOTFIX_IMAGE = `ghcr.io/acme/summarizer@sha256:${"c".repeat(64)}`;

/**
 * The engine's control-plane timeout in this world (ms): a hung answer costs this much real
 * time, and a hang lasts `HANG_MS`, past it.
 */
const CP_TIMEOUT_MS = 5_000;
const HANG_MS = 6_000;

/** What a lane runs when the release starts. */
export type StartImage =
  /** previous_image, not reported to the control plane (its image is unknown to the engine) */
  | "previous"
  /** previous_image, reported */
  | "previous_reported"
  /** HOTFIX_IMAGE, reported */
  | "third"
  /** the candidate, reported (a by-hand fix, a half-applied earlier attempt) */
  | "candidate";

/** One generated lane: its observed baseline at the control plane and what it runs. */
export interface GenLane {
  weight: number;
  excluded: boolean;
  capabilities: string[];
  advertised: boolean;
  /** Capabilities the recipe gives the lane (advertised when the release succeeds). */
  recipeCaps: string[];
  start: StartImage;
  /** `real` releases: the candidate's container on this lane never listens. */
  brokenCandidate: boolean;
}

/** One generated failure. Step numbers are taken modulo the steps of the right kind. */
export type GenFailure =
  | { kind: "runner_fail"; step: number; times: number; rerun: boolean }
  /**
   * Restores fail `times` times. What a failed restore left on a `sim` lane: nothing changed,
   * nothing serving, or the restored image running (the report was lost). On `real` releases
   * the restore's pull fails.
   */
  | { kind: "runner_fail_bwd"; times: number; effect: "none" | "down" | "applied" }
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
  /**
   * `sim`: lanes are in-process endpoints the simulated tools change; `real`: deploy.sh on the
   * per-container stand-in runtime, read back from the runtime and deploy.sh's ledger.
   */
  target: "sim" | "real";
}

const caps = fc.subarray([...CAPS]);

/** Generated scenarios: 1–6 lanes, 1–4 waves, random baselines and start images, failures. */
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
        start: fc.oneof(
          { weight: 9, arbitrary: fc.constant<StartImage>("previous") },
          { weight: 5, arbitrary: fc.constant<StartImage>("previous_reported") },
          { weight: 4, arbitrary: fc.constant<StartImage>("third") },
          { weight: 1, arbitrary: fc.constant<StartImage>("candidate") },
        ),
        brokenCandidate: fc.oneof(
          { weight: 5, arbitrary: fc.constant(false) },
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
          effect: fc.constantFrom<"none" | "down" | "applied">("none", "down", "applied"),
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
    target: fc.oneof(
      { weight: 5, arbitrary: fc.constant<"sim" | "real">("sim") },
      { weight: 1, arbitrary: fc.constant<"sim" | "real">("real") },
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
  /** Requests routed over HTTP through the router for those measurements. */
  routerSamples: number;
  /** Lanes whose target was read from the runtime and deploy.sh's ledger (`real` releases). */
  targetReads: number;
  /** Runner steps that reported success but left their lane not answering with their image. */
  stepMismatches: number;
  /** Forward writes or dispatches of the release after its abort was accepted. */
  forwardAfterAbort: number;
  /** The scenario's target kind. */
  target: "sim" | "real";
  /** Exposure rules broken: above the ceiling, a rise during compensation, a redeploy under traffic. */
  exposureViolations: number;
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
  history: { kind: string; message: string }[];
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

/** A lane's serve endpoint in a `sim` release: answers `{lane, image}`, or nothing when down. */
class SimLane {
  image: string | null;
  private constructor(
    readonly id: string,
    private readonly server: http.Server,
    readonly url: string,
    image: string,
  ) {
    this.image = image;
  }

  static async open(id: string, image: string): Promise<SimLane> {
    let lane: SimLane | null = null;
    const server = http.createServer((req, res) => {
      req.resume();
      if (!lane?.image) return res.destroy();
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ lane: id, image: lane.image }));
    });
    await new Promise<void>((ok, ko) => {
      server.once("error", ko);
      server.listen(0, "127.0.0.1", () => ok());
    });
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/healthz`;
    lane = new SimLane(id, server, url, image);
    return lane;
  }

  close(): Promise<void> {
    return new Promise((ok) => {
      this.server.close(() => ok());
      this.server.closeAllConnections();
    });
  }
}

/** The image a lane's own endpoint answers with now (GET, no router), or null when none. */
async function answerOf(url: string): Promise<string | null> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    if (res.status !== 200) return null;
    return ((await res.json()) as { image?: string }).image ?? null;
  } catch {
    return null;
  }
}

const digest = (image: string | null | undefined) => image?.split("@sha256:")[1] ?? null;
const short = (image: string | null | undefined) =>
  image ? (digest(image) === digest(IMAGE) ? "the candidate" : `…${image.slice(-12)}`) : "nothing";

/** Requests of one measurement when no lane can take traffic (the router answers 503). */
const MIN_SAMPLES = 100;

/** One request routed through the router proxy: its status, the image that answered, its batch. */
interface Routed {
  status: number;
  image: string | null;
  plan?: number;
  index?: number;
  size?: number;
}

/**
 * Connections a measurement's requests share (kept alive between measurements): a batch of
 * 100 goes over these few, not over a new connection per request.
 */
const ROUTER_SOCKETS = 8;

/** One release's state the live checks keep. */
interface Live {
  rid: string;
  model: string;
  rec: RecordView;
  report: RunReport;
  ceiling: number;
  early: boolean[];
  compensating: boolean;
  lastDuringComp: number;
  /** The last measurement's answers by status and image (`"200 the candidate": 94`). */
  lastAnswers: Record<string, number>;
  limits: { tookOut: (lane: string, key: string) => void };
  historyMark: number;
  /** Wire tick at which an abort of the release was accepted (null: none). */
  abortTick: number | null;
  /** Operation keys of forward steps dispatched after the abort was accepted. */
  dispatchedAfterAbort: string[];
}

/**
 * One engine, one reference control plane, one router proxy and the lanes, reused by many
 * releases (each with its own model and lanes, so nothing carries over).
 */
export class ExposureWorld {
  private seq = 0;
  private sims = new Map<string, SimLane>();
  private machine: ContainerTarget | null = null;
  private live: Live | null = null;
  private tick: () => number = () => 0;
  /** Keep-alive connections to the router proxy for the measurements (`routeBatch`). */
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: ROUTER_SOCKETS });

  private constructor(
    /** The running engine; replaced by `restart` (a crash: same store, same clock). */
    public h: Harness,
    readonly cp: ControlPlaneHandle,
    private readonly router: RouterProxyHandle,
    /** Serve endpoint of every lane of the current release (proxy upstream and health URL). */
    private readonly endpoints: Map<string, string>,
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
    this.handled = 0;
  }

  /** Starts the control plane (faults on), the router proxy and an engine on a store of `kind`. */
  static async open(kind: StoreKind): Promise<ExposureWorld> {
    const dir = mkdtempSync(join(tmpdir(), "baton-exposure-"));
    const { handle } = await startEmbeddedControlPlane({ dataDir: ":memory:", faults: true });
    const wire: WireEntry[] = [];
    let tick = 0;
    let world: ExposureWorld | null = null;
    // Every request is logged when it ends, answered or not: a read the adapter gave up on
    // (timeout) was still sent, and the read-back check must see it (status 0). After a write
    // ends, what the control plane applied is measured at the router before the engine sees
    // the answer. That measurement runs inside the adapter's deadline: when the deadline
    // passed meanwhile (a loaded machine), the engine never gets this answer (its outcome is
    // unknown, as on a real timeout), so the log says status 0, as the engine saw it.
    const recordingFetch: typeof fetch = async (input, init) => {
      const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
      const headers = new Headers(init?.headers);
      const entry = {
        method: init?.method ?? "GET",
        path: url.pathname + url.search,
        key: headers.get("idempotency-key"),
        sent: ++tick,
      };
      let res: Response;
      let body: ArrayBuffer;
      try {
        res = await fetch(input, init);
        body = await res.arrayBuffer();
      } catch (err) {
        wire.push({ ...entry, status: 0, done: ++tick });
        if (entry.method !== "GET") await world?.changed(entry.key ?? entry.path);
        throw err;
      }
      const done = ++tick;
      if (entry.method !== "GET") await world?.changed(entry.key ?? entry.path);
      const seen = !init?.signal?.aborted;
      wire.push({ ...entry, status: seen ? res.status : 0, done });
      if (!seen) throw init?.signal?.reason;
      return new Response(body, { status: res.status, headers: res.headers });
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
    const endpoints = new Map<string, string>();
    const router = await startRouterProxy({
      lanes: (model) => handle.core.lanes(model),
      upstream: (lane) => {
        const u = endpoints.get(lane);
        return u ? new URL(u).origin : null;
      },
    });
    world = new ExposureWorld(h, handle, router, endpoints, dir, wire, kind, controlPlane);
    world.tick = () => ++tick;
    return world;
  }

  async close(): Promise<void> {
    await this.h.close().catch(() => {});
    await this.closeLanes();
    this.agent.destroy();
    await this.router.close().catch(() => {});
    await this.cp.close().catch(() => {});
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async closeLanes(): Promise<void> {
    for (const s of this.sims.values()) await s.close();
    this.sims = new Map();
    await this.machine?.close();
    this.machine = null;
    this.endpoints.clear();
  }

  private get core(): ControlPlaneCore {
    return this.cp.core;
  }

  /** Id of the newest control-plane history entry. */
  private lastHistoryId(): number {
    const rows = this.core.history({ after: this.live?.historyMark ?? 0 });
    return rows.length > 0 ? rows[rows.length - 1]!.id : (this.live?.historyMark ?? 0);
  }

  /**
   * The control plane may have changed (a write ended, answered or not, or an operator wrote by
   * hand): takes in what it applied since the last look (the ceiling, compensation, lanes taken
   * out of service) and measures at the router when a change can move traffic (weights,
   * markers, declarations; not capabilities).
   */
  private async changed(what: string): Promise<void> {
    const l = this.live;
    if (!l) return;
    const rows = this.core.history({ after: l.historyMark });
    if (rows.length === 0) return;
    l.historyMark = rows[rows.length - 1]!.id;
    let routing = false;
    for (const h of rows) {
      // Capabilities do not move traffic: the router's split only changes with these.
      if (h.kind !== "set_capabilities") routing = true;
      const m = /^([^:]+):(\d+):(fwd|bwd):/.exec(h.operation_key);
      if (m?.[1] !== l.rid && h.release_id !== `hand-${l.rid}`) continue;
      if (m?.[3] === "bwd") l.compensating = true;
      if (m?.[1] === l.rid && h.lane !== null && h.kind === "set_marker") {
        const before = h.before as unknown as LaneState | null;
        const after = h.after as unknown as LaneState;
        if (!before?.excluded && after.excluded) l.limits.tookOut(h.lane, h.operation_key);
      }
      const step = m ? l.rec.manifest.steps[Number(m[2])] : undefined;
      if (m?.[3] === "fwd" && step && (step.name === "set_traffic" || l.early[step.wave]))
        l.ceiling = Math.max(l.ceiling, l.rec.manifest.waves[step.wave]?.traffic ?? 0);
    }
    if (routing) await this.measure(what);
  }

  /**
   * Routes one whole batch (≥ 100 requests) of the model through the router proxy over HTTP
   * and counts the candidate's answers; checks the share against the ceiling in force.
   */
  private async measure(what: string): Promise<void> {
    const l = this.live;
    if (!l) return;
    const counted = await this.routeBatch(l.model);
    const { report } = l;
    report.stepsChecked++;
    report.routerSamples += counted.size;
    const share = counted.size === 0 ? 0 : (counted.candidate * 100) / counted.size;
    const over = share - l.ceiling;
    if (over > 1e-9) {
      report.exposureViolations++;
      report.maxOvershootPct = Math.max(report.maxOvershootPct, over);
      report.problems.push(
        `${l.rid}: after ${what} the candidate answered ${counted.candidate} of ${counted.size} requests routed through the router (${share.toFixed(2)}%), above the declared ${l.ceiling}%`,
      );
    }
    if (l.compensating) {
      if (share > l.lastDuringComp + 1e-9) {
        report.exposureViolations++;
        report.maxOvershootPct = Math.max(report.maxOvershootPct, share - l.lastDuringComp);
        report.problems.push(
          `${l.rid}: during compensation exposure rose from ${l.lastDuringComp.toFixed(2)}% to ${share.toFixed(2)}% after ${what} (answers by status and image, before: ${JSON.stringify(l.lastAnswers)}, after: ${JSON.stringify(counted.answers ?? {})})`,
        );
      }
      l.lastDuringComp = share;
      l.lastAnswers = counted.answers ?? {};
    }
  }

  /**
   * One whole batch through the proxy: the first request tells the batch's size; the rest go
   * at once; every answer must belong to that batch (a change in between plans a new one:
   * then it is tried again, at most 5 times). No lane taking traffic: 100 requests, all 503.
   */
  private async routeBatch(
    model: string,
  ): Promise<{ size: number; candidate: number; answers?: Record<string, number> }> {
    const url = `${this.router.url}/route/${model}/serve`;
    const one = () =>
      new Promise<Routed>((resolve, reject) => {
        const req = http.get(url, { agent: this.agent }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", reject);
          res.on("end", () => {
            const status = res.statusCode ?? 0;
            const batch = res.headers["baton-batch"];
            let image: string | null = null;
            if (status === 200)
              image =
                (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { image?: string }).image ??
                null;
            const [plan, index, size] =
              typeof batch === "string" ? batch.split("/").map(Number) : [];
            resolve({ status, image, plan, index, size });
          });
        });
        // Bounded: a request the router never answers fails the run instead of stalling it.
        req.setTimeout(30_000, () =>
          req.destroy(new Error(`[exposure] ${url}: no answer in 30 s`)),
        );
        req.on("error", reject);
      });
    for (let attempt = 0; attempt < 5; attempt++) {
      const first = await one();
      if (first.status === 503 && first.plan === undefined) {
        const rest = await Promise.all(Array.from({ length: MIN_SAMPLES - 1 }, one));
        const routed = [first, ...rest].filter((r) => r.status !== 503).length;
        if (routed === 0) return { size: MIN_SAMPLES, candidate: 0 };
        continue;
      }
      if (first.index !== 0 || !first.size) {
        // Finish a batch left partly used, then start clean.
        for (let i = (first.index ?? 0) + 1; i < (first.size ?? 0); i++) await one();
        continue;
      }
      const rest = await Promise.all(Array.from({ length: first.size - 1 }, one));
      const all = [first, ...rest];
      if (all.some((r) => r.plan !== first.plan)) continue;
      const candidate = all.filter((r) => digest(r.image) === digest(IMAGE)).length;
      const answers: Record<string, number> = {};
      for (const r of all) {
        const k = `${r.status} ${r.image ? short(r.image) : "-"}`;
        answers[k] = (answers[k] ?? 0) + 1;
      }
      return { size: first.size, candidate, answers };
    }
    throw new Error(`[exposure] the router's batches of ${model} kept changing under measurement`);
  }

  /** The image generated lane `l` runs at start. */
  private static startImage(l: GenLane): string {
    return l.start === "third" ? HOTFIX_IMAGE : l.start === "candidate" ? IMAGE : PREVIOUS_IMAGE;
  }

  /** Runs one generated release to its end and checks the fleet. Never throws for a violation. */
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
      routerSamples: 0,
      targetReads: 0,
      stepMismatches: 0,
      forwardAfterAbort: 0,
      exposureViolations: 0,
      target: s.target,
      maxOvershootPct: 0,
      restoreMismatches: 0,
      unreadWrites: 0,
      parallel: false,
      maxOut: 0,
      limitViolations: 0,
      paths: [],
      problems: [],
    };
    try {
      return await this.runIn(s, n, model, ids, outsideIds, otherId, report);
    } finally {
      this.live = null;
      await this.closeLanes();
    }
  }

  private async runIn(
    s: Scenario,
    n: number,
    model: string,
    ids: string[],
    outsideIds: string[],
    otherId: string,
    report: RunReport,
  ): Promise<RunReport> {
    // What every lane of the model runs at start, as this world sets it up.
    const startImages = new Map<string, string>([
      ...s.lanes.map((l, i) => [ids[i]!, ExposureWorld.startImage(l)] as const),
      ...outsideIds.map((id) => [id, PREVIOUS_IMAGE] as const),
    ]);
    const real = s.target === "real";
    if (real) this.machine = ContainerTarget.create();
    for (const [id, image] of startImages) {
      if (this.machine) {
        const url = await this.machine.openLane(id);
        this.endpoints.set(id, url);
        await this.machine.seed(id, image, url);
      } else {
        const sim = await SimLane.open(id, image);
        this.sims.set(id, sim);
        this.endpoints.set(id, sim.url);
      }
    }
    if (this.machine)
      s.lanes.forEach((l, i) => {
        if (l.brokenCandidate) this.machine!.breakImage(ids[i]!, IMAGE);
      });

    // The fleet before the release: weights summing to 100 over the recipe's lanes.
    const raw = s.lanes.map((l) => l.weight);
    const weights = largestRemainder(100, raw.every((w) => w === 0) ? raw.map(() => 1) : raw);
    const reported = (l: GenLane) => l.start !== "previous";
    this.core.seed([
      ...s.lanes.map((l, i) => ({
        id: ids[i]!,
        model,
        weight: weights[i]!,
        excluded: l.excluded,
        capabilities: [...l.capabilities].sort(),
        advertised: l.advertised,
        // The lane's own report of what it runs (absent: unknown to the engine).
        ...(reported(l) ? { image: ExposureWorld.startImage(l) } : {}),
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
    const watched = [...ids, ...outsideIds, ...(s.otherModel ? [otherId] : [])];
    const before = new Map(watched.map((id) => [id, view(this.core.lane(id))]));
    const historyStart = this.lastHistoryId();
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
        ...(real ? { health_url: this.endpoints.get(ids[i]!)! } : {}),
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
    // A lane in service already on the candidate: the start must be refused, naming it.
    const onCandidate = s.lanes.flatMap((l, i) =>
      l.start === "candidate" && !l.excluded ? [ids[i]!] : [],
    );
    const created = await op(this.h, "POST", "/v1/releases", recipe);
    if (created.status !== 201) {
      report.outcome = "refused";
      const text = await created.text();
      if (created.status !== 422) report.problems.push(`start answered ${created.status}: ${text}`);
      // Refused by the baseline check (not by the recipe's own contract check, which runs first).
      const byBaseline = text.includes("the recipe and the control plane disagree");
      for (const id of byBaseline ? onCandidate : [])
        if (!text.includes(`lane ${id} already runs the candidate`))
          report.problems.push(`start refused without naming lane ${id}, which runs the candidate`);
      if (this.lastHistoryId() !== historyStart)
        report.problems.push("a refused start wrote to the control plane");
      return report;
    }
    if (onCandidate.length > 0)
      report.problems.push(
        `start accepted with lane(s) ${onCandidate.join(", ")} in service on the candidate`,
      );
    const rid = ((await created.json()) as { id: string }).id;
    report.release = rid;
    let rec = await this.record(rid);
    const steps = rec.manifest.steps;
    report.parallel = rec.manifest.waves.some((w) => (w.max_unavailable ?? 1) > 1);
    // A wave declaring 100% that leaves no lane serving the previous image (the others are in
    // this or earlier waves, or were excluded at start) is in force from its first step: its
    // traffic has nowhere else to go while its lanes are redeployed (docs/state-machine.md).
    const waves = rec.manifest.waves;
    const early = waves.map((w, i) => {
      if (w.traffic !== 100) return false;
      const later = new Set(waves.slice(i + 1).flatMap((x) => x.lanes));
      return [...later].every((id) => before.get(id)?.excluded === true);
    });
    const live: Live = {
      rid,
      model,
      rec,
      report,
      ceiling: 0,
      early,
      compensating: false,
      lastDuringComp: Number.POSITIVE_INFINITY,
      lastAnswers: {},
      limits: limitChecker(rid, rec, before, (id) => this.core.lane(id).excluded, report),
      historyMark: historyStart,
      abortTick: null,
      dispatchedAfterAbort: [],
    };
    this.live = live;
    // Before anything is written: nothing of the candidate may be served.
    await this.measure("the start");

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
    const ctx: RunCtx = { rid, startImages, bwdFail, failedRuns };

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
        if (res.status >= 200 && res.status < 300) live.abortTick = this.tick();
      }
      const { t, fresh } = await this.pump(decide, ctx);
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
          await this.runner(waiting.p, "pass", ctx, {
            run_id: waiting.run.run_id,
            run_attempt: waiting.run.run_attempt + 1,
          });
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
        await this.handFix(rid, model, st, resolves, ctx);
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
    this.machine?.failPull(null);
    rec = await this.record(rid);
    report.outcome = rec.state;

    await this.checkEnd(rec, ids, watched, s, before, startImages, report);
    this.checkReadBack(this.wire.slice(wireStart), report);
    this.checkForwardAfterAbort(rid, rec, this.wire.slice(wireStart), live, report);
    return report;
  }

  /** Handled dispatches of the current engine (a restart starts a new dispatcher). */
  private handled = 0;

  /** One reconciler pass, then a runner for every dispatch it accepted. */
  private async pump(decide: (p: DispatchPayload) => "pass" | "fail", ctx: RunCtx) {
    const t = await this.h.engine.tick();
    const fresh = this.h.dispatcher.accepted.slice(this.handled);
    this.handled = this.h.dispatcher.accepted.length;
    const l = this.live;
    for (const p of fresh) {
      if (l && l.abortTick !== null && /_f$/.test(p.step_run_id))
        l.dispatchedAfterAbort.push(p.release.operation_key);
      const v = decide(p);
      const r = await this.runner(p, v, ctx);
      if (v === "fail" || r.failed) ctx.failedRuns.set(p.step_run_id, { p, run: r.run });
    }
    return { t, fresh };
  }

  /**
   * A runner for one dispatch: preflight; once accepted, the tool's effect on the lane (a `sim`
   * lane changed as the tool would, or deploy.sh on the machine), then the signed callback.
   * `verdict` "fail" forces a failed report (the tool's effect may still have happened).
   */
  private async runner(
    p: DispatchPayload,
    verdict: "pass" | "fail",
    ctx: RunCtx,
    run: RunIdentity = { run_id: String(++runSeq), run_attempt: 1 },
  ): Promise<{ run: RunIdentity; failed: boolean }> {
    const pre = await signedPost(this.h, preflightUrl(p.step_run_id), preflightBody(p, run));
    if (pre.status !== 200) return { run, failed: false };
    const a = p.args as {
      lane?: { id?: string; health_url?: string };
      image?: string;
      previous_image?: string;
    };
    const lane = a.lane?.id;
    const image = a.image;
    let failed = verdict === "fail";
    let checks: unknown[] | null = null;
    if (lane && image && (p.tool === "attach-queue-lane" || p.tool === "restore-queue-lane")) {
      this.trafficWhileRedeployed(lane, p.step_run_id);
      const backward = p.tool === "restore-queue-lane";
      if (this.machine) {
        if (backward && failed) this.machine.failPull(digest(image));
        const r = await this.machine.deploy([
          backward ? "restore" : "deploy",
          "--lane",
          lane,
          "--image",
          image,
          ...(a.previous_image ? ["--previous-image", a.previous_image] : []),
          "--health-url",
          a.lane!.health_url!,
          "--operation-key",
          p.release.operation_key,
          "--release",
          p.release.id,
          "--generation",
          String(p.release.generation),
          "--health-timeout",
          "2",
        ]);
        if (backward && failed) this.machine.failPull(null);
        failed = failed || r.code !== 0;
        checks = checksOf(r);
      } else {
        const sim = this.sims.get(lane);
        if (sim) {
          if (!backward) sim.image = image;
          else if (!failed || ctx.bwdFail?.effect === "applied") sim.image = image;
          else if (ctx.bwdFail?.effect === "down") sim.image = null;
        }
      }
      await this.measure(`${p.tool} of ${lane} to ${short(image)}${failed ? " (failed)" : ""}`);
    } else if (lane && image && p.tool === "run-smoke" && this.machine) {
      const r = await this.machine.deploy([
        "smoke",
        "--lane",
        lane,
        "--image",
        image,
        "--health-url",
        a.lane!.health_url!,
        "--health-timeout",
        "2",
      ]);
      failed = failed || r.code !== 0;
      checks = checksOf(r);
    }
    const cb = await signedPost(
      this.h,
      callbackUrl(p.step_run_id),
      callbackBody(p.step_run_id, run, failed ? "fail" : "pass", checks ? { checks } : {}),
    );
    if (cb.status === 200 && !failed && lane && image && this.machine)
      await this.stepWitness(p, lane, image);
    return { run, failed };
  }

  /** A lane redeployed while the router sends it traffic breaks the exposure rule. */
  private trafficWhileRedeployed(lane: string, step: string): void {
    const l = this.live;
    const state = this.core.lane(lane);
    if (l && !state.excluded && state.weight > 0) {
      l.report.exposureViolations++;
      l.report.problems.push(
        `${l.rid}: lane ${lane} was redeployed by ${step} while it carried ${state.weight}% of traffic`,
      );
    }
  }

  /**
   * After a runner step reported success on a `real` lane: the lane's own port answers with the
   * step's image, and the runtime has a container of that image listening.
   */
  private async stepWitness(p: DispatchPayload, lane: string, image: string): Promise<void> {
    const l = this.live;
    if (!l || !this.machine) return;
    const answer = await answerOf(this.endpoints.get(lane)!);
    const read = await this.machine.read(lane);
    const listening = read.serving.some((c) => digest(c.image) === digest(image));
    if (digest(answer) !== digest(image) || !listening) {
      l.report.stepMismatches++;
      l.report.problems.push(
        `${l.rid}: ${p.tool} ${p.step_run_id} reported success, but lane ${lane} answers with ${short(answer)} and the runtime has ${read.serving.map((c) => short(c.image)).join(", ") || "no container"} listening (${short(image)} expected)`,
      );
    }
  }

  /** What an operator does by hand before `resolve`: the failed backward step's effect. */
  private async handFix(
    rid: string,
    model: string,
    st: ManifestStepView,
    n: number,
    ctx: RunCtx,
  ): Promise<void> {
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
      await this.changed(`the operator's hand fix of step ${st.index + 1}`);
      return;
    }
    // The operator redeploys what the lane ran at start.
    const was = st.lane ? ctx.startImages.get(st.lane) : undefined;
    if (!st.lane || !was) return;
    if (this.machine) {
      this.machine.failPull(null);
      await this.machine.deploy([
        "restore",
        "--lane",
        st.lane,
        "--image",
        was,
        "--previous-image",
        IMAGE,
        "--health-url",
        this.endpoints.get(st.lane)!,
        "--operation-key",
        `hand:${rid}:${st.index}:${n}:lane=${st.lane}:`,
        "--health-timeout",
        "2",
      ]);
    } else {
      const sim = this.sims.get(st.lane);
      if (sim) sim.image = was;
    }
    await this.measure(`the operator's redeploy of ${st.lane}`);
  }

  private async record(rid: string): Promise<RecordView> {
    const res = await op(this.h, "GET", `/v1/releases/${rid}`);
    return (await res.json()) as RecordView;
  }

  /**
   * Every lane in its observed baseline (undone) or its declared state (succeeded), never a
   * mix: the control plane's lane state, the image the lane answers with on its own endpoint,
   * and on `real` releases the runtime's containers and deploy.sh's ledger.
   */
  private async checkEnd(
    rec: RecordView,
    ids: string[],
    watched: string[],
    s: Scenario,
    before: Map<string, LaneView>,
    startImages: Map<string, string>,
    report: RunReport,
  ): Promise<void> {
    const mismatch = (msg: string) => {
      report.restoreMismatches++;
      report.problems.push(msg);
    };
    const inRecipe = new Map(ids.map((id, i) => [id, s.lanes[i]!]));
    let declared: Record<string, number> | null = null;
    for (const st of rec.manifest.steps) {
      if (st.name === "set_traffic" && st.forward?.request?.op === "set_traffic")
        declared = st.forward.request.weights;
    }
    const undone = rec.state === "rolled_back" || rec.state === "aborted";
    for (const id of watched) {
      const now = view(this.core.lane(id));
      const was = before.get(id)!;
      const url = this.endpoints.get(id);
      const answer = url ? await answerOf(url) : null;
      const gen = inRecipe.get(id);
      if (!gen) {
        if (!same(now, was))
          mismatch(`lane ${id} outside the recipe changed: ${JSON.stringify(now)}`);
        if (url && digest(answer) !== digest(startImages.get(id)))
          mismatch(`lane ${id} outside the recipe answers with ${short(answer)}`);
        continue;
      }
      let want: LaneView | null = null;
      let image: string | undefined;
      if (rec.state === "succeeded") {
        want = {
          weight: declared?.[id] ?? 0,
          excluded: false,
          capabilities: [...gen.recipeCaps].sort(),
          advertised: true,
        };
        image = IMAGE;
      } else if (undone) {
        want = was;
        image = startImages.get(id);
      }
      if (!want) continue;
      const where = `${rec.state}, but lane ${id}`;
      if (!same(now, want))
        mismatch(
          `${where} is ${JSON.stringify(now)} at the control plane; ${undone ? "observed baseline" : "declared"} ${JSON.stringify(want)}`,
        );
      if (digest(answer) !== digest(image))
        mismatch(`${where} answers with ${short(answer)}, not ${short(image)}`);
      if (this.machine) {
        const read = await this.machine.read(id);
        report.targetReads++;
        const serving = read.serving.map((c) => c.image);
        if (serving.length !== 1 || digest(serving[0]) !== digest(image))
          mismatch(
            `${where} runs ${serving.map(short).join(" and ") || "no listening container"} on the machine (runtime), not ${short(image)}`,
          );
        if (read.ledgerImage !== null && digest(read.ledgerImage) !== digest(image))
          mismatch(
            `${where}: deploy.sh's ledger last made ${short(read.ledgerImage)} healthy there, not ${short(image)}`,
          );
      }
    }
  }

  /**
   * Once an abort was accepted, no forward step begins: no forward write of the release reaches
   * the control plane (its wire log) and no forward step is dispatched to a runner.
   * A forward write whose step run the engine had already begun before the abort (its intent
   * committed, the effect not yet sent) is counted apart (path `forward_in_flight_at_abort`):
   * the abort waits for it to settle and compensation undoes it.
   */
  private checkForwardAfterAbort(
    rid: string,
    rec: RecordView,
    wire: WireEntry[],
    live: Live,
    report: RunReport,
  ): void {
    if (live.abortTick === null) return;
    const begun = new Set<string>();
    for (const e of rec.history) {
      if (e.kind === "abort") break;
      const key = /started with operation key (\S+)/.exec(e.message)?.[1];
      if (key) begun.add(key);
    }
    for (const key of live.dispatchedAfterAbort) {
      if (begun.has(key)) {
        report.paths.push("forward_in_flight_at_abort");
        continue;
      }
      report.forwardAfterAbort++;
      report.problems.push(`${rid}: forward step ${key} dispatched after the abort was accepted`);
    }
    for (const w of wire) {
      if (w.method === "GET" || w.sent < live.abortTick) continue;
      if (!w.key?.startsWith(`${rid}:`) || !/^[^:]+:\d+:fwd:/.test(w.key)) continue;
      if (begun.has(w.key)) {
        report.paths.push("forward_in_flight_at_abort");
        continue;
      }
      report.forwardAfterAbort++;
      report.problems.push(
        `${rid}: forward write ${w.key} sent after the abort was accepted (HTTP ${w.status})`,
      );
    }
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

/** Context of one release the runner needs. */
interface RunCtx {
  rid: string;
  /** What every lane of the model ran at start (set up by this world). */
  startImages: Map<string, string>;
  bwdFail: Extract<GenFailure, { kind: "runner_fail_bwd" }> | undefined;
  failedRuns: Map<string, { p: DispatchPayload; run: RunIdentity }>;
}

let runSeq = 1_000_000;

/** deploy.sh's phase lines as the tools report them (`checks.json` records). */
function checksOf(r: DeployRun): unknown[] {
  return r.lines.map((l) => ({
    name: String(l.phase),
    status: l.status === "ok" ? "passed" : l.status === "skipped" ? "skipped" : String(l.status),
    exit_code: typeof l.exit_code === "number" ? l.exit_code : null,
    message: String(l.message ?? ""),
    ...(typeof l.image === "string" ? { image: l.image } : {}),
  }));
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
