/**
 * The lifecycle verbs that start a new release from a finished one (docs/lifecycle.md):
 * rollback of a succeeded release (the previous admitted manifest runs again, after its
 * prerequisites are asked of the lanes) and roll forward past a rolled-back, aborted or
 * abandoned one (a fixed recipe of the same model).
 */
import { BatonError } from "../../domain/errors.ts";
import { heldForRollForward, LIFECYCLE_STATES, noRollbackTarget } from "../../domain/lifecycle.ts";
import {
  checksAsking,
  checksNotAsked,
  type PrerequisiteCheck,
  type PrerequisiteReport,
  RECOVERY_CLASS_CHECK,
  recoveryClassCheck,
} from "../../domain/prerequisites.ts";
import { rollbackWindowClosed } from "../../domain/rollback-window.ts";
import { recipelessPredecessorProblem } from "../../domain/switch-back-words.ts";
import type { Release } from "../../domain/types.ts";
import type { TargetProbe } from "../../ports/target-probe.ts";
import type { Accepted, Refusal } from "../api.ts";
import type { ApplyKernel } from "../kernel.ts";
import type { Logger } from "../logger.ts";
import type { LifecycleReads } from "./lookups.ts";
import type { ReleaseQueries } from "./queries.ts";
import type { Starts } from "./start.ts";

export interface LifecycleDeps {
  kernel: ApplyKernel;
  starts: Starts;
  queries: ReleaseQueries;
  reads: LifecycleReads;
  log: Logger;
  /** Asks each lane's machine a rollback's prerequisites; null: not asked (or by runners). */
  targetProbe: TargetProbe | null;
  /** Without a probe: ask them by a read-only runner step per lane (`PROBE_STEP`). */
  runnerProbe: boolean;
}

export class LifecycleVerbs {
  constructor(private readonly deps: LifecycleDeps) {}

  /**
   * Rollback of a succeeded release (docs/lifecycle.md): a new release that runs the previous
   * admitted manifest of the model again, the recipe and bundles that release was admitted
   * with, sent to admission as an explicit rollback (the freshness check allows an older
   * manifest); its undo restores `id`'s image. Refused with 409 naming what `id` accepts when
   * it is not `succeeded`, and 422 `no_previous_manifest` when no earlier succeeded release of
   * the model (among the latest `ROLLBACK_SCAN` succeeded ones) kept its recipe, or the one
   * before `id` is a switch back without a recipe of the image it put back (the problem names
   * `image`).
   * @throws BatonError as `start` (admission 422, lanes 409, control plane 422/503).
   */
  async rollback(id: string, actor: string, reason: string): Promise<Accepted | Refusal> {
    const { reads, log } = this.deps;
    const { release } = await this.deps.queries.get(id);
    if (!LIFECYCLE_STATES.rollback.has(release.state)) {
      return {
        ok: false,
        status: 409,
        code: "conflict",
        reason: `[engine] rollback takes a succeeded release; ${id} is ${release.state}. It accepts: ${await reads.acceptedPhrase(release)}`,
      };
    }
    const superseded = await reads.supersededRefusal(release, "rollback");
    if (superseded) return superseded;
    // After the rollback window: what the release replaced may be gone (a migration's
    // contract may have run), so the way back is a new release, not a rollback.
    const closed = rollbackWindowClosed(release, this.deps.kernel.clock.now());
    if (closed) {
      log.warn(`[engine] rollback of ${id} refused: ${closed}`);
      return {
        ok: false,
        status: 409,
        code: "rollback_window_closed",
        reason: `[engine] rollback of ${id} refused: ${closed}`,
      };
    }
    // Of the release itself, before any lane is asked: a roll_forward_only release ran past
    // the step after which rollback is unsafe (it succeeded), so it is never rolled back.
    const recovery = recoveryClassCheck(id, release.manifest.recovery);
    if (recovery.outcome === "fail") {
      log.warn(`[engine] rollback of ${id} refused: ${recovery.message}`);
      throw new BatonError(
        "prerequisite_failed",
        `[engine] rollback of ${id} refused before anything ran: recovery_class: ${recovery.message}; fix: ${recovery.fix}`,
        [{ path: RECOVERY_CLASS_CHECK, message: recovery.message, fix: recovery.fix ?? "" }],
      );
    }
    if (release.manifest.strategy === "blue_green") return this.switchBack(release, actor, reason);
    const model = release.manifest.model;
    const { found, gap } = await reads.rollbackTarget(release);
    if (found) {
      const { prev, data } = found;
      const prerequisites = await this.rollbackPrerequisites(id, prev.id, data.recipe, recovery);
      const started = await this.deps.starts.start(data.recipe, actor, {
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
      log.info(
        `[engine] ${actor} rolled back ${id} (${reason || "no reason given"}): ${started.id} runs ${prev.id}'s manifest again`,
      );
      return {
        ok: true,
        changed: true,
        release: started,
        reply: { rollback_of: id, manifest_of: prev.id, reason },
      };
    }
    // The release before it is a switch back without a recipe of the image it put back: its
    // recipe would deploy another image, so the way back is a recipe of that image.
    if (gap) {
      return {
        ok: false,
        status: 422,
        code: "no_previous_manifest",
        reason: `[engine] rollback of ${id} refused: ${noRollbackTarget(id, model, gap)}`,
        problems: [recipelessPredecessorProblem(model, gap)],
      };
    }
    // Nothing to go back to (the first release of the model, or the earlier ones predate
    // kept recipes): 422, the request cannot be taken as it stands; nothing is started.
    return {
      ok: false,
      status: 422,
      code: "no_previous_manifest",
      reason: `[engine] rollback of ${id} refused: ${noRollbackTarget(id, model)}. An older recipe you still have can be signed again (a newer issued_at) and started: baton sign <previous-recipe.yaml>, then baton start <previous-recipe.yaml> --bundle <the new bundle>`,
    };
  }

  /**
   * Rollback of a succeeded blue-green release inside its rollback window (docs/recipes.md
   * "Strategies"): a switch back. A new release, admitted as a rollback with the kept recipe of
   * the image it returns to (`keptRecipeOf`; else `release`'s own recipe), whose plan checks
   * each old-environment lane with the runner's smoke step, then is one traffic write moving
   * every request to the old environment, still warm on the previous image, and its read-back
   * (domain/blue-green.ts `switchBackPlan`); nothing is redeployed.
   * @throws BatonError `conflict` (409) when the old environment is not warm at the control
   *   plane; as `start` otherwise (admission 422, lanes 409, control plane 503).
   */
  private async switchBack(release: Release, actor: string, reason: string): Promise<Accepted> {
    // Admitted with a kept recipe of the image it puts back, so its record is what ran after
    // it; without one, with `release`'s own (then no later rollback runs it again).
    const data =
      (await this.deps.reads.keptRecipeOf(release, release.manifest.previous_image)) ??
      (await this.deps.reads.ownAdmitted(release));
    if (!data) {
      throw new BatonError(
        "conflict",
        `[engine] rollback of ${release.id} refused: it did not keep the recipe it was admitted with, so its switch back cannot be admitted; roll forward with a recipe that lists the old environment's lanes in its waves (baton start <recipe.yaml>)`,
      );
    }
    const started = await this.deps.starts.start(data.recipe, actor, {
      ...(data.bundle !== undefined ? { bundle: data.bundle } : {}),
      attestations: Array.isArray(data.attestations) ? data.attestations : [],
      rollback: true,
      switchBack: release,
      lineage: {
        verb: "rollback",
        of: release.id,
        switch_back: true,
        ...(release.manifest.recovery?.class === "recoverable"
          ? { restore: release.manifest.recovery.restore ?? "(the recipe names none)" }
          : {}),
      },
    });
    this.deps.log.info(
      `[engine] ${actor} rolled back ${release.id} (${reason || "no reason given"}): ${started.id} switches the traffic back to its old environment`,
    );
    return {
      ok: true,
      changed: true,
      release: started,
      reply: { rollback_of: release.id, switch_back: true, reason },
    };
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
    const { kernel, targetProbe: probe, runnerProbe, log } = this.deps;
    const { manifest } = kernel.domain.compile(recipe);
    const checks = (
      await Promise.all(
        manifest.lanes.map((l) =>
          probe
            ? probe.inspect(l, manifest.image)
            : Promise.resolve(
                runnerProbe
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
      at: kernel.clock.now(),
      image: manifest.image,
      checks,
      ...(!probe && runnerProbe ? { asked_by: "runner" as const } : {}),
    };
    if (!report.ok) {
      const failed = checks.filter((c) => c.outcome === "fail");
      log.warn(
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
    const { reads, kernel } = this.deps;
    const { release } = await this.deps.queries.get(id);
    const held = heldForRollForward(release);
    if (!LIFECYCLE_STATES.roll_forward.has(release.state) && !held) {
      return {
        ok: false,
        status: 409,
        code: "conflict",
        reason: `[engine] roll forward takes a rolled_back, aborted or abandoned release, or a roll_forward_only release held for roll forward; ${id} is ${release.state}. It accepts: ${await reads.acceptedPhrase(release)}`,
      };
    }
    const superseded = await reads.supersededRefusal(release, "roll forward");
    if (superseded) return superseded;
    const compiled = kernel.domain.compile(recipe);
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
      const closed = await kernel.apply(id, {
        type: "abort",
        actor,
        reason: "closed for a roll forward",
      });
      if (!closed.ok) return closed as Refusal;
    }
    const started = await this.deps.starts.start(recipe, actor, {
      ...(opts.bundle !== undefined ? { bundle: opts.bundle } : {}),
      attestations: opts.attestations ?? [],
      lineage: { verb: "roll_forward", of: id },
    });
    return { ok: true, changed: true, release: started, reply: { roll_forward_of: id } };
  }
}
