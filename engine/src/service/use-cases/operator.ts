/**
 * The operator verbs on a release or one of its step runs (docs/lifecycle.md): abort, pause,
 * resume, release, promote, confirm_restore, verify, resolve, abandon, retry. Each is one event through
 * the kernel; a 409 refusal is said again with what the release accepts now.
 */
import type { ReleaseEvent } from "../../domain/types.ts";
import { releaseIdOfStepRun } from "../../protocol/ids.ts";
import type { Accepted, Refusal } from "../api.ts";
import { type ApplyKernel, notFound } from "../kernel.ts";
import type { Incidents } from "./incidents.ts";
import type { LifecycleReads } from "./lookups.ts";

export class OperatorVerbs {
  constructor(
    private readonly kernel: ApplyKernel,
    private readonly reads: LifecycleReads,
    private readonly incidents: Incidents,
  ) {}

  /** @throws BatonError `frozen` (409) when an open incident freezes `action` on the release's model. */
  private async unfrozen(id: string, action: "release" | "promote"): Promise<void> {
    const release = await this.kernel.recentRelease(id);
    if (release) await this.incidents.assertNotFrozen(release.manifest.model, action);
  }

  abort(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator(id, { type: "abort", actor, reason });
  }

  /** Resumes a paused release; a release held `pending` (created with `hold`) starts. */
  resume(id: string, actor: string, reason = ""): Promise<Accepted | Refusal> {
    return this.operator(id, { type: "resume", actor, reason });
  }

  /** An operator pauses a running release (docs/lifecycle.md "Pause and resume"). */
  pause(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator(id, { type: "pause", actor, reason });
  }

  /** First exposure of a release deployed dark (docs/lifecycle.md "Deploy and release"). */
  async release(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    await this.unfrozen(id, "release");
    return this.operator(id, { type: "release", actor, reason });
  }

  /** A release paused at an inconclusive gate: the operator accepts the risk (docs/gate.md). */
  async promote(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    await this.unfrozen(id, "promote");
    const r = await this.operator(id, { type: "promote", actor, reason });
    return r.ok || r.status !== 409 ? r : this.reads.withAccepted(id, r);
  }

  /** A recoverable release's restore action was run (docs/lifecycle.md "Recovery classes"). */
  confirmRestore(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    return this.operator(id, { type: "confirm_restore", actor, reason });
  }

  restoreState(
    id: string,
    actor: string,
    reason: string,
    point?: string,
  ): Promise<Accepted | Refusal> {
    return this.operator(id, {
      type: "restore_state",
      actor,
      reason,
      ...(point !== undefined ? { point } : {}),
    });
  }

  /**
   * Reads the lanes again and judges them (docs/lifecycle.md "Recovery verification"): an undo
   * whose verification failed, or a succeeded or rolled_back release.
   */
  async verify(id: string, actor: string, reason = ""): Promise<Accepted | Refusal> {
    const release = await this.reads.release(id);
    const superseded = release ? await this.reads.supersededRefusal(release, "verify") : null;
    return superseded ?? this.operator(id, { type: "verify", actor, reason });
  }

  /** needs_operator: the operator did this backward step run's effect by hand. */
  async resolve(stepRunId: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    const id = releaseIdOfStepRun(stepRunId);
    if (!id) return notFound(`[engine] step run ${stepRunId} does not exist`);
    return this.operator(id, { type: "resolve", actor, step_run_id: stepRunId, reason });
  }

  /** needs_operator → abandoned, with the image (or `none`) confirmed for every lane. */
  abandon(
    id: string,
    actor: string,
    reason: string,
    lanes: Record<string, string>,
  ): Promise<Accepted | Refusal> {
    return this.operator(id, { type: "abandon", actor, reason, lanes });
  }

  async retry(stepRunId: string, actor: string, reason = ""): Promise<Accepted | Refusal> {
    const id = releaseIdOfStepRun(stepRunId);
    if (!id) return notFound(`[engine] step run ${stepRunId} does not exist`);
    return this.operator(id, { type: "retry", actor, step_run_id: stepRunId, reason });
  }

  private async operator(id: string, ev: ReleaseEvent): Promise<Accepted | Refusal> {
    const r = (await this.kernel.apply(id, ev)) as Accepted | Refusal;
    return r.ok || r.status !== 409 ? r : this.reads.withRollbackOffer(id, r);
  }
}
