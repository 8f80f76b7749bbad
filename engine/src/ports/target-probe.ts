/**
 * Target probe port: asks a lane's machine, read-only, what the engine needs to know there:
 * before a rollback, what the rollback needs (docs/lifecycle.md "Rollback prerequisites": can
 * the deploy user work, is the image still present and loadable, is there room); when a
 * recovery is verified, what the lane runs and whether it answers its health check
 * (docs/lifecycle.md "Recovery verification"). The SSH adapter runs `deploy.sh inspect` and
 * `deploy.sh smoke`.
 */
import type { PrerequisiteCheck } from "../domain/prerequisites.ts";
import type { ManifestLane } from "../domain/types.ts";
import type { TargetAnswer } from "../domain/verification.ts";

export interface TargetProbe {
  /**
   * The three prerequisite checks of `lane` for `image` (domain/prerequisites.ts), in order.
   * Never throws: a machine that cannot be reached fails `lane_credentials` and skips the rest.
   */
  inspect(lane: ManifestLane, image: string): Promise<PrerequisiteCheck[]>;
  /**
   * Whether `lane` runs `image` now, as the container runtime reports it, and whether the
   * lane's health URL answers. Optional: a probe without it leaves verification to the lanes'
   * runner reports. Never throws: a machine that cannot be reached answers `reached: false`
   * with the reason.
   */
  observe?(lane: ManifestLane, image: string): Promise<TargetAnswer>;
}
