/**
 * Target probe port: asks a lane's machine, read-only, what a rollback needs there
 * (docs/lifecycle.md "Rollback prerequisites"): can the deploy user work, is the image still
 * present and loadable, is there room. The SSH adapter runs `deploy.sh inspect`.
 */
import type { PrerequisiteCheck } from "../domain/prerequisites.ts";
import type { ManifestLane } from "../domain/types.ts";

export interface TargetProbe {
  /**
   * The three prerequisite checks of `lane` for `image` (domain/prerequisites.ts), in order.
   * Never throws: a machine that cannot be reached fails `lane_credentials` and skips the rest.
   */
  inspect(lane: ManifestLane, image: string): Promise<PrerequisiteCheck[]>;
}
