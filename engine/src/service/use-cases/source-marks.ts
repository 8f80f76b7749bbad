/**
 * The models' source marks (docs/lifecycle.md "Merge order is release order"): read by the
 * recipe workflow before it decides, and moved without a release when it finds a true repeat
 * of what stands, so that a later re-run of an older commit is refused even then. A start moves
 * the mark itself (start.ts).
 */
import { BatonError } from "../../domain/errors.ts";
import type { SourceClaim, SourceMark } from "../../domain/source-order.ts";
import { shortCommit } from "../../domain/source-order.ts";
import type { ApplyKernel } from "../kernel.ts";
import type { Starts } from "./start.ts";

export class SourceMarks {
  constructor(
    private readonly kernel: ApplyKernel,
    private readonly starts: Starts,
  ) {}

  /** The model's source mark, or null before the recipe workflow first acted on it. */
  get(model: string): Promise<SourceMark | null> {
    return this.kernel.store.getSourceMark(model);
  }

  /**
   * The recipe workflow found, at `claim.commit`, a true repeat of release `releaseId` (its
   * recipe has that release's content): the mark moves to the commit, standing for that
   * release, and the release's history says so when the mark stood for another release. The
   * mark's own commit changes nothing.
   * @throws BatonError `not_found` (404) when the release is unknown, `bad_request` (400) when it
   *   is of another model, `superseded` (409) as a start from `claim` would be refused.
   */
  async acknowledge(
    model: string,
    claim: SourceClaim,
    releaseId: string,
    actor: string,
  ): Promise<SourceMark> {
    const { store, clock } = this.kernel;
    const release = await store.getRelease(releaseId);
    if (!release) {
      throw new BatonError("not_found", `[engine] no release ${releaseId}`, [
        {
          path: "body.release",
          message: `no release ${releaseId}`,
          fix: "name a release of this model",
        },
      ]);
    }
    if (release.manifest.model !== model) {
      throw new BatonError(
        "bad_request",
        `[engine] release ${releaseId} is of model ${release.manifest.model}, not ${model}`,
        [
          {
            path: "body.release",
            message: `release ${releaseId} is of model ${release.manifest.model}`,
            fix: `name a release of model ${model}`,
          },
        ],
      );
    }
    const mark = await this.starts.judgeSource(model, claim);
    if (mark?.commit === claim.commit) return mark;
    const now = clock.now();
    const next: SourceMark = {
      model,
      commit: claim.commit,
      committed_at: claim.committed_at,
      release_id: releaseId,
      at: now,
    };
    if (!(await store.raiseSourceMark(next, mark?.commit ?? null))) {
      // Moved since it was judged: judged again it refuses; if not, say so plainly.
      await this.starts.judgeSource(model, claim);
      throw new BatonError(
        "superseded",
        `[engine] the source mark of model ${model} moved while commit ${shortCommit(claim.commit)} was being recorded; run the recipe workflow again`,
      );
    }
    // Said once in the release's history, when the mark comes to stand for it (a revert to what
    // the fleet runs); a merge that changed another recipe moves the mark quietly.
    if (mark?.release_id === releaseId) return next;
    await store.appendHistory([
      {
        release_id: releaseId,
        at: now,
        kind: "source_repeat",
        step_run_id: null,
        outcome: "accepted",
        message: `[engine] commit ${shortCommit(claim.commit)} of the recipe repository has this release's recipe for model ${model}; ${releaseId} stands for it and nothing was started (by ${actor})`,
        data: { commit: claim.commit, committed_at: claim.committed_at, after: claim.after },
      },
    ]);
    return next;
  }
}
