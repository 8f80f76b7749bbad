/**
 * The runner's side of the step protocol (docs/state-machine.md, DESIGN §4): preflights,
 * callbacks (with their attempt results and, for a rollback's probe step, the prerequisite
 * checks read from checks.json), and refused requests that never reached a release. Refusals
 * are bounded by the kernel's refusal log: one row per key a minute, carrying the count.
 */
import { checkpointOf, phaseOf, verificationSummary } from "../../domain/migration.ts";
import {
  checksFromProbe,
  isProbeStep,
  type PrerequisiteCheck,
  ProbeChecksError,
  probeLaneOf,
} from "../../domain/prerequisites.ts";
import { withRequests } from "../../domain/release-history.ts";
import { RestoreReportError, restoreReportOf } from "../../domain/restore-state.ts";
import {
  type FailingCheck,
  failingCheckOf,
  provesNothingRan,
  reportedImages,
} from "../../domain/result-evidence.ts";
import { storableValue } from "../../domain/storable-text.ts";
import type { Json, Release, RestoreReport } from "../../domain/types.ts";
import { faultPoint } from "../../faults.ts";
import { releaseIdOfStepRun } from "../../protocol/ids.ts";
import type { CallbackBody, PreflightRequest } from "../../protocol/messages.ts";
import type { Accepted, Refusal } from "../api.ts";
import { type ApplyKernel, notFound } from "../kernel.ts";
import { capLogTail } from "../log-tail.ts";
import type { Logger } from "../logger.ts";
import { SampledLog } from "../refusal-log.ts";

export class RunnerProtocol {
  /** Log lines of refusals with no release to record them on, sampled (refusal-log.ts). */
  private readonly refusalLines = new SampledLog();

  constructor(
    private readonly kernel: ApplyKernel,
    private readonly log: Logger,
  ) {}

  /** A runner asks whether attempt N of a step run may proceed. Body authenticated and parsed. */
  async preflight(stepRunId: string, req: PreflightRequest): Promise<Accepted | Refusal> {
    const id = releaseIdOfStepRun(stepRunId);
    if (!id) return notFound(`[engine] step run ${stepRunId} does not exist`);
    const r = await this.kernel.apply(id, { type: "preflight", ...req, step_run_id: stepRunId });
    if (!r.ok) return r as Refusal;
    const checkpoint = await this.checkpointFor(r.release, stepRunId);
    return (checkpoint ? { ...r, reply: { ...r.reply, checkpoint } } : r) as Accepted;
  }

  /**
   * A resumable step's last checkpoint (docs/recipes.md "Migrations"): for the forward run of
   * a migration's `migrate` step, the checkpoint of the latest attempt of this step run that
   * reported one (`checkpointOf` over its stored checks.json); null for every other step.
   */
  private async checkpointFor(release: Release, stepRunId: string): Promise<Json | null> {
    const sr = release.step_runs.find((s) => s.id === stepRunId);
    const step = sr ? release.manifest.steps[sr.step_index] : undefined;
    if (!sr || !step || sr.direction !== "fwd" || phaseOf(step) !== "migrate") return null;
    const results = (await this.kernel.store.listAttemptResults(release.id))
      .filter((a) => a.step_run_id === stepRunId)
      .sort((a, b) => b.attempt - a.attempt);
    for (const a of results) {
      const c = checkpointOf(a.checks);
      if (c) return c;
    }
    return null;
  }

  /**
   * A runner's result: applied with its attempt result (log tail capped) in the same commit.
   * Body authenticated over `raw` and parsed from those same bytes.
   */
  async callback(stepRunId: string, body: CallbackBody, raw: string): Promise<Accepted | Refusal> {
    const id = releaseIdOfStepRun(stepRunId);
    if (!id) return notFound(`[engine] step run ${stepRunId} does not exist`);
    const now = this.kernel.clock.now();
    const tail = capLogTail(body.log);
    const probe = await this.probeChecksOf(id, stepRunId, body);
    if (probe && !probe.ok) return probe;
    const r = await this.kernel.apply(
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
        ...withVerifications(body.checks),
        ...(probe ? { probe_checks: probe.checks } : {}),
        ...restoreReportIn(body.checks),
        ...runByOf(body),
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
    const release = await this.kernel.read(id, false);
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

  /**
   * Records a refused request (e.g. a forged credential) on its step run's release, at most
   * one row per (step run, kind) a minute; logged instead when there is no such step run.
   */
  async recordRefused(
    stepRunId: string | null,
    kind: string,
    message: string,
    data: Json,
  ): Promise<void> {
    const id = stepRunId ? releaseIdOfStepRun(stepRunId) : null;
    const now = this.kernel.clock.now();
    // Counted before anything is read: a flood costs one read and one row per key a minute.
    const requests = this.kernel.refusals.admit(`${stepRunId}|${kind}|bad_credential`, now);
    if (requests === null) return;
    // Distinct (guessable) step-run ids are distinct keys: the lines are sampled too.
    const warn = (m: string) => this.log.warn(m);
    if (!id) {
      this.refusalLines.line(warn, `${message} (no release to record it on)`, now);
      return;
    }
    const release = await this.kernel.read(id, false);
    if (!release?.step_runs.some((s) => s.id === stepRunId)) {
      this.refusalLines.line(warn, `${message} (step run ${stepRunId} does not exist)`, now);
      return;
    }
    await this.kernel.store.appendHistory([
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
}

/** `{ verifications }` when checks.json holds checks of kind verification, else `{}`. */
function withVerifications(checks: unknown): {
  verifications?: { names: string[]; failed: string[] };
} {
  const v = verificationSummary(checks);
  return v ? { verifications: v } : {};
}

/** `{ failing_check }` for a failed result whose checks.json names a failing check, else `{}`. */
function withFailingCheck(
  overall: "pass" | "fail",
  checks: unknown,
): { failing_check?: FailingCheck } {
  const c = failingCheckOf(overall, checks);
  return c ? { failing_check: storableValue(c) } : {};
}

/** Who ran the attempt, as the callback says (`{}` when it names nobody). */
function runByOf(body: CallbackBody): { run_by?: { actor?: string; triggering_actor?: string } } {
  const run_by = {
    ...(body.actor ? { actor: body.actor } : {}),
    ...(body.triggering_actor ? { triggering_actor: body.triggering_actor } : {}),
  };
  return Object.keys(run_by).length > 0 ? { run_by } : {};
}

/**
 * The restore report in a callback's checks.json (`restoreReportOf`), for any step run: the
 * transition reads it only on a restore step run, where a pass without one is a failure. A
 * malformed report counts as none (the step run's error then says what the tool must write).
 */
function restoreReportIn(checks: unknown): { restore_report?: RestoreReport } {
  try {
    const rep = restoreReportOf(checks);
    return rep ? { restore_report: rep } : {};
  } catch (e) {
    if (e instanceof RestoreReportError) return {};
    throw e;
  }
}
