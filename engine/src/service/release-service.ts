/**
 * The release service: `ReleaseApi` as the HTTP app, the CLI and the dashboard call it, a thin
 * facade over the apply kernel (kernel.ts, the one writer of release state) and the use cases
 * (use-cases/): start, lifecycle verbs, acceptance, operator verbs, the runner's protocol and
 * the reads. It builds them once from its deps; each method delegates.
 */
import type { AdmissionConfig } from "../admission/policy.ts";
import type { BundleVerifier } from "../admission/verify.ts";
import type { LifecycleLookups } from "../domain/lifecycle.ts";
import type { SourceClaim, SourceMark } from "../domain/source-order.ts";
import type { HistoryEntry, Json, Release, ReleaseEvent } from "../domain/types.ts";
import type { Clock } from "../ports/clock.ts";
import type { ControlPlane } from "../ports/control-plane.ts";
import type { Dispatcher } from "../ports/dispatcher.ts";
import type { ReleaseSummary, Store } from "../ports/store.ts";
import type { TargetProbe } from "../ports/target-probe.ts";
import type { CallbackBody, PreflightRequest } from "../protocol/messages.ts";
import type { ReleaseRecordDocument } from "../record/schema.ts";
import type { Accepted, Refusal, ReleaseApi, ReleaseRecord } from "./api.ts";
import { type Domain, defaultDomain } from "./domain.ts";
import type { EffectsDue } from "./effects-due.ts";
import { type DeploymentsPolicy, effectsPolicyOf, type NotifyPolicy } from "./effects-policy.ts";
import { type ApplyExtras, ApplyKernel, type StaleClaim } from "./kernel.ts";
import { type Logger, silentLog } from "./logger.ts";
import { StoreHealth } from "./maintenance.ts";
import { Acceptance, type AcceptOptions } from "./use-cases/accept.ts";
import { CredentialRevocations } from "./use-cases/credentials.ts";
import { Drills } from "./use-cases/drills.ts";
import { Incidents } from "./use-cases/incidents.ts";
import { KillSwitches } from "./use-cases/kill-switch.ts";
import { LifecycleVerbs } from "./use-cases/lifecycle.ts";
import { LifecycleReads, type PreviousAdmitted } from "./use-cases/lookups.ts";
import { OperatorVerbs } from "./use-cases/operator.ts";
import { type LiveState, ReleaseQueries } from "./use-cases/queries.ts";
import { RunnerProtocol } from "./use-cases/runner.ts";
import { SourceMarks } from "./use-cases/source-marks.ts";
import { type StartOptions, Starts } from "./use-cases/start.ts";

export {
  type DeploymentsPolicy,
  effectsPolicyOf,
  type NotifyPolicy,
} from "./effects-policy.ts";
export type { ApplyExtras, StaleClaim } from "./kernel.ts";
export { type Logger, silentLog } from "./logger.ts";
export { ROLLBACK_SCAN, SUPERSEDE_SCAN } from "./use-cases/lookups.ts";
export { LINEAGE_CHAIN_MAX, LIVE_MARK_SHARE_MS } from "./use-cases/queries.ts";
export type { StartOptions } from "./use-cases/start.ts";

export interface ReleaseServiceDeps {
  store: Store;
  clock: Clock;
  /** Engine base URL as runners reach it (callback URLs). */
  publicUrl: string;
  /**
   * Runs recovery actions' runner tools (a credential revocation) outside any release; the
   * reconciler dispatches release steps itself. Absent: such actions are refused (503).
   */
  dispatcher?: Dispatcher;
  log?: Logger;
  /** Transition and compiler; the real domain by default. */
  domain?: Domain;
  /**
   * Told after every commit that wrote effects (the core connects it to the reconciler's
   * `kick`). The service never sees the reconciler: it commits, the reconciler performs.
   */
  effectsDue?: EffectsDue;
  /**
   * Refuse a release whose lanes a non-terminal release owns (lane-claims.ts). Default true;
   * the Node entry turns it off on `BATON_EXCLUSIVE_LANES=off` (tests that stack releases).
   */
  exclusiveLanes?: boolean;
  /** Reload-and-retry bound on `resource_version` conflicts. Default 16. */
  maxConflictRetries?: number;
  /** Who is told what (docs/engine.md "Notifications"); none when absent or empty. */
  notify?: NotifyPolicy;
  /** GitHub deployment statuses of every release (docs/engine.md "GitHub Deployments"); off when absent. */
  deployments?: DeploymentsPolicy;
  /**
   * How manifests are admitted (docs/trust.md). Default `off`: code that builds the service
   * by hand decides; the engine's environment (`loadConfig`) refuses unsigned manifests
   * unless `BATON_ADMISSION=off` is set.
   */
  admission?: AdmissionConfig;
  /** Bundle verifier for `enforce` mode, built by the entry from the policy (admission/verify.ts). */
  admissionVerifier?: BundleVerifier;
  /**
   * The control plane, read at start for the observed baseline (docs/state-machine.md "The
   * observed baseline"). Absent, or without `lanes`: releases start from the recipe's
   * assumed baseline.
   */
  controlPlane?: ControlPlane;
  /**
   * Asks each lane's machine a rollback's prerequisites (ports/target-probe.ts). Absent: the
   * checks are recorded as not asked (`skipped`) and the rollback goes on.
   */
  targetProbe?: TargetProbe;
  /**
   * Without a `targetProbe`: ask a rollback's prerequisites by a read-only runner step on each
   * lane (the rollback's first steps, `PROBE_STEP`), through the dispatcher, instead of
   * recording them as not asked. The engine's entry turns it on when it dispatches to runners
   * but cannot reach the machines itself (BATON_DISPATCHER=github). Default false.
   */
  runnerProbe?: boolean;
}

export class ReleaseService implements ReleaseApi {
  readonly store: Store;
  readonly clock: Clock;
  private readonly kernel: ApplyKernel;
  private readonly queries: ReleaseQueries;
  private readonly reads: LifecycleReads;
  private readonly starts: Starts;
  private readonly lifecycle: LifecycleVerbs;
  private readonly acceptance: Acceptance;
  private readonly operator: OperatorVerbs;
  private readonly runner: RunnerProtocol;
  private readonly storeHealth: StoreHealth;
  private readonly sources: SourceMarks;
  /** Incidents and the release freeze they impose (use-cases/incidents.ts). */
  readonly incidents: Incidents;
  /** Kill switches (use-cases/kill-switch.ts). */
  readonly killSwitches: KillSwitches;
  /** Credential revocations run by runner tools (use-cases/credentials.ts). */
  readonly credentials: CredentialRevocations;
  /** Drill records and the drill policy (use-cases/drills.ts). */
  readonly drills: Drills;

  constructor(deps: ReleaseServiceDeps) {
    this.store = deps.store;
    this.clock = deps.clock;
    const log = deps.log ?? silentLog;
    const effects = effectsPolicyOf(deps);
    this.kernel = new ApplyKernel({
      store: deps.store,
      clock: deps.clock,
      domain: deps.domain ?? defaultDomain,
      log,
      effects,
      ...(deps.effectsDue ? { effectsDue: deps.effectsDue } : {}),
      ...(deps.maxConflictRetries !== undefined
        ? { maxConflictRetries: deps.maxConflictRetries }
        : {}),
    });
    const admission = deps.admission ?? { mode: "off" as const };
    const targetProbe = deps.targetProbe ?? null;
    this.incidents = new Incidents(deps.store, deps.clock, effects);
    this.drills = new Drills(deps.store, deps.clock, deps.controlPlane ?? null, this.incidents);
    this.killSwitches = new KillSwitches(
      deps.store,
      deps.clock,
      deps.controlPlane ?? null,
      this.incidents,
    );
    this.credentials = new CredentialRevocations(
      deps.store,
      deps.clock,
      deps.dispatcher ?? null,
      deps.publicUrl,
      this.incidents,
    );
    this.queries = new ReleaseQueries(deps.store);
    this.reads = new LifecycleReads(deps.store, () => deps.clock.now());
    this.starts = new Starts({
      kernel: this.kernel,
      log,
      effects,
      exclusiveLanes: deps.exclusiveLanes ?? true,
      admission,
      // The verifier (sigstore, Node-only) is built by the entry and injected.
      verifier: admission.mode === "enforce" ? (deps.admissionVerifier ?? null) : null,
      controlPlane: deps.controlPlane ?? null,
      incidents: this.incidents,
      drills: this.drills,
    });
    this.lifecycle = new LifecycleVerbs({
      kernel: this.kernel,
      starts: this.starts,
      queries: this.queries,
      reads: this.reads,
      log,
      targetProbe,
      runnerProbe: deps.runnerProbe === true && targetProbe === null,
    });
    this.sources = new SourceMarks(this.kernel, this.starts);
    this.acceptance = new Acceptance(this.kernel, this.queries);
    this.operator = new OperatorVerbs(this.kernel, this.reads, this.incidents);
    this.runner = new RunnerProtocol(this.kernel, log);
    this.storeHealth = new StoreHealth(deps.store);
  }

  // The kernel: the one writer (the reconciler feeds outcomes back through `apply`).

  /** Applies one event to one release (kernel.ts `apply`). */
  apply(
    releaseId: string,
    event: ReleaseEvent,
    extras: ApplyExtras = {},
  ): Promise<Accepted | Refusal | StaleClaim> {
    return this.kernel.apply(releaseId, event, extras);
  }

  /** A recent copy of the release (cached), for reads that need only immutable fields. */
  recentRelease(id: string): Promise<Release | null> {
    return this.kernel.recentRelease(id);
  }

  // Start and the lifecycle verbs (use-cases/start.ts, lifecycle.ts, accept.ts).

  start(recipe: unknown, actor: string, opts: StartOptions = {}): Promise<Release> {
    return this.starts.start(recipe, actor, opts);
  }

  sourceMark(model: string): Promise<SourceMark | null> {
    return this.sources.get(model);
  }

  acknowledgeSource(
    model: string,
    claim: SourceClaim,
    releaseId: string,
    actor: string,
  ): Promise<SourceMark> {
    return this.sources.acknowledge(model, claim, releaseId, actor);
  }

  rollback(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.lifecycle.rollback(id, actor, reason);
  }

  rollForward(
    id: string,
    recipe: unknown,
    actor: string,
    opts: { bundle?: unknown; attestations?: unknown[] } = {},
  ): Promise<Accepted | Refusal> {
    return this.lifecycle.rollForward(id, recipe, actor, opts);
  }

  accept(id: string, by: string, o: AcceptOptions = {}): Promise<Accepted | Refusal> {
    return this.acceptance.accept(id, by, o);
  }

  lifecycleLookups(release: Release): Promise<LifecycleLookups> {
    return this.reads.lifecycleLookups(release);
  }

  supersededBy(release: Release): Promise<ReleaseSummary | null> {
    return this.reads.supersededBy(release);
  }

  previousAdmitted(release: Release): Promise<PreviousAdmitted | null> {
    return this.reads.previousAdmitted(release);
  }

  // Operator verbs (use-cases/operator.ts).

  abort(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator.abort(id, actor, reason);
  }

  resume(id: string, actor: string, reason = ""): Promise<Accepted | Refusal> {
    return this.operator.resume(id, actor, reason);
  }

  pause(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator.pause(id, actor, reason);
  }

  release(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator.release(id, actor, reason);
  }

  promote(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator.promote(id, actor, reason);
  }

  confirmRestore(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator.confirmRestore(id, actor, reason);
  }

  restoreState(
    id: string,
    actor: string,
    reason: string,
    point?: string,
  ): Promise<Accepted | Refusal> {
    return this.operator.restoreState(id, actor, reason, point);
  }

  resolve(stepRunId: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator.resolve(stepRunId, actor, reason);
  }

  verify(id: string, actor: string, reason = ""): Promise<Accepted | Refusal> {
    return this.operator.verify(id, actor, reason);
  }

  abandon(
    id: string,
    actor: string,
    reason: string,
    lanes: Record<string, string>,
  ): Promise<Accepted | Refusal> {
    return this.operator.abandon(id, actor, reason, lanes);
  }

  retry(stepRunId: string, actor: string, reason = ""): Promise<Accepted | Refusal> {
    return this.operator.retry(stepRunId, actor, reason);
  }

  // The runner's protocol (use-cases/runner.ts).

  preflight(stepRunId: string, req: PreflightRequest): Promise<Accepted | Refusal> {
    return this.runner.preflight(stepRunId, req);
  }

  callback(stepRunId: string, body: CallbackBody, raw: string): Promise<Accepted | Refusal> {
    return this.runner.callback(stepRunId, body, raw);
  }

  recordRefused(stepRunId: string | null, kind: string, message: string, data: Json) {
    return this.runner.recordRefused(stepRunId, kind, message, data);
  }

  // Reads (use-cases/queries.ts).

  get(id: string): Promise<ReleaseRecord> {
    return this.queries.get(id);
  }

  peek(id: string): Promise<Release | null> {
    return this.queries.peek(id);
  }

  list(q: { state?: Release["state"]; limit: number; before?: number }): Promise<ReleaseSummary[]> {
    return this.queries.list(q);
  }

  historyPage(
    id: string,
    q: { cursor: number; limit: number },
  ): Promise<{ entries: HistoryEntry[]; next_cursor: number | null }> {
    return this.queries.historyPage(id, q);
  }

  liveMark(id: string): Promise<string | null> {
    return this.queries.liveMark(id);
  }

  liveState(id: string): Promise<LiveState | null> {
    return this.queries.liveState(id);
  }

  releaseRecord(id: string, repository?: string): Promise<ReleaseRecordDocument> {
    return this.queries.releaseRecord(id, repository);
  }

  /** Whether the store answers and takes a write (at most one probe a second: maintenance.ts). */
  health(): Promise<void> {
    return this.storeHealth.check();
  }
}
