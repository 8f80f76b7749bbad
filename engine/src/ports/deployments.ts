/**
 * Deployments port: shows each release on a forge's deployments page (GitHub's Deployments:
 * one deployment per release, a status per move). Statuses are decided in the transition's
 * commit and written to the outbox in the same transaction (`DeploymentEffect`); the
 * reconciler reports them after the commit, retries with backoff, and never holds a
 * transition up (docs/engine.md "GitHub Deployments").
 */
import type { DeploymentReport } from "../domain/types.ts";
import type { NotifyResult } from "./notifier.ts";

export interface DeploymentTracker {
  /**
   * Posts one status, creating the release's deployment first when it has none yet. Repeats
   * are harmless (delivery is at least once); a status older than the one the deployment
   * shows is skipped. Never throws: the outcome is data (retryable: network, timeout, 5xx, 429).
   */
  report(r: DeploymentReport): Promise<NotifyResult>;
}
