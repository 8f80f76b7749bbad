/**
 * Which GitHub deployment status a committed change deserves (docs/engine.md "GitHub
 * Deployments"). Pure: the service calls `deploymentStateFor(before, after, …)` on every
 * accepted commit (and on a release's start) and writes one `deployment` outbox row in the
 * same transaction; the reconciler posts it later and never holds a transition up.
 *
 * | release moves to | status posted |
 * |---|---|
 * | `running` from `pending` (a start) | `in_progress` (the deployment is created first) |
 * | `succeeded` | `success`; the environment's earlier successful deployments become `inactive` (superseded) |
 * | `compensating` after a failure | `failure` |
 * | `rolled_back`, `aborted`, `abandoned` | `inactive` (the candidate no longer serves) |
 * | `needs_operator` | `error` |
 */
import * as z from "zod";
import { lazySchema } from "../protocol/lazy-schema.ts";
import { causeOf, stepLabel } from "./notifications.ts";
import type { DeploymentReport, DeploymentStatusState, Release, ReleaseEvent } from "./types.ts";

/** GitHub's limit on a deployment status description (REST docs: "maximum … 140 characters"). */
export const DEPLOYMENT_DESCRIPTION_MAX = 140;

/** The status the change `before` → `after` posts, or null for none. */
export function deploymentStateFor(
  before: Release,
  after: Release,
  event: ReleaseEvent | null,
): DeploymentStatusState | null {
  if (before.state === after.state) return null;
  switch (after.state as string) {
    case "running":
      return before.state === "pending" ? "in_progress" : null;
    case "succeeded":
      return "success";
    case "compensating":
      return event?.type === "abort" ? null : "failure";
    case "rolled_back":
    case "aborted":
    case "abandoned":
      return "inactive";
    case "needs_operator":
      return "error";
    default:
      return null;
  }
}

/** Cuts `s` to GitHub's 140 characters (an ellipsis marks the cut). */
export function clipDescription(s: string): string {
  const one = s.replace(/\s+/g, " ").trim();
  return one.length <= DEPLOYMENT_DESCRIPTION_MAX
    ? one
    : `${one.slice(0, DEPLOYMENT_DESCRIPTION_MAX - 1)}…`;
}

/** The failed forward step of `r`, in words (`step 9 (health_check, lane b, wave 2)`), or null. */
function failedStep(r: Release): string | null {
  const bad = r.step_runs
    .filter(
      (s) => s.direction === "fwd" && ["failed", "unknown", "dispatch_failed"].includes(s.state),
    )
    .sort((a, b) => (b.finished_at ?? 0) - (a.finished_at ?? 0))[0];
  if (!bad) return null;
  const m = r.manifest.steps[bad.step_index];
  return stepLabel({
    number: bad.step_index + 1,
    name: m?.name ?? "step",
    lane: m?.lane ?? null,
    wave: (m?.wave ?? 0) + 1,
    direction: "forward",
    state: bad.state,
    error: null,
  });
}

/** The one-line description of a status (≤ 140 characters). */
export function deploymentDescription(state: DeploymentStatusState, r: Release): string {
  const m = r.manifest;
  switch (state) {
    case "in_progress":
      return clipDescription(
        `${r.id}: rolling ${m.model} out to ${m.lanes.length} lane(s) in ${m.waves.length} wave(s)`,
      );
    case "success":
      return clipDescription(`${r.id}: every lane serves the new image`);
    case "failure": {
      const step = failedStep(r);
      return clipDescription(`${r.id} failed${step ? ` at ${step}` : ""}; undoing`);
    }
    case "error":
      return clipDescription(`${r.id} needs an operator: an undo step failed`);
    case "inactive":
      if (r.state === "abandoned") return clipDescription(`${r.id} abandoned by an operator`);
      return clipDescription(
        causeOf(r) === "operator_abort"
          ? `${r.id} aborted by an operator; the previous image serves`
          : `${r.id} rolled back; the previous image serves`,
      );
  }
}

/**
 * The report of `state` for release `r`.
 * @param o environment (recipe's, else the engine's), ref when the recipe pins no tool
 *   revision, the release page URL and the transition's time (epoch ms).
 */
export function buildDeploymentReport(
  state: DeploymentStatusState,
  r: Release,
  o: { environment: string; ref: string; url: string; at: number },
): DeploymentReport {
  return {
    release_id: r.id,
    uid: r.uid ?? null,
    environment: r.manifest.environment ?? o.environment,
    ref: r.manifest.tool_revision ?? o.ref,
    state,
    description: deploymentDescription(state, r),
    log_url: o.url,
    recipe_name: r.manifest.recipe_name,
    model: r.manifest.model,
    image: r.manifest.image,
    at: o.at,
  };
}

/** BATON_GITHUB_DEPLOYMENTS: a GitHub environment name (GitHub allows 1–255 characters). */
export const DeploymentEnvironmentSetting = lazySchema(() =>
  z
    .string()
    .trim()
    .regex(
      /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,254}$/,
      "BATON_GITHUB_DEPLOYMENTS must be a GitHub environment name (1-255 letters, digits, space, '.', '_' or '-'), e.g. production",
    ),
);

/** BATON_GITHUB_DEPLOYMENT_REF: the branch, tag or sha a deployment names (default `main`). */
export const DeploymentRefSetting = lazySchema(() =>
  z
    .string()
    .trim()
    .regex(
      /^(?!.*\.\.)(?!\/)[A-Za-z0-9._/-]{1,255}$/,
      "BATON_GITHUB_DEPLOYMENT_REF must be a branch, tag or commit sha, e.g. main",
    )
    .default("main"),
);
