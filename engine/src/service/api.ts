/**
 * What the engine offers to its HTTP app, CLI and dashboard. Implemented by
 * `ReleaseService` in `release-service.ts`; transport-free (no Hono types here).
 *
 * Methods throw `BatonError` (domain/errors.ts) for anything a caller did wrong; refusals of
 * protocol messages (fenced, stale, duplicate) come back as `Refusal` values so that they are
 * recorded in history and answered with their status, not thrown.
 */

import type { Problem } from "../domain/errors.ts";
import type { GateEvidence } from "../domain/gate/evidence.ts";
import type { LifecycleLookups } from "../domain/lifecycle-states.ts";
import type { SourceClaim, SourceMark } from "../domain/source-order.ts";
import type { ReleaseState } from "../domain/states.ts";
import type { HistoryEntry, Json, Release } from "../domain/types.ts";
import type { AttemptResult, ReleaseSummary } from "../ports/store.ts";
import type { CallbackBody, PreflightRequest } from "../protocol/messages.ts";
import type { ReleaseRecordDocument } from "../record/schema.ts";
import type { CredentialRevocations } from "./use-cases/credentials.ts";
import type { Drills } from "./use-cases/drills.ts";
import type { Incidents } from "./use-cases/incidents.ts";
import type { KillSwitches } from "./use-cases/kill-switch.ts";

/** A protocol message the engine refused; recorded in history with `reason`. */
export interface Refusal {
  ok: false;
  status: 404 | 409 | 422;
  code: string;
  reason: string;
  /** The bad fields of the request, each with its fix (as a 400's `problems`). */
  problems?: Problem[];
}

export interface Accepted<T extends Record<string, Json> = Record<string, Json>> {
  ok: true;
  /** false when the message was a replay of one already applied (idempotent answer). */
  changed: boolean;
  release: Release;
  reply: T;
}

/** The full record of one release, as `GET /v1/releases/:id` returns it. */
export interface ReleaseRecord {
  release: Release;
  history: HistoryEntry[];
  attempt_results: AttemptResult[];
  /** The release's stored gate evaluations, oldest first (docs/gate.md "Evidence"). */
  gate_evidence?: GateEvidence[];
}

export interface ReleaseApi {
  /** Incidents: declare, note, allow, resolve, timeline (docs/incidents.md). */
  readonly incidents: Incidents;
  /** Kill switches: withdraw and restore a capability at the control plane (docs/recovery-actions.md). */
  readonly killSwitches: KillSwitches;
  /** Credential revocations: run a recipe's revoke tool by reference (docs/recovery-actions.md). */
  readonly credentials: CredentialRevocations;
  /** Drill records and the drill policy (docs/recovery-actions.md "Drills"). */
  readonly drills: Drills;
  /**
   * Validates and compiles a recipe (object already parsed from YAML/JSON), creates a release
   * and starts it; with `opts.hold` it stays `pending` until `resume`. With
   * `opts.exposure: "dark"` (deploy) it waits at 0% exposure before its first traffic write
   * above 0% until `release` (docs/lifecycle.md).
   */
  start(
    recipe: unknown,
    actor: string,
    opts?: {
      hold?: boolean;
      bundle?: unknown;
      attestations?: unknown[];
      rollback?: boolean;
      exposure?: "dark";
      /** The recipe workflow's commit (docs/lifecycle.md "Merge order is release order"). */
      source?: SourceClaim;
    },
  ): Promise<Release>;
  /** The model's source mark (docs/lifecycle.md "Merge order is release order"), or null. */
  sourceMark(model: string): Promise<SourceMark | null>;
  /**
   * The recipe workflow found a true repeat of release `releaseId` at `claim.commit`: the
   * model's source mark moves there (use-cases/source-marks.ts). Throws `superseded` (409) as a
   * start from `claim` would.
   */
  acknowledgeSource(
    model: string,
    claim: SourceClaim,
    releaseId: string,
    actor: string,
  ): Promise<SourceMark>;
  get(id: string): Promise<ReleaseRecord>;
  /**
   * The release alone (no history, results or evidence), or null when unknown: what a list
   * needs to say where a live release is held. Optional: lists fall back on step numbers.
   */
  peek?(id: string): Promise<Release | null>;
  /**
   * One page of a release's history, oldest first: `limit` entries (1..1000) from position
   * `cursor` (0 = the first entry); `next_cursor` is null past the last one. 404 when unknown.
   */
  historyPage?(
    id: string,
    q: { cursor: number; limit: number },
  ): Promise<{ entries: HistoryEntry[]; next_cursor: number | null }>;
  /** The release record document (docs/record.md). */
  releaseRecord(id: string, repository?: string): Promise<ReleaseRecordDocument>;
  /** The owner accepts a closed release (docs/record.md "Acceptance"). */
  accept(
    id: string,
    by: string,
    o?: { expires_at?: number | null; note?: string; record_digest?: string },
  ): Promise<Accepted | Refusal>;
  /**
   * `"<resource_version>:<history count>"` of a release (null when unknown) and whether it
   * is terminal: what the live dashboard polls. One indexed query, shared by concurrent
   * callers within `LIVE_MARK_SHARE_MS`; never the whole record.
   */
  liveMark(id: string): Promise<string | null>;
  /** Like `liveMark`, with the release state. */
  liveState(id: string): Promise<{ mark: string; state: ReleaseState } | null>;
  list(q: { state?: ReleaseState; limit: number; before?: number }): Promise<ReleaseSummary[]>;
  abort(id: string, actor: string, reason: string): Promise<Accepted | Refusal>;
  /** `reason` (optional, "" for none) is kept in the history beside who resumed. */
  resume(id: string, actor: string, reason?: string): Promise<Accepted | Refusal>;
  /**
   * An operator pauses a running release: nothing new starts, in-flight work settles; it
   * waits paused, naming who and why, until `resume` (docs/lifecycle.md). Reason required.
   */
  pause(id: string, actor: string, reason: string): Promise<Accepted | Refusal>;
  /** A release deployed dark, waiting at 0% exposure, is exposed: the rollout goes on. */
  release(id: string, actor: string, reason: string): Promise<Accepted | Refusal>;
  /**
   * A release paused at an inconclusive gate (docs/gate.md) or waiting for a manual promotion
   * (docs/lifecycle.md) runs on into the next wave.
   */
  promote(id: string, actor: string, reason: string): Promise<Accepted | Refusal>;
  /** `reason` (optional, "" for none) is kept in the history beside who retried. */
  retry(stepRunId: string, actor: string, reason?: string): Promise<Accepted | Refusal>;
  /**
   * A succeeded release is rolled back: a new release runs the previous admitted manifest of
   * its model again (docs/lifecycle.md). Accepted: `release` is the new release.
   */
  rollback(id: string, actor: string, reason: string): Promise<Accepted | Refusal>;
  /**
   * The release whose admitted manifest a rollback of `release` would run again, or null when
   * no earlier succeeded release of its model kept its recipe (a rollback is then refused).
   */
  previousAdmitted?(release: Release): Promise<{ prev: { id: string } } | null>;
  /**
   * What the lifecycle verbs of `release` depend on in the store and the engine's clock
   * (domain/lifecycle-states.ts `LifecycleLookups`): the release a rollback would run again
   * (`rollbackTo`), a later release that has replaced it on the lanes (`supersededBy`; neither
   * verb is offered then), a closed rollback window (`rollbackClosed`) and a blue-green
   * release's old environment (`oldEnvironment`). `{}` for a release in flight.
   */
  lifecycleLookups?(release: Release): Promise<LifecycleLookups>;
  /**
   * A rolled-back, aborted or abandoned release is rolled forward: a new release of a fixed
   * recipe of the same model (docs/lifecycle.md). Accepted: `release` is the new release.
   */
  rollForward(
    id: string,
    recipe: unknown,
    actor: string,
    opts?: { bundle?: unknown; attestations?: unknown[] },
  ): Promise<Accepted | Refusal>;
  /**
   * needs_operator, a recoverable release waiting for its restore action after its traffic
   * rollback: the operator ran it (reason: what and what it showed); it ends `rolled_back`.
   */
  confirmRestore(id: string, actor: string, reason: string): Promise<Accepted | Refusal>;
  /** `restore_state`: run a waiting recoverable release's restore tool to `point`. */
  restoreState(
    id: string,
    actor: string,
    reason: string,
    point?: string,
  ): Promise<Accepted | Refusal>;
  /**
   * Verify the release's lanes (docs/lifecycle.md "Recovery verification"): after an undo whose
   * verification failed (`needs_operator`), or of a `succeeded` / `rolled_back` release. Accepted:
   * the reading is under way (`release.verification.state` is `verifying`); its result comes
   * with the `verified` event. 409 in other states, naming why.
   */
  verify(id: string, actor: string, reason?: string): Promise<Accepted | Refusal>;
  /** needs_operator: the operator did this backward step run's effect by hand (reason required). */
  resolve(stepRunId: string, actor: string, reason: string): Promise<Accepted | Refusal>;
  /**
   * needs_operator -> abandoned, with the image (or `none`) the operator confirms for every
   * lane of the release; 422 naming the lanes not confirmed.
   */
  abandon(
    id: string,
    actor: string,
    reason: string,
    lanes: Record<string, string>,
  ): Promise<Accepted | Refusal>;
  /** Body already authenticated and parsed. */
  preflight(stepRunId: string, req: PreflightRequest): Promise<Accepted | Refusal>;
  /** Body already authenticated (over `raw`) and parsed from those same bytes. */
  callback(stepRunId: string, body: CallbackBody, raw: string): Promise<Accepted | Refusal>;
  /** Records a refused request that never reached a release (e.g. forged credential). */
  recordRefused(stepRunId: string | null, kind: string, message: string, data: Json): Promise<void>;
  /** Throws when the store is unreachable. */
  health(): Promise<void>;
}
