/**
 * The release service: `ReleaseApi` on top of the pure transition and the store
 * (docs/state-machine.md "Persistence"). Every event goes through `apply`: load, transition,
 * one `store.commit` guarded by `resource_version`; on a conflict reload and re-run the
 * transition (bounded). Refusals only append history. Effects are performed later by the
 * reconciler, never here.
 */

import { admit } from "../admission/admit.ts";
import type { AdmissionConfig } from "../admission/policy.ts";
import { describeSigner } from "../admission/signer.ts";
import type { BundleVerifier } from "../admission/verify.ts";
import type { AdmissionReport } from "../domain/admission.ts";
import { observeBaseline } from "../domain/baseline.ts";
import { buildDeploymentReport, deploymentStateFor } from "../domain/deployments.ts";
import { BatonError } from "../domain/errors.ts";
import {
  acceptedActionsPhrase,
  heldForRollForward,
  LIFECYCLE_STATES,
  type LifecycleLookups,
  noRollbackTarget,
} from "../domain/lifecycle.ts";
import { closedReleaseAccepts, supersededWords } from "../domain/lifecycle-states.ts";
import {
  buildDriftNotice,
  buildNotice,
  type NoticeKind,
  noticeKindFor,
} from "../domain/notifications.ts";
import {
  checksAsking,
  checksFromProbe,
  checksNotAsked,
  isProbeStep,
  PROBE_TOOL,
  type PrerequisiteCheck,
  type PrerequisiteReport,
  ProbeChecksError,
  prerequisitesSummary,
  probeLaneOf,
  RECOVERY_CLASS_CHECK,
  recoveryClassCheck,
  withProbeSteps,
} from "../domain/prerequisites.ts";
import {
  type FailingCheck,
  failingCheckOf,
  provesNothingRan,
  reportedImages,
} from "../domain/result-evidence.ts";
import { TERMINAL_RELEASE_STATES } from "../domain/states.ts";
import { storableValue } from "../domain/storable-text.ts";
import type {
  DeploymentEffect,
  HistoryEntry,
  Json,
  Lineage,
  Manifest,
  NotifyEffect,
  ObservedBaseline,
  OutboxEffect,
  Release,
  ReleaseEvent,
} from "../domain/types.ts";
import { faultPoint } from "../faults.ts";
import type { Clock } from "../ports/clock.ts";
import type { ControlPlane, LanesRead } from "../ports/control-plane.ts";
import type { Notifier } from "../ports/notifier.ts";
import {
  type AttemptResult,
  type CreateExtras,
  LanesClaimed,
  type ReleaseSummary,
  type Store,
} from "../ports/store.ts";
import type { TargetProbe } from "../ports/target-probe.ts";
import { canonicalJson } from "../protocol/canonical-json.ts";
import { RELEASE_ID_PATTERN, releaseIdOfStepRun } from "../protocol/ids.ts";
import type { CallbackBody, PreflightRequest } from "../protocol/messages.ts";
import { manifestDigest } from "../recipes/digest.ts";
import { ACCEPT_KIND, buildRecord, type LineageLink } from "../record/build.ts";
import type { ReleaseRecordDocument } from "../record/schema.ts";
import type { Accepted, Refusal, ReleaseApi, ReleaseRecord } from "./api.ts";
import { type Domain, defaultDomain } from "./domain.ts";
import { DriftObserver, type DriftPolicy, type DriftStats } from "./drift.ts";
import type { EffectsDue } from "./effects-due.ts";
import { KeyedQueue } from "./keyed-queue.ts";
import { assertLanesFree, lanesClaimedError } from "./lane-claims.ts";
import { capLogTail } from "./log-tail.ts";
import { RefusalLog } from "./refusal-log.ts";

import { DEFAULT_RETENTION, Retention, type RetentionPolicy } from "./retention.ts";

/** One day, ms (the example expiry of an acceptance). */
const DAY_MS = 24 * 60 * 60 * 1000;

/** Minimal logger; `console` fits. */
export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string, err?: unknown): void;
}

export interface ReleaseServiceDeps {
  store: Store;
  clock: Clock;
  /** Engine base URL as runners reach it (callback URLs). */
  publicUrl: string;
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
  /** Retention of finished releases, run from `tick` (retention.ts). Default `DEFAULT_RETENTION`. */
  retention?: RetentionPolicy;
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
   * Drift detection (drift.ts): observe the lanes of models with no release in flight every
   * `intervalMs`, from `maintain`. Absent: off (hand-built services; the engine's environment
   * turns it on, BATON_DRIFT_INTERVAL_MS).
   */
  drift?: DriftPolicy;
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

/** What a start carries besides the recipe (docs/trust.md "Sending the bundle"). */
export interface StartOptions {
  /** Create the release `pending`; `resume` starts it. */
  hold?: boolean;
  /**
   * `dark` (deploy): the release waits at 0% exposure before its first traffic write above
   * 0% until `release` (docs/lifecycle.md "Deploy and release").
   */
  exposure?: "dark";
  /** The manifest's Sigstore bundle (JSON), as `baton sign` or the recipe workflow wrote it. */
  bundle?: unknown;
  /** Image attestation bundles (provenance, SBOM). */
  attestations?: unknown[];
  /** An explicit rollback: a manifest older than the model's last admitted one is allowed. */
  rollback?: boolean;
  /** Set by the lifecycle verbs (rollback, roll forward): stored on the release. */
  lineage?: Lineage;
  /**
   * The image the lanes run now, when it is not the recipe's `previous_image` (a rollback:
   * the rolled-back release's image). The plan's undo restores it; admission still checks the
   * recipe as signed (its digest is `baseline.recipe_manifest_digest`).
   */
  restoreImage?: string;
  /** A rollback's prerequisites as asked of the lanes: stored on the release and in its history. */
  prerequisites?: PrerequisiteReport;
  /**
   * Put one read-only probe step per lane first in the plan (`withProbeSteps`): a rollback
   * whose prerequisites are asked by runners. Its first effect runs only after every probe passed.
   */
  probeSteps?: boolean;
}

/** The engine's notification settings. */
export interface NotifyPolicy {
  notifiers: Notifier[];
  /** Notice kinds sent (a recipe's `notify.on` narrows them per release). */
  events: ReadonlySet<NoticeKind>;
  /** Retry schedule: first delay (ms, doubling, capped at 5 min) and tries in all. */
  retry: { baseMs: number; maxTries: number };
  /** Dashboard base URL for the release link (the public URL by default). */
  dashboardUrl?: string;
}

/** Where releases show as GitHub deployments. */
export interface DeploymentsPolicy {
  /** Environment of a release whose recipe names none, e.g. `production`. */
  environment: string;
  /** Ref a deployment names when the recipe pins no `tool_revision` (e.g. `main`). */
  ref: string;
  /** Retry schedule: first delay (ms, doubling, capped at 5 min) and tries in all. */
  retry: { baseMs: number; maxTries: number };
  /** Dashboard base URL for the release link (the public URL by default). */
  dashboardUrl?: string;
}

/** What `apply` may do besides the transition, in the same transaction. */
export interface ApplyExtras {
  /** Completes this outbox row in the commit (the event is that row's outcome). */
  complete_outbox?: { id: number; claim_token: string };
  /** Attempt results to store with the commit, built from the new release state. */
  attemptResults?: (next: Release) => AttemptResult[];
  /** Fault point name to pass just before the commit (crash tests). */
  beforeCommit?: () => void;
}

/** A stale outbox claim: another engine process took the row over, its outcome stands. */
export interface StaleClaim {
  ok: false;
  status: 409;
  code: "stale_claim";
  reason: string;
}

/**
 * How long (ms) one read of a release mark answers every tab polling it: with any number of
 * tabs open, the live dashboard costs at most one indexed query per release per this period.
 */
export const LIVE_MARK_SHARE_MS = 500;

/** How many of the latest succeeded releases a rollback looks through for the previous manifest. */
export const ROLLBACK_SCAN = 200;

/** How many newer releases (any model) the supersede check reads before it gives up (none found). */
export const SUPERSEDE_SCAN = 2000;
/** Ancestors a release record's `lineage.chain` lists at most. */
export const LINEAGE_CHAIN_MAX = 20;

/** Releases kept in the read cache (each a few tens of KB: ~25 MB at most). */
const RELEASE_CACHE_MAX = 500;

/** `bytes` random bytes as lowercase hex (Web Crypto: every runtime has it). */
function randomHex(bytes: number): string {
  const b = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * A compiled plan with the rollback's probe steps put first (`withProbeSteps`), its digest
 * taken again over the new canonical JSON (the plan actually run; admission checked the recipe).
 */
function probedPlan(m: Manifest): { manifest: Manifest; manifest_digest: string } {
  const manifest = withProbeSteps(m);
  return { manifest, manifest_digest: manifestDigest(canonicalJson(manifest)) };
}

export const silentLog: Logger = { info() {}, warn() {}, error() {} };

export class ReleaseService implements ReleaseApi {
  readonly store: Store;
  readonly clock: Clock;
  private readonly domain: Domain;
  private readonly log: Logger;
  private readonly maxRetries: number;
  private readonly effectsDue: EffectsDue | undefined;
  private readonly exclusiveLanes: boolean;
  private readonly notify: NotifyPolicy | null;
  private readonly deployments: DeploymentsPolicy | null;
  private readonly publicUrl: string;
  private readonly retention: Retention;
  private readonly admission: AdmissionConfig;
  private readonly verifier: BundleVerifier | null;
  private readonly controlPlane: ControlPlane | null;
  private readonly drift: DriftObserver | null;
  private readonly targetProbe: TargetProbe | null;
  private readonly runnerProbe: boolean;
  /** Tail of the `start` queue: starts run one at a time so the lane check cannot interleave. */
  private starting: Promise<unknown> = Promise.resolve();
  /**
   * Writes of one release (`apply`'s events, `accept`), keyed by release id: run one at a
   * time in this process, so two of them (a dispatch outcome and the preflight it triggered)
   * never race for the same `resource_version` here; only another engine's write can conflict.
   */
  private readonly perRelease = new KeyedQueue();
  /** When a commit last lost to another writer (ms; -∞: never): cached copies are checked then. */
  private othersWroteAt = Number.NEGATIVE_INFINITY;
  /** Live marks being read or read recently, shared by the dashboard tabs polling them. */
  private readonly marks = new Map<
    string,
    { at: number; value: Promise<{ mark: string; state: Release["state"] } | null> }
  >();
  /** Bounds the rows refused preflights and callbacks write (refusal-log.ts). */
  private readonly refusals = new RefusalLog();
  /** Last known state per release id, oldest first (insertion order). */
  private readonly cache = new Map<string, Release>();

  constructor(deps: ReleaseServiceDeps) {
    this.store = deps.store;
    this.clock = deps.clock;
    this.domain = deps.domain ?? defaultDomain;
    this.log = deps.log ?? silentLog;
    this.maxRetries = deps.maxConflictRetries ?? 16;
    this.effectsDue = deps.effectsDue;
    this.exclusiveLanes = deps.exclusiveLanes ?? true;
    this.notify = deps.notify && deps.notify.notifiers.length > 0 ? deps.notify : null;
    this.deployments = deps.deployments ?? null;
    this.publicUrl = deps.publicUrl;
    this.retention = new Retention(
      deps.store,
      deps.clock,
      deps.retention ?? DEFAULT_RETENTION,
      this.log,
    );
    this.admission = deps.admission ?? { mode: "off" };
    this.controlPlane = deps.controlPlane ?? null;
    this.targetProbe = deps.targetProbe ?? null;
    this.runnerProbe = deps.runnerProbe === true && this.targetProbe === null;
    this.drift =
      deps.drift && this.controlPlane?.lanes
        ? new DriftObserver(
            this,
            deps.store,
            this.controlPlane,
            deps.clock,
            deps.drift,
            this.log,
            (id, _d, message, now) => this.driftNotices(id, message, now),
          )
        : null;
    // The verifier (sigstore, Node-only) is built by the entry and injected.
    this.verifier = this.admission.mode === "enforce" ? (deps.admissionVerifier ?? null) : null;
  }

  /**
   * Applies one event to one release (docs/state-machine.md "Persistence").
   * Returns the transition's answer; a refusal is appended to history. With
   * `extras.complete_outbox`, the row is completed in the same commit, or, when the event
   * changed nothing or was refused, completed on its own; a lost claim yields `StaleClaim`
   * and the outcome is dropped (the row's new holder decides).
   * @throws BatonError `conflict` when `maxConflictRetries` reloads all lost the race.
   */
  apply(
    releaseId: string,
    event: ReleaseEvent,
    extras: ApplyExtras = {},
  ): Promise<Accepted | Refusal | StaleClaim> {
    return this.perRelease.run(releaseId, () => this.applyNow(releaseId, event, extras));
  }

  private async applyNow(
    releaseId: string,
    event: ReleaseEvent,
    extras: ApplyExtras,
  ): Promise<Accepted | Refusal | StaleClaim> {
    // Round 0 may use the cached copy; any doubt (conflict, or an answer other than an
    // accepted change) is settled against a fresh read before it counts.
    let fresh = false;
    for (let round = 0; round <= this.maxRetries; round++) {
      const release = await this.load(releaseId, fresh);
      if (!release) {
        if (extras.complete_outbox) await this.completeAlone(extras.complete_outbox);
        return notFound(`[engine] release ${releaseId} does not exist`);
      }
      const now = this.clock.now();
      const r = this.domain.transition(release, event, now);
      if ((!r.ok || !r.changed) && !fresh && this.cache.get(releaseId) === release) {
        fresh = true;
        round--; // not a conflict: re-decide on the stored state, uncounted
        continue;
      }
      if (!r.ok) {
        await this.appendRefused(event, r.code, r.history, now);
        if (extras.complete_outbox) await this.completeAlone(extras.complete_outbox);
        return { ok: false, status: r.status, code: r.code, reason: r.reason };
      }
      if (!r.changed) {
        await this.appendRefused(event, "repeat", r.history, now);
        if (extras.complete_outbox) await this.completeAlone(extras.complete_outbox);
        return { ok: true, changed: false, release: r.release, reply: r.reply };
      }
      extras.beforeCommit?.();
      const effects: OutboxEffect[] = [
        ...r.effects,
        ...this.notices(release, r.release, event, now),
        ...this.deploymentStatus(release, r.release, event, now),
      ];
      const res = await this.store.commit({
        release: r.release,
        expected_version: release.resource_version,
        history: r.history,
        effects,
        now,
        ...(extras.attemptResults ? { attempt_results: extras.attemptResults(r.release) } : {}),
        ...(extras.complete_outbox ? { complete_outbox: extras.complete_outbox } : {}),
      });
      if (res.ok) {
        this.remember(r.release);
        if (effects.length > 0) this.effectsDue?.notify();
        return { ok: true, changed: true, release: r.release, reply: r.reply };
      }
      if (res.conflict === "outbox_claim") {
        this.log.warn(
          `[engine] outcome of outbox row ${extras.complete_outbox?.id} for ${releaseId} dropped: the claim was taken over`,
        );
        return {
          ok: false,
          status: 409,
          code: "stale_claim",
          reason: `[engine] outbox row ${extras.complete_outbox?.id} is no longer held by this claim; its new holder's outcome stands`,
        };
      }
      // resource_version conflict: another writer won (another engine process: this one
      // applies a release's events one at a time); reload and decide again.
      this.othersWroteAt = this.clock.now();
      this.cache.delete(releaseId);
      fresh = true;
    }
    throw new BatonError(
      "conflict",
      `[engine] release ${releaseId} kept changing under ${this.maxRetries + 1} tries of ${event.type}; retry the request`,
    );
  }

  /**
   * The notices a committed change deserves, one per channel (domain/notifications.ts), to be
   * written to the outbox in the same commit. A recipe's `notify` narrows kinds and channels.
   */
  private notices(
    before: Release,
    after: Release,
    event: ReleaseEvent,
    now: number,
  ): NotifyEffect[] {
    if (!this.notify) return [];
    const kind = noticeKindFor(before, after, event);
    if (!kind) return [];
    const wanted = after.manifest.notify;
    if (!(wanted?.on ? wanted.on.includes(kind) : this.notify.events.has(kind))) return [];
    const base = (this.notify.dashboardUrl ?? this.publicUrl).replace(/\/+$/, "");
    const notice = buildNotice(kind, before, after, {
      url: `${base}/releases/${encodeURIComponent(after.id)}`,
      at: now,
    });
    return this.notify.notifiers
      .filter((n) => !wanted?.channels || (wanted.channels as string[]).includes(n.channel))
      .map((n) => ({
        type: "notify",
        channel: n.channel,
        delivery: `${after.id}.${after.uid ?? "0"}.v${after.resource_version}.${kind}.${n.channel}`,
        notice,
        not_before: null,
      }));
  }

  /**
   * The notices of a drift recorded on release `id` (docs/drift.md), one per channel, to be
   * written with the drift entry; none when notices are off or the `drift` kind is not sent.
   */
  private async driftNotices(id: string, message: string, now: number): Promise<NotifyEffect[]> {
    if (!this.notify) return [];
    const release = await this.store.getRelease(id);
    if (!release) return [];
    const wanted = release.manifest.notify;
    if (!(wanted?.on ? wanted.on.includes("drift") : this.notify.events.has("drift"))) return [];
    const base = (this.notify.dashboardUrl ?? this.publicUrl).replace(/\/+$/, "");
    const notice = buildDriftNotice(release, message, {
      url: `${base}/releases/${encodeURIComponent(id)}`,
      at: now,
    });
    return this.notify.notifiers
      .filter((n) => !wanted?.channels || (wanted.channels as string[]).includes(n.channel))
      .map((n) => ({
        type: "notify",
        channel: n.channel,
        delivery: `${id}.${release.uid ?? "0"}.drift.${now}.${n.channel}`,
        notice,
        not_before: null,
      }));
  }

  /**
   * The GitHub deployment status a committed change deserves (domain/deployments.ts), to be
   * written to the outbox in the same commit; none when deployments are off.
   */
  private deploymentStatus(
    before: Release,
    after: Release,
    event: ReleaseEvent | null,
    now: number,
  ): DeploymentEffect[] {
    const d = this.deployments;
    if (!d) return [];
    const state = deploymentStateFor(before, after, event);
    if (!state) return [];
    const base = (d.dashboardUrl ?? this.publicUrl).replace(/\/+$/, "");
    const report = buildDeploymentReport(state, after, {
      environment: d.environment,
      ref: d.ref,
      url: `${base}/releases/${encodeURIComponent(after.id)}`,
      at: now,
    });
    return [
      {
        type: "deployment",
        delivery: `${after.id}.${after.uid ?? "0"}.v${after.resource_version}.${state}`,
        report,
        not_before: null,
      },
    ];
  }

  /**
   * The release, from the cache unless `fresh`. The cache only saves a read: every write is
   * still conditional on `resource_version`, so a stale copy (another engine process wrote)
   * costs one conflict and a reload, never a wrong state.
   */
  private async load(id: string, fresh: boolean): Promise<Release | null> {
    if (!fresh) {
      const hit = this.cache.get(id);
      if (hit && this.clock.now() - this.othersWroteAt > SHARED_WRITERS_MS) return hit;
      if (hit) {
        // Another engine process wrote recently: check the copy (a version read) before
        // deciding on it, instead of losing a whole commit to a conflict.
        const r = await this.store.getReleaseIfChanged(id, hit.resource_version);
        if (r === "unchanged") return hit;
        if (r) this.remember(r);
        else this.cache.delete(id);
        return r;
      }
    }
    const r = await this.store.getRelease(id);
    if (r) this.remember(r);
    else this.cache.delete(id);
    return r;
  }

  private remember(r: Release): void {
    const held = this.cache.get(r.id);
    if (held && held.resource_version > r.resource_version) return;
    this.cache.delete(r.id);
    this.cache.set(r.id, r);
    if (this.cache.size > RELEASE_CACHE_MAX) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
  }

  /** A recent copy of the release (cached), for reads that need only immutable fields. */
  recentRelease(id: string): Promise<Release | null> {
    const hit = this.cache.get(id);
    return hit ? Promise.resolve(hit) : this.load(id, true);
  }

  /**
   * Appends the history of an event that changed nothing. Preflights and callbacks (which
   * anyone can repeat) go through the refusal log: at most one row per (step run, kind, code)
   * per minute, carrying the count of the requests it stands for (refusal-log.ts).
   */
  private async appendRefused(
    event: ReleaseEvent,
    code: string,
    history: HistoryEntry[],
    now: number,
  ): Promise<void> {
    if (history.length === 0) return;
    if (event.type !== "preflight" && event.type !== "callback") {
      await this.store.appendHistory(history);
      return;
    }
    const requests = this.refusals.admit(`${event.step_run_id}|${event.type}|${code}`, now);
    if (requests === null) return;
    await this.store.appendHistory(history.map((h) => withRequests(h, requests)));
  }

  private async completeAlone(row: { id: number; claim_token: string }): Promise<void> {
    const done = await this.store.completeOutbox(row.id, row.claim_token);
    if (!done) this.log.warn(`[engine] outbox row ${row.id}: claim lost before completion`);
  }

  /**
   * Creates a release from a recipe and starts it (`pending` → `running`, first step begun),
   * stored in one write. With `opts.hold` it stays `pending` until `resume` starts it.
   * Admission runs first (docs/trust.md); its checks are stored on the release.
   * @throws BatonError `contract_failed` (422) with every problem of the recipe.
   * @throws BatonError `admission_refused` (422), one problem per failed check (path = check
   *   name, with its fix); nothing is written then.
   * @throws BatonError `conflict` (409) when a non-terminal release owns one of its lanes
   *   (same model and lane id, or same host:port); nothing is written then.
   */
  start(recipe: unknown, actor: string, opts: StartOptions = {}): Promise<Release> {
    // Serialised within this process: check-then-create must not interleave with another
    // start (several engines on one database can still race; the store's lane claims settle
    // that, see lane-claims.ts). Starts also read the control plane's lanes (the observed
    // baseline): one at a time per engine keeps a burst of starts from timing those reads out.
    const run = this.starting.then(() => this.startNow(recipe, actor, opts));
    this.starting = run.catch(() => undefined);
    return run;
  }

  private async startNow(recipe: unknown, actor: string, opts: StartOptions) {
    const compiled = this.domain.compile(recipe);
    const report = admit(this.admission, this.verifier, {
      manifest: compiled.manifest,
      manifest_digest: compiled.manifest_digest,
      bundle: opts.bundle,
      attestations: opts.attestations ?? [],
      rollback: opts.rollback === true,
      mark: await this.store.getAdmissionMark(compiled.manifest.model),
      now: this.clock.now(),
    });
    if (!report.ok) {
      const failed = report.checks.filter((c) => c.outcome === "fail");
      this.log.warn(
        `[engine] admission refused a release of ${compiled.manifest.model} (manifest sha256:${compiled.manifest_digest}) for ${actor}: ${failed.map((c) => c.check).join(", ")}`,
      );
      throw new BatonError(
        "admission_refused",
        `[admission] refused: ${failed.map((c) => `${c.check}: ${c.message}`).join("; ")}`,
        failed.map((c) => ({ path: c.check, message: c.message, fix: c.fix ?? "" })),
      );
    }
    if (this.exclusiveLanes) await assertLanesFree(this.store, compiled.manifest);
    const baseline = await this.observedBaseline(recipe, compiled);
    const planRecipe =
      opts.restoreImage !== undefined
        ? { ...(recipe as Record<string, unknown>), previous_image: opts.restoreImage }
        : recipe;
    const compiledPlan =
      baseline || planRecipe !== recipe
        ? this.domain.compile(planRecipe, baseline?.lanes)
        : compiled;
    const plan = opts.probeSteps ? probedPlan(compiledPlan.manifest) : compiledPlan;
    const number = await this.store.nextReleaseNumber();
    const now = this.clock.now();
    const pending: Release = {
      ...this.domain.newRelease(
        `r${number}`,
        plan.manifest,
        plan.manifest_digest,
        now,
        randomHex(8),
      ),
      admission: report,
      ...(baseline ? { baseline } : {}),
      ...(opts.lineage ? { lineage: opts.lineage } : {}),
      ...(opts.prerequisites ? { prerequisites: opts.prerequisites } : {}),
      ...(opts.exposure === "dark" ? { exposure: "dark" as const } : {}),
    };
    const created: HistoryEntry = {
      release_id: pending.id,
      at: now,
      kind: "created",
      step_run_id: null,
      outcome: "accepted",
      message: `[engine] release ${pending.id} created by ${actor} from recipe ${compiled.manifest.recipe_name} (${compiled.manifest.steps.length} steps)${lineageMessage(opts.lineage, plan.manifest)}${opts.hold ? "; held pending until resumed" : ""}${opts.exposure === "dark" ? "; deployed dark: it waits at 0% exposure before its first traffic write until released" : ""}`,
      // The recipe and its bundles as admitted: what a later rollback to this manifest sends
      // again (docs/lifecycle.md). History rows are written once, never rewritten.
      data: {
        actor,
        manifest_digest: pending.manifest_digest,
        hold: opts.hold === true,
        ...(opts.exposure === "dark" ? { exposure: "dark" } : {}),
        ...(opts.lineage ? { lineage: opts.lineage as unknown as Json } : {}),
        recipe: recipe as Json,
        ...(opts.bundle !== undefined ? { bundle: opts.bundle as Json } : {}),
        ...(opts.attestations?.length ? { attestations: opts.attestations as Json } : {}),
      },
    };
    const admitted: HistoryEntry = {
      release_id: pending.id,
      at: now,
      kind: "admission",
      step_run_id: null,
      outcome: "accepted",
      message: admissionMessage(report),
      data: report as unknown as Json,
    };
    const checked: HistoryEntry[] = opts.prerequisites
      ? [
          {
            release_id: pending.id,
            at: now,
            kind: "prerequisites",
            step_run_id: null,
            outcome: "accepted",
            message:
              opts.prerequisites.asked_by === "runner"
                ? `[engine] rollback prerequisites: each lane's machine is asked by a read-only runner step (${PROBE_TOOL}) before anything of the rollback is applied: ${prerequisitesSummary(opts.prerequisites)}`
                : `[engine] rollback prerequisites asked of the lanes' machines: ${prerequisitesSummary(opts.prerequisites)}`,
            data: opts.prerequisites as unknown as Json,
          },
        ]
      : [];
    const observed: HistoryEntry[] = baseline
      ? [
          {
            release_id: pending.id,
            at: now,
            kind: "baseline",
            step_run_id: null,
            outcome: "accepted",
            message: `[engine] observed baseline of model ${plan.manifest.model} at the control plane: ${baseline.lanes
              .map(
                (l) =>
                  `${l.id} ${l.weight}%${l.excluded ? " excluded" : ""}${l.advertised ? ` advertising ${l.capabilities.join(",") || "nothing"}` : ""} running ${l.image ?? "an image the control plane does not report"}`,
              )
              .join(
                ", ",
              )}; compensation restores exactly this (a lane whose image is unknown gets ${plan.manifest.previous_image})`,
            data: baseline as unknown as Json,
          },
        ]
      : [];
    const extras: CreateExtras = {
      ...(report.mode === "enforce" && report.issued_at !== null
        ? {
            admissionMark: {
              model: compiled.manifest.model,
              issued_at: report.issued_at,
              manifest_digest: compiled.manifest_digest,
              release_id: pending.id,
            },
          }
        : {}),
      // One owner per lane across engines (G9): the claim commits with the release or not at all.
      ...(this.exclusiveLanes ? { claimLanes: compiled.manifest.lanes.map((l) => l.id) } : {}),
    };
    const create = async (r: Release, history: HistoryEntry[], effects: OutboxEffect[]) => {
      try {
        await this.store.createRelease(r, history, effects, now, extras);
      } catch (err) {
        if (err instanceof LanesClaimed) throw await lanesClaimedError(this.store, err);
        throw err;
      }
    };
    if (opts.hold) {
      await create(pending, [created, admitted, ...checked, ...observed], []);
      return pending;
    }
    const started = this.domain.transition(pending, { type: "start" }, now);
    if (!started.ok) {
      throw new BatonError(
        "illegal_transition",
        `[engine] could not start release: ${started.reason}`,
      );
    }
    // A new release is stored once, already started: resource_version 1, its first effects.
    const release: Release = { ...started.release, resource_version: 1 };
    await create(
      release,
      [created, admitted, ...checked, ...observed, ...started.history],
      [...started.effects, ...this.deploymentStatus(pending, release, { type: "start" }, now)],
    );
    this.remember(release);
    if (started.effects.length > 0) this.effectsDue?.notify();
    return release;
  }

  /**
   * Reads the control plane's lanes and checks them against the recipe
   * (domain/baseline.ts). Null when no control plane port can list lanes.
   * @throws BatonError `contract_failed` (422) naming every lane that disagrees, with the fix.
   * @throws BatonError `unavailable` (503) when the control plane cannot be read.
   */
  private async observedBaseline(
    recipe: unknown,
    compiled: { manifest: Manifest; manifest_digest: string },
  ): Promise<ObservedBaseline | null> {
    const cp = this.controlPlane;
    if (!cp?.lanes) return null;
    const { manifest } = compiled;
    let read: LanesRead;
    try {
      read = await cp.lanes();
    } catch (err) {
      read = { ok: false, message: (err as Error).message };
    }
    if (!read.ok) {
      throw new BatonError(
        "unavailable",
        `[engine] could not read the control plane to observe the baseline of model ${manifest.model}: ${read.message}; nothing was started — check the control plane (BATON_CONTROL_PLANE_URL) and start again`,
      );
    }
    // The recipe passed the contract check: its lanes are objects with an id.
    const stated = (recipe as { lanes: { id: string; weight?: number }[] }).lanes;
    const seen = observeBaseline(
      {
        model: manifest.model,
        image: manifest.image,
        previous_image: manifest.previous_image,
        lanes: manifest.lanes.map((l, i) => ({
          id: l.id,
          ...(typeof stated[i]?.weight === "number" ? { weight: stated[i].weight } : {}),
        })),
      },
      read.lanes,
    );
    if (!seen.ok) {
      const first = seen.problems[0];
      const more = seen.problems.length > 1 ? ` (and ${seen.problems.length - 1} more)` : "";
      throw new BatonError(
        "contract_failed",
        `[engine] the recipe and the control plane disagree about model ${manifest.model}: ${first?.message}; ${first?.fix}${more}`,
        seen.problems,
      );
    }
    return {
      read_at: this.clock.now(),
      lanes: seen.baseline,
      recipe_manifest_digest: compiled.manifest_digest,
    };
  }

  async get(id: string): Promise<ReleaseRecord> {
    if (!RELEASE_ID_PATTERN.test(id)) {
      throw new BatonError(
        "bad_request",
        `[engine] release id ${JSON.stringify(id)} is malformed`,
        [{ path: "id", message: "must look like r<number>", fix: "use an id such as r17" }],
      );
    }
    const release = await this.store.getRelease(id);
    if (!release) throw new BatonError("not_found", `[engine] release ${id} does not exist`);
    const [history, attempt_results, gate_evidence] = await Promise.all([
      this.store.getHistory(id),
      this.store.listAttemptResults(id),
      this.store.listEvidence(id),
    ]);
    return { release, history, attempt_results, gate_evidence };
  }

  async historyPage(
    id: string,
    q: { cursor: number; limit: number },
  ): Promise<{ entries: HistoryEntry[]; next_cursor: number | null }> {
    if (!(await this.store.getRelease(id)))
      throw new BatonError("not_found", `[engine] release ${id} does not exist`);
    // One more than asked says whether another page follows.
    const rows = await this.store.getHistory(id, { limit: q.limit + 1, offset: q.cursor });
    const entries = rows.slice(0, q.limit);
    return { entries, next_cursor: rows.length > q.limit ? q.cursor + q.limit : null };
  }

  async liveMark(id: string): Promise<string | null> {
    return (await this.liveState(id))?.mark ?? null;
  }

  liveState(id: string): Promise<{ mark: string; state: Release["state"] } | null> {
    const now = performance.now();
    const held = this.marks.get(id);
    if (held && now - held.at < LIVE_MARK_SHARE_MS) return held.value;
    const value = this.store
      .releaseMark(id)
      .then((m) =>
        m ? { mark: `${m.resource_version}:${m.history_count}`, state: m.state } : null,
      );
    this.marks.set(id, { at: now, value });
    value.catch(() => this.marks.delete(id));
    if (this.marks.size > 1000) {
      for (const [k, v] of this.marks) if (now - v.at >= LIVE_MARK_SHARE_MS) this.marks.delete(k);
    }
    return value;
  }

  /**
   * The release record document (docs/record.md); `repository` (owner/name) builds the run
   * links. @throws BatonError `not_found` / `bad_request` as `get`.
   */
  async releaseRecord(id: string, repository?: string): Promise<ReleaseRecordDocument> {
    return this.recordOf(await this.get(id), repository);
  }

  /** The record of a release already read (`get`), with its lineage chain read from the store. */
  private async recordOf(rec: ReleaseRecord, repository?: string): Promise<ReleaseRecordDocument> {
    const { release, history, gate_evidence, attempt_results } = rec;
    return buildRecord(release, history, {
      ...(repository ? { repository } : {}),
      evidence: gate_evidence ?? [],
      attemptResults: attempt_results,
      chain: await this.lineageChain(release),
    });
  }

  /**
   * The releases `release` descends from by rollback or roll forward, nearest first, following
   * `lineage.of` (at most `LINEAGE_CHAIN_MAX`, a cycle or a missing release ends it).
   */
  private async lineageChain(release: Release): Promise<LineageLink[]> {
    const out: LineageLink[] = [];
    const seen = new Set([release.id]);
    let next = release.lineage?.of;
    while (next && !seen.has(next) && out.length < LINEAGE_CHAIN_MAX) {
      seen.add(next);
      const r = await this.store.getRelease(next);
      if (!r) break;
      out.push({
        id: r.id,
        verb: r.lineage?.verb ?? null,
        of: r.lineage?.of ?? null,
        manifest_of: r.lineage?.manifest_of ?? null,
      });
      next = r.lineage?.of;
    }
    return out;
  }

  /**
   * The owner accepts a closed release's final state: an audited history entry naming who,
   * when, until when, and the record digest accepted. Refused (409) while the release is open,
   * when `record_digest` is given and is not the record's digest, and (409 `already_accepted`)
   * while an earlier acceptance stands: one without expiry is final, one with an expiry can be
   * replaced once it has passed (history keeps both). Acceptances of one release are
   * serialized with the release's other writes within this engine process, and across engines by a conditional commit on the
   * release's `resource_version` (`acceptNow`).
   */
  async accept(
    id: string,
    by: string,
    o: { expires_at?: number | null; note?: string; record_digest?: string } = {},
  ): Promise<Accepted | Refusal> {
    return this.perRelease.run(id, () => this.acceptNow(id, by, o));
  }

  /**
   * One acceptance, decided on a fresh read and written conditionally: the history entry is
   * committed with the release's `resource_version` raised by one (nothing else of the release
   * changes, so its `updated_at` and record digest stay), so of two engines accepting at once
   * exactly one commit lands; the other reloads and is refused `already_accepted` naming the
   * winner. @throws BatonError `conflict` when `maxConflictRetries` reloads all lost the race.
   */
  private async acceptNow(
    id: string,
    by: string,
    o: { expires_at?: number | null; note?: string; record_digest?: string },
  ): Promise<Accepted | Refusal> {
    for (let round = 0; round <= this.maxRetries; round++) {
      const read = await this.get(id);
      const { release } = read;
      const rec = await this.recordOf(read);
      if (!rec.release.closed || !rec.digest) {
        return {
          ok: false,
          status: 409,
          code: "not_closed",
          reason: `[engine] release ${id} is ${release.state}; only a closed release (succeeded, rolled_back, aborted, abandoned) can be accepted. It accepts: ${acceptedActionsPhrase(release)}`,
        };
      }
      if (o.record_digest && o.record_digest !== rec.digest) {
        return {
          ok: false,
          status: 409,
          code: "record_changed",
          reason: `[engine] release ${id}'s record digest is ${rec.digest}, not ${o.record_digest}; read the record again (baton record ${id}) and accept what it says`,
        };
      }
      const now = this.clock.now();
      const prior = rec.acceptance;
      if (prior && (prior.expires_at === null || prior.expires_at > now)) {
        const when = new Date(prior.at).toISOString();
        const way =
          prior.expires_at === null
            ? "without expiry; an acceptance without expiry is final, and the release record keeps it"
            : `until ${new Date(prior.expires_at).toISOString()}; a new acceptance is allowed once it has expired (it then replaces it, and the history keeps both)`;
        return {
          ok: false,
          status: 409,
          code: "already_accepted",
          reason: `[engine] release ${id} was already accepted by ${prior.by} at ${when} ${way}`,
        };
      }
      if (o.expires_at != null && o.expires_at <= now) {
        const message = `${new Date(o.expires_at).toISOString()} is in the past (the engine's clock reads ${new Date(now).toISOString()}); an acceptance cannot have expired already`;
        return {
          ok: false,
          status: 422,
          code: "bad_expiry",
          reason: `[engine] body.expires_at ${message}`,
          problems: [
            {
              path: "body.expires_at",
              message,
              fix: `give a time after now, e.g. ${new Date(now + 30 * DAY_MS).toISOString().replace(/\.\d{3}Z$/, "Z")} (30 days on), or leave body.expires_at out for an acceptance that does not expire`,
            },
          ],
        };
      }
      const next: Release = { ...release, resource_version: release.resource_version + 1 };
      const res = await this.store.commit({
        release: next,
        expected_version: release.resource_version,
        history: [
          {
            release_id: id,
            at: now,
            kind: ACCEPT_KIND,
            step_run_id: null,
            outcome: "accepted",
            message: `[engine] ${by} accepted the final state of ${id} (${release.state}, record sha256:${rec.digest.slice(0, 12)}…)${o.expires_at != null ? ` until ${new Date(o.expires_at).toISOString()}` : ""}${o.note ? `: ${o.note}` : ""}`,
            data: {
              actor: by,
              expires_at: o.expires_at ?? null,
              note: o.note ?? "",
              record_digest: rec.digest,
            },
          },
        ],
        effects: [],
        now,
      });
      if (res.ok) {
        this.remember(next);
        return { ok: true, changed: true, release: next, reply: { record_digest: rec.digest } };
      }
      // Another writer (another engine's acceptance, most likely) changed the release since
      // the read: read again and decide on what it wrote.
      this.othersWroteAt = this.clock.now();
      this.cache.delete(id);
    }
    throw new BatonError(
      "conflict",
      `[engine] release ${id} kept changing under ${this.maxRetries + 1} tries of accept; retry the request`,
    );
  }

  /**
   * Rollback of a succeeded release (docs/lifecycle.md): a new release that runs the previous
   * admitted manifest of the model again, the recipe and bundles that release was admitted
   * with, sent to admission as an explicit rollback (the freshness check allows an older
   * manifest); its undo restores `id`'s image. Refused with 409 naming what `id` accepts when
   * it is not `succeeded`, and 409 `no_previous_manifest` when no earlier succeeded release of
   * the model (among the latest `ROLLBACK_SCAN` succeeded ones) kept its recipe.
   * @throws BatonError as `start` (admission 422, lanes 409, control plane 422/503).
   */
  async rollback(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    const { release } = await this.get(id);
    if (!LIFECYCLE_STATES.rollback.has(release.state)) {
      return {
        ok: false,
        status: 409,
        code: "conflict",
        reason: `[engine] rollback takes a succeeded release; ${id} is ${release.state}. It accepts: ${await this.acceptedPhrase(release)}`,
      };
    }
    const superseded = await this.supersededRefusal(release, "rollback");
    if (superseded) return superseded;
    // Of the release itself, before any lane is asked: a roll_forward_only release ran past
    // the step after which rollback is unsafe (it succeeded), so it is never rolled back.
    const recovery = recoveryClassCheck(id, release.manifest.recovery);
    if (recovery.outcome === "fail") {
      this.log.warn(`[engine] rollback of ${id} refused: ${recovery.message}`);
      throw new BatonError(
        "prerequisite_failed",
        `[engine] rollback of ${id} refused before anything ran: recovery_class: ${recovery.message}; fix: ${recovery.fix}`,
        [{ path: RECOVERY_CLASS_CHECK, message: recovery.message, fix: recovery.fix ?? "" }],
      );
    }
    const model = release.manifest.model;
    const found = await this.previousAdmitted(release);
    if (found) {
      const { prev, data } = found;
      const prerequisites = await this.rollbackPrerequisites(id, prev.id, data.recipe, recovery);
      const started = await this.start(data.recipe, actor, {
        prerequisites,
        ...(prerequisites.asked_by === "runner" ? { probeSteps: true } : {}),
        ...(data.bundle !== undefined ? { bundle: data.bundle } : {}),
        attestations: Array.isArray(data.attestations) ? data.attestations : [],
        rollback: true,
        lineage: {
          verb: "rollback",
          of: id,
          manifest_of: prev.id,
          // A recoverable release's restore action must follow its rollback too.
          ...(release.manifest.recovery?.class === "recoverable"
            ? { restore: release.manifest.recovery.restore ?? "(the recipe names none)" }
            : {}),
        },
        restoreImage: release.manifest.image,
      });
      this.log.info(
        `[engine] ${actor} rolled back ${id} (${reason || "no reason given"}): ${started.id} runs ${prev.id}'s manifest again`,
      );
      return {
        ok: true,
        changed: true,
        release: started,
        reply: { rollback_of: id, manifest_of: prev.id, reason },
      };
    }
    // Nothing to go back to (the first release of the model, or the earlier ones predate
    // kept recipes): 422, the request cannot be taken as it stands; nothing is started.
    return {
      ok: false,
      status: 422,
      code: "no_previous_manifest",
      reason: `[engine] rollback of ${id} refused: ${noRollbackTarget(id, model)}. An older recipe you still have can be started as an explicit rollback: baton start <previous-recipe.yaml> --bundle <its bundle> --rollback`,
    };
  }

  /**
   * The release a rollback of `release` would run again: the latest earlier succeeded release
   * of its model (among the latest `ROLLBACK_SCAN` succeeded ones) that kept its recipe in its
   * `created` history entry, with that entry's recipe, bundle and attestations; null when none.
   */
  async previousAdmitted(release: Release): Promise<{
    prev: { id: string };
    data: { recipe: Json; bundle?: Json; attestations?: Json };
  } | null> {
    const model = release.manifest.model;
    const number = Number(release.id.slice(1));
    const earlier = (await this.store.listReleases({ state: "succeeded", limit: ROLLBACK_SCAN }))
      .filter((s) => s.model === model && Number(s.id.slice(1)) < number)
      .sort((a, b) => Number(b.id.slice(1)) - Number(a.id.slice(1)));
    for (const prev of earlier) {
      const created = (await this.store.getHistory(prev.id, { limit: 8 })).find(
        (h) => h.kind === "created",
      );
      const data = created?.data as { recipe?: Json; bundle?: Json; attestations?: Json } | null;
      if (!data || data.recipe === undefined) continue;
      return { prev, data: data as { recipe: Json; bundle?: Json; attestations?: Json } };
    }
    return null;
  }

  /**
   * Asks each lane of the previous manifest (`recipe`, admitted for `prevId`) what rolling
   * `id` back needs there (docs/lifecycle.md "Rollback prerequisites"): the deploy user's
   * access, the previous image present and loadable, free space. All lanes at once, each
   * bounded by the probe's deadlines. Without a probe every check is recorded as not asked.
   * @throws BatonError `prerequisite_failed` (422), one problem per failed check naming the
   *   lane, the check and the fix; nothing is written then.
   */
  private async rollbackPrerequisites(
    id: string,
    prevId: string,
    recipe: unknown,
    recovery: PrerequisiteCheck,
  ): Promise<PrerequisiteReport> {
    const { manifest } = this.domain.compile(recipe);
    const probe = this.targetProbe;
    const checks = (
      await Promise.all(
        manifest.lanes.map((l) =>
          probe
            ? probe.inspect(l, manifest.image)
            : Promise.resolve(
                this.runnerProbe
                  ? checksAsking(l.id)
                  : checksNotAsked(
                      l.id,
                      "this engine cannot reach the lanes' machines (no SSH key: BATON_DISPATCHER=github, or BATON_SSH_KEY_FILE unset); the rollback's first runner step is the first to find out",
                    ),
              ),
        ),
      )
    ).flat();
    checks.unshift(recovery);
    const report: PrerequisiteReport = {
      ok: checks.every((c) => c.outcome !== "fail"),
      at: this.clock.now(),
      image: manifest.image,
      checks,
      ...(!probe && this.runnerProbe ? { asked_by: "runner" as const } : {}),
    };
    if (!report.ok) {
      const failed = checks.filter((c) => c.outcome === "fail");
      this.log.warn(
        `[engine] rollback of ${id} to ${prevId}'s manifest refused: ${failed.map((c) => `lane ${c.lane} ${c.check}`).join(", ")}`,
      );
      throw new BatonError(
        "prerequisite_failed",
        `[engine] rollback of ${id} refused before anything ran: ${failed.map((c) => `lane ${c.lane} ${c.check}: ${c.message}; fix: ${c.fix}`).join("; ")}`,
        failed.map((c) => ({
          path: `lanes.${c.lane}.${c.check}`,
          message: c.message,
          fix: c.fix ?? "",
        })),
      );
    }
    return report;
  }

  /**
   * Roll forward past a rolled-back, aborted or abandoned release (docs/lifecycle.md): a new
   * release of a fixed recipe for the same model, admitted as any start (no rollback waiver).
   * Refused with 409 naming what `id` accepts in other states, 422 when the recipe's model is
   * not `id`'s or its image is the image `id` failed to roll out.
   * @throws BatonError as `start`.
   */
  async rollForward(
    id: string,
    recipe: unknown,
    actor: string,
    opts: { bundle?: unknown; attestations?: unknown[] } = {},
  ): Promise<Accepted | Refusal> {
    const { release } = await this.get(id);
    const held = heldForRollForward(release);
    if (!LIFECYCLE_STATES.roll_forward.has(release.state) && !held) {
      return {
        ok: false,
        status: 409,
        code: "conflict",
        reason: `[engine] roll forward takes a rolled_back, aborted or abandoned release, or a roll_forward_only release held for roll forward; ${id} is ${release.state}. It accepts: ${await this.acceptedPhrase(release)}`,
      };
    }
    const superseded = await this.supersededRefusal(release, "roll forward");
    if (superseded) return superseded;
    const compiled = this.domain.compile(recipe);
    if (compiled.manifest.model !== release.manifest.model) {
      throw new BatonError(
        "contract_failed",
        `[engine] the recipe is for model ${compiled.manifest.model}, ${id} for ${release.manifest.model}; a roll forward replaces a release of the same model`,
        [
          {
            path: "model",
            message: `is ${compiled.manifest.model}, not ${release.manifest.model}`,
            fix: `roll forward with a recipe for ${release.manifest.model}, or start it as a new release (baton start)`,
          },
        ],
      );
    }
    if (compiled.manifest.image === release.manifest.image) {
      throw new BatonError(
        "contract_failed",
        `[engine] the recipe names the same image as ${id} (${release.manifest.image}), the image that release did not finish rolling out; a roll forward needs a fixed image: a new build with a different digest`,
        [
          {
            path: "image",
            message: `is ${release.manifest.image}, the image of ${id}`,
            fix: "build the fix, set `image` to its digest and sign the recipe again",
          },
        ],
      );
    }
    if (held) {
      // Held past its roll-forward point: it ends aborted with nothing undone (the lanes stay
      // as they are) and frees its lanes for the fix. If the fix is then refused (admission,
      // lanes), roll forward from the aborted release again.
      const closed = await this.apply(id, {
        type: "abort",
        actor,
        reason: "closed for a roll forward",
      });
      if (!closed.ok) return closed as Refusal;
    }
    const started = await this.start(recipe, actor, {
      ...(opts.bundle !== undefined ? { bundle: opts.bundle } : {}),
      attestations: opts.attestations ?? [],
      lineage: { verb: "roll_forward", of: id },
    });
    return { ok: true, changed: true, release: started, reply: { roll_forward_of: id } };
  }

  list(q: { state?: Release["state"]; limit: number; before?: number }): Promise<ReleaseSummary[]> {
    return this.store.listReleases(q);
  }

  async abort(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator(id, { type: "abort", actor, reason });
  }

  /** Resumes a paused release; a release held `pending` (created with `hold`) starts. */
  async resume(id: string, actor: string): Promise<Accepted | Refusal> {
    return this.operator(id, { type: "resume", actor });
  }

  /** An operator pauses a running release (docs/lifecycle.md "Pause and resume"). */
  async pause(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator(id, { type: "pause", actor, reason });
  }

  /** First exposure of a release deployed dark (docs/lifecycle.md "Deploy and release"). */
  async release(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator(id, { type: "release", actor, reason });
  }

  /** A release paused at an inconclusive gate: the operator accepts the risk (docs/gate.md). */
  async promote(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    const r = await this.operator(id, { type: "promote", actor, reason });
    return r.ok || r.status !== 409 ? r : this.withAccepted(id, r);
  }

  /** A recoverable release's restore action was run (docs/lifecycle.md "Recovery classes"). */
  async confirmRestore(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator(id, { type: "confirm_restore", actor, reason });
  }

  async resolve(stepRunId: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    const id = releaseIdOfStepRun(stepRunId);
    if (!id) return notFound(`[engine] step run ${stepRunId} does not exist`);
    return this.operator(id, { type: "resolve", actor, step_run_id: stepRunId, reason });
  }

  async abandon(
    id: string,
    actor: string,
    reason: string,
    lanes: Record<string, string>,
  ): Promise<Accepted | Refusal> {
    return this.operator(id, { type: "abandon", actor, reason, lanes });
  }

  async retry(stepRunId: string, actor: string): Promise<Accepted | Refusal> {
    const id = releaseIdOfStepRun(stepRunId);
    if (!id) return notFound(`[engine] step run ${stepRunId} does not exist`);
    return this.operator(id, { type: "retry", actor, step_run_id: stepRunId });
  }

  /**
   * A 409 refusal that ends with what the release accepts now (`It accepts: abort, pause`), as
   * the rollback and roll-forward refusals do; unchanged when it already says so or the release
   * is gone.
   */
  private async withAccepted(id: string, r: Refusal): Promise<Refusal> {
    if (/\baccepts[: ]/.test(r.reason)) return r;
    const release = await this.store.getRelease(id);
    if (!release) return r;
    return { ...r, reason: `${r.reason}. It accepts: ${await this.acceptedPhrase(release)}` };
  }

  /**
   * What `lifecycleActions` needs from the store for `release` (docs/lifecycle.md): for a
   * succeeded release the release a rollback would run again (`rollbackTo`, null when none),
   * and for a finished one the later release of its model that has replaced it on the lanes
   * (`supersededBy`, null when none). `{}` for a release in flight.
   */
  async lifecycleLookups(release: Release): Promise<LifecycleLookups> {
    if (!TERMINAL_RELEASE_STATES.has(release.state)) return {};
    const later = await this.supersededBy(release);
    const supersededBy = later?.id ?? null;
    const supersededState = later?.state ?? null;
    if (!LIFECYCLE_STATES.rollback.has(release.state)) return { supersededBy, supersededState };
    return {
      rollbackTo: (await this.previousAdmitted(release))?.prev.id ?? null,
      supersededBy,
      supersededState,
    };
  }

  /**
   * The latest later release of `release`'s model that now defines its lanes, or null: one in
   * flight, succeeded, abandoned (an operator confirmed what the lanes run), or aborted with
   * effects left in place (a roll_forward_only release closed past its unsafe point). A later
   * release that rolled back, or was aborted before anything took effect, put the lanes back
   * and does not count. Reads newest first, at most `SUPERSEDE_SCAN` releases of any model.
   */
  async supersededBy(release: Release): Promise<ReleaseSummary | null> {
    const model = release.manifest.model;
    const number = Number(release.id.slice(1));
    let before: number | undefined;
    for (let read = 0; read < SUPERSEDE_SCAN; ) {
      const page = await this.store.listReleases({
        limit: 200,
        ...(before !== undefined ? { before } : {}),
      });
      for (const r of page) {
        if (Number(r.id.slice(1)) <= number) return null;
        if (r.model !== model) continue;
        const inPlace =
          !TERMINAL_RELEASE_STATES.has(r.state) ||
          r.state === "succeeded" ||
          r.state === "abandoned" ||
          (r.state === "aborted" && r.high_water_mark >= 0);
        if (inPlace) return r;
      }
      read += page.length;
      const last = page[page.length - 1];
      if (page.length < 200 || !last) return null;
      before = last.created_at;
    }
    return null;
  }

  /**
   * 409 `superseded` when a later release has replaced `release` on its model's lanes: a
   * rollback or roll forward from it would act on lanes it no longer defines. Null otherwise.
   */
  private async supersededRefusal(
    release: Release,
    verb: "rollback" | "roll forward",
  ): Promise<Refusal | null> {
    const later = await this.supersededBy(release);
    if (!later) return null;
    const words = supersededWords(
      { id: release.id, state: release.state, model: release.manifest.model },
      later.id,
      later.state,
    );
    return {
      ok: false,
      status: 409,
      code: "superseded",
      reason: `[engine] ${verb} of ${release.id} refused: ${words}`,
    };
  }

  /**
   * `acceptedActionsPhrase` with the store's lookups: rollback and roll forward named only
   * when they can be taken, and why not (superseded, no earlier admitted manifest) when not.
   */
  private async acceptedPhrase(release: Release): Promise<string> {
    return acceptedActionsPhrase(release, await this.lifecycleLookups(release));
  }

  /**
   * The transition's refusals of a finished release name its lifecycle verb by state alone
   * (`closedReleaseAccepts`, pure); with the store's lookups that phrase is said again by the
   * same function, which names why a verb cannot be taken (superseded, no earlier admitted
   * manifest) and what to do instead.
   */
  private async withRollbackOffer(id: string, r: Refusal): Promise<Refusal> {
    const release = await this.store.getRelease(id);
    if (!release) return r;
    const byState = closedReleaseAccepts(id, release.state);
    if (!r.reason.includes(byState)) return r;
    const o = await this.lifecycleLookups(release);
    return {
      ...r,
      reason: r.reason.replace(
        byState,
        closedReleaseAccepts(id, release.state, { model: release.manifest.model, o }),
      ),
    };
  }

  private async operator(id: string, ev: ReleaseEvent): Promise<Accepted | Refusal> {
    const r = (await this.apply(id, ev)) as Accepted | Refusal;
    return r.ok || r.status !== 409 ? r : this.withRollbackOffer(id, r);
  }

  async preflight(stepRunId: string, req: PreflightRequest): Promise<Accepted | Refusal> {
    const id = releaseIdOfStepRun(stepRunId);
    if (!id) return notFound(`[engine] step run ${stepRunId} does not exist`);
    const r = await this.apply(id, { type: "preflight", ...req, step_run_id: stepRunId });
    return r as Accepted | Refusal;
  }

  async callback(stepRunId: string, body: CallbackBody, raw: string): Promise<Accepted | Refusal> {
    const id = releaseIdOfStepRun(stepRunId);
    if (!id) return notFound(`[engine] step run ${stepRunId} does not exist`);
    const now = this.clock.now();
    const tail = capLogTail(body.log);
    const probe = await this.probeChecksOf(id, stepRunId, body);
    if (probe && !probe.ok) return probe;
    const r = await this.apply(
      id,
      {
        type: "callback",
        step_run_id: stepRunId,
        run_id: body.run_id,
        run_attempt: body.run_attempt,
        status: body.status,
        overall: body.overall,
        ...(provesNothingRan(body.overall, body.checks) ? { nothing_ran: true } : {}),
        ...withFailingCheck(body.overall, body.checks),
        ...(reportedImages(body.checks).length > 0 ? { images: reportedImages(body.checks) } : {}),
        ...(probe ? { probe_checks: probe.checks } : {}),
      },
      {
        beforeCommit: () => faultPoint("in_callback_before_commit", { step_run_id: stepRunId }),
        attemptResults: (next) => {
          const sr = next.step_runs.find((s) => s.id === stepRunId);
          const at = sr?.attempts.find(
            (a) => a.run_id === body.run_id && a.run_attempt === body.run_attempt,
          );
          if (!at) return [];
          return [
            {
              step_run_id: stepRunId,
              attempt: at.n,
              release_id: id,
              received_at: now,
              status: body.status,
              overall: body.overall,
              checks: (body.checks ?? null) as Json,
              log: tail.log,
              log_truncated: body.log_truncated || tail.cut,
              raw_callback: raw,
              preflight: {
                run_id: at.run_id,
                run_attempt: at.run_attempt,
                sha: at.sha,
                dispatch: at.dispatch,
                preflight_at: at.preflight_at,
              },
            },
          ];
        },
      },
    );
    if (r.ok && r.changed) faultPoint("after_callback_commit", { step_run_id: stepRunId });
    return r as Accepted | Refusal;
  }

  /**
   * For the callback of a rollback's probe step (`PROBE_STEP`): the lane's three prerequisite
   * checks read from the callback's checks.json (`checksFromProbe`), or a 422 `bad_probe_checks`
   * refusal naming the field and the fix (recorded in the release's history; nothing changes,
   * and the probe ends "not answered" at its callback deadline unless a good callback comes).
   * Null for any other step run.
   */
  private async probeChecksOf(
    id: string,
    stepRunId: string,
    body: CallbackBody,
  ): Promise<{ ok: true; checks: PrerequisiteCheck[] } | Refusal | null> {
    const release = await this.load(id, false);
    const sr = release?.step_runs.find((s) => s.id === stepRunId);
    const step = sr && sr.direction === "fwd" ? release?.manifest.steps[sr.step_index] : undefined;
    if (!release || !isProbeStep(step)) return null;
    const lane = probeLaneOf(step) ?? "?";
    try {
      return {
        ok: true,
        checks: checksFromProbe(
          lane,
          release.prerequisites?.image ?? release.manifest.image,
          body.checks,
        ),
      };
    } catch (err) {
      if (!(err instanceof ProbeChecksError)) throw err;
      const reason = `[engine] callback for probe step run ${stepRunId} (lane ${lane}) refused: ${err.path}: ${err.message}; fix: ${err.fix}`;
      await this.recordRefused(stepRunId, "callback", reason, {
        run_id: body.run_id,
        run_attempt: body.run_attempt,
        path: err.path,
      });
      return {
        ok: false,
        status: 422,
        code: "bad_probe_checks",
        reason,
        problems: [{ path: err.path, message: err.message, fix: err.fix }],
      };
    }
  }

  async recordRefused(
    stepRunId: string | null,
    kind: string,
    message: string,
    data: Json,
  ): Promise<void> {
    const id = stepRunId ? releaseIdOfStepRun(stepRunId) : null;
    const now = this.clock.now();
    // Counted before anything is read: a flood costs one read and one row per key a minute.
    const requests = this.refusals.admit(`${stepRunId}|${kind}|bad_credential`, now);
    if (requests === null) return;
    if (!id) {
      this.log.warn(`${message} (no release to record it on)`);
      return;
    }
    const release = await this.load(id, false);
    if (!release?.step_runs.some((s) => s.id === stepRunId)) {
      this.log.warn(`${message} (step run ${stepRunId} does not exist)`);
      return;
    }
    await this.store.appendHistory([
      withRequests(
        {
          release_id: id,
          at: now,
          kind,
          step_run_id: stepRunId,
          outcome: "refused",
          message,
          data,
        },
        requests,
      ),
    ]);
  }

  /** The drift observer's counters and last observation (`GET /metrics`); null when drift is off. */
  driftStats(): DriftStats | null {
    return this.drift?.stats() ?? null;
  }

  /**
   * The drift stats `GET /metrics` exports: this process's, or, for an engine that lives for
   * one event (drift mode `event`), those kept in the store; null when drift is off.
   */
  async driftMetrics(): Promise<DriftStats | null> {
    return (await this.drift?.currentStats()) ?? null;
  }

  /** Gives back what this engine holds for others to take over (the drift lease): a clean stop. */
  async stop(): Promise<void> {
    await this.drift?.stop();
  }

  /** Housekeeping run after each reconciler pass (the core's `tick`): retention of finished releases. */
  async maintain(): Promise<void> {
    await this.retention.maybeRun();
    await this.drift?.maybeRun();
  }

  private healthProbe: { at: number; done: Promise<void> } | null = null;

  /**
   * Whether the store answers and takes a write (`Store.ping({ write: true })`). One probe at
   * a time, and a successful one is reused for a second, so a flood of `/healthz` costs at
   * most one tiny write a second.
   */
  health(): Promise<void> {
    const now = Date.now();
    const last = this.healthProbe;
    if (last && now - last.at < 1000) return last.done;
    const done = this.store.ping({ write: true });
    this.healthProbe = { at: now, done };
    done.catch(() => {
      if (this.healthProbe?.done === done) this.healthProbe = null;
    });
    return done;
  }
}

/** `h` with `requests` (how many refusals the row stands for) in its data. */
function withRequests(h: HistoryEntry, requests: number): HistoryEntry {
  const base =
    h.data !== null && typeof h.data === "object" && !Array.isArray(h.data)
      ? h.data
      : { value: h.data };
  return { ...h, data: { ...base, requests } };
}

function admissionMessage(r: AdmissionReport): string {
  if (r.mode === "off") return "[admission] off (BATON_ADMISSION=off): no check ran";
  const signer = r.signer ? describeSigner(r.signer) : "nobody";
  return `[admission] passed ${r.checks.filter((c) => c.outcome === "pass").length} checks (${r.checks.map((c) => `${c.check} ${c.outcome}`).join(", ")}); signed by ${signer}${r.rollback ? "; explicit rollback" : ""}`;
}

function lineageMessage(l: Lineage | undefined, m: Manifest): string {
  if (!l) return "";
  return l.verb === "rollback"
    ? `; an explicit rollback of ${l.of}: ${l.manifest_of}'s admitted manifest runs again (image ${m.image}), its undo restores ${m.previous_image}`
    : `; a roll forward past ${l.of} (image ${m.image}, no going back to ${l.of}'s manifest)`;
}

function notFound(reason: string): Refusal {
  return { ok: false, status: 404, code: "not_found", reason };
}

/** `{ failing_check }` for a failed result whose checks.json names a failing check, else `{}`. */
function withFailingCheck(
  overall: "pass" | "fail",
  checks: unknown,
): { failing_check?: FailingCheck } {
  const c = failingCheckOf(overall, checks);
  return c ? { failing_check: storableValue(c) } : {};
}

/**
 * How long (ms) after a commit lost to another engine process cached copies are checked
 * against the stored version before use (`Store.getReleaseIfChanged`).
 */
const SHARED_WRITERS_MS = 10 * 60_000;
