/**
 * The rollback window (docs/lifecycle.md "The rollback window"): how long after a release
 * succeeded `baton rollback` to its predecessor is admitted. A recipe sets it as
 * `policy.rollback_window` (`30m`, `12h`, `7d`); the manifest carries it in ms only when the
 * recipe declares it (other manifests and their digests are unchanged), and a release without
 * it has the default. A migration's `contract` step waits for the window of the release that
 * activated the new form to close (domain/migration.ts). Pure.
 */
import { DEFAULT_ROLLBACK_WINDOW, DURATION_PATTERN, durationMs, UNIT_MS } from "./duration.ts";
import { blueLanes } from "./strategy.ts";
import type { Release } from "./types.ts";

export { DEFAULT_ROLLBACK_WINDOW, DURATION_PATTERN, durationMs };

/** The window of `release` in ms: its manifest's, else the default. */
export function rollbackWindowMs(release: Pick<Release, "manifest">): number {
  return release.manifest.rollback_window_ms ?? durationMs(DEFAULT_ROLLBACK_WINDOW);
}

/**
 * When `release` succeeded (epoch ms): `succeeded_at`, or `updated_at` for a release stored
 * before it was recorded (a closed release's last write). Null when it has not succeeded.
 */
export function succeededAt(release: Release): number | null {
  if (release.state !== "succeeded") return null;
  return release.succeeded_at ?? release.updated_at;
}

/** Epoch ms the rollback window of a succeeded `release` closes, else null. */
export function rollbackWindowClosesAt(release: Release): number | null {
  const at = succeededAt(release);
  return at === null ? null : at + rollbackWindowMs(release);
}

/** `7d`, `36h`, `90m`: a window in the largest unit that divides it. */
export function windowText(ms: number): string {
  if (ms % UNIT_MS.d === 0) return `${ms / UNIT_MS.d}d`;
  if (ms % UNIT_MS.h === 0) return `${ms / UNIT_MS.h}h`;
  return `${Math.round(ms / UNIT_MS.m)}m`;
}

/**
 * Why a rollback of `release` is refused at `now` because its window has closed (one sentence
 * naming when it succeeded, the window, when it closed and what to do instead), or null while
 * the window is open (or the release has not succeeded: other rules refuse that).
 */
export function rollbackWindowClosed(release: Release, now: number): string | null {
  const closes = rollbackWindowClosesAt(release);
  if (closes === null || now < closes) return null;
  const at = succeededAt(release) ?? 0;
  const declared = release.manifest.rollback_window_ms !== undefined;
  const m = release.manifest;
  if (m.strategy === "blue_green")
    return `its rollback window (${windowText(rollbackWindowMs(release))}${declared ? ", policy.rollback_window" : ", the default"}) after it succeeded at ${new Date(at).toISOString()} closed at ${new Date(closes).toISOString()}, and its old environment (${blueLanes(m).join(", ")} on ${m.previous_image}) was retired then: there is nothing warm to switch back to, and a rollback does not redeploy. Roll forward instead: start a recipe that deploys the image you want (${m.previous_image} to go back) on the lanes (baton start <fixed-recipe.yaml>)`;
  return `its rollback window (${windowText(rollbackWindowMs(release))}${declared ? ", policy.rollback_window" : ", the default"}) after it succeeded at ${new Date(at).toISOString()} closed at ${new Date(closes).toISOString()}; what it replaced may since have been removed (a migration's contract), so going back is a new release: start a fixed recipe (baton start <fixed-recipe.yaml>), or sign the earlier recipe again with a newer issued_at and start it`;
}
