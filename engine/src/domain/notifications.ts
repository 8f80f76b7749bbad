/**
 * Which state changes people are told about, and what the notice says (docs/engine.md
 * "Notifications"). Pure: the service calls `noticeFor(before, after, …)` on every accepted
 * commit and writes one `notify` outbox row per configured channel in the same transaction.
 */
import type { Notice, NoticeKind, NoticeStep } from "./notice.ts";
import { TERMINAL_RELEASE_STATES } from "./states.ts";
import type { Release, ReleaseEvent, StepRun } from "./types.ts";

export { NOTICE_KINDS, type Notice, NoticeKind, type NoticeStep } from "./notice.ts";

const BAD: ReadonlySet<StepRun["state"]> = new Set(["failed", "unknown", "dispatch_failed"]);

/**
 * The kind of notice a committed change deserves, or null. Only state changes notify; an
 * operator's own abort into compensation does not (the rollback's end does).
 */
export function noticeKindFor(
  before: Release,
  after: Release,
  event: ReleaseEvent | null,
): NoticeKind | null {
  if (before.state === after.state) return null;
  const s: string = after.state;
  switch (s) {
    case "paused":
      if (typeof after.rerun_deadline === "number") return "waiting_for_rerun";
      // A hold: the recipe's manual promotion waits for promote; a pause or a dark deploy
      // waiting at 0% is a plain pause (its reason says who and which verb).
      if (after.hold) return after.hold.kind === "promotion" ? "waiting_for_promotion" : "paused";
      // The gate a release is held at (`Release.gate`), read without its type.
      if ((after as { gate?: unknown }).gate) return "waiting_for_promotion";
      return "paused";
    case "succeeded":
    case "rolled_back":
    case "aborted":
    case "abandoned":
    case "needs_operator":
      return s;
    case "compensating":
      return event?.type === "abort" ? null : "failed";
    case "running":
    case "pending":
      return null;
    default:
      return TERMINAL_RELEASE_STATES.has(after.state) ? "ended" : "waiting";
  }
}

/** The latest step run that ended badly in `direction` (a cancelled-by-abort one excluded). */
function lastBad(r: Release, direction: "fwd" | "bwd"): StepRun | null {
  let best: StepRun | null = null;
  for (const sr of r.step_runs) {
    if (sr.direction !== direction || !BAD.has(sr.state)) continue;
    if (sr.last_error?.startsWith("cancelled by abort")) continue;
    if (!best || (sr.finished_at ?? 0) >= (best.finished_at ?? 0)) best = sr;
  }
  return best;
}

/** Operator abort or failure: why a release left the forward path (null while it has not). */
export function causeOf(r: Release): Notice["cause"] {
  if (r.reason?.startsWith("aborted by")) return "operator_abort";
  if (lastBad(r, "fwd")) return "failure";
  if (r.state === "compensating" || r.state === "rolled_back" || r.state === "aborted") {
    return "operator_abort";
  }
  return null;
}

/** The step a notice of `kind` is about: the failed one, else the one at the cursor. */
export function noticeStep(r: Release, kind: NoticeKind): StepRun | null {
  if (kind === "succeeded") return null;
  const bad = kind === "needs_operator" ? lastBad(r, "bwd") : lastBad(r, "fwd");
  if (bad) return bad;
  const dir = r.state === "compensating" || r.state === "needs_operator" ? "bwd" : "fwd";
  return r.step_runs.find((sr) => sr.step_index === r.cursor && sr.direction === dir) ?? null;
}

function stepOf(r: Release, sr: StepRun): NoticeStep {
  const m = r.manifest.steps[sr.step_index];
  return {
    number: sr.step_index + 1,
    name: m?.name ?? "step",
    lane: m?.lane ?? null,
    wave: (m?.wave ?? 0) + 1,
    direction: sr.direction === "fwd" ? "forward" : "backward",
    state: sr.state,
    error: sr.last_error,
  };
}

const HEADLINE: Record<NoticeKind, string> = {
  failed: "failed; undoing",
  paused: "paused",
  waiting_for_rerun: "failed; waiting for a re-run",
  waiting_for_promotion: "waits for an operator to promote or abort",
  abandoned: "abandoned by an operator",
  waiting: "is waiting",
  needs_operator: "needs an operator",
  succeeded: "succeeded",
  rolled_back: "rolled back",
  aborted: "aborted",
  ended: "ended",
  drift: "lanes drifted from what it left them at",
  incident: "is under an incident",
  drill_due: "is due a recovery drill",
};

/** A short text of a step for people: `step 9 (health_check, lane b, wave 2)`. */
export function stepLabel(s: NoticeStep): string {
  const where = [s.name, s.lane ? `lane ${s.lane}` : null, `wave ${s.wave}`].filter(Boolean);
  return `step ${s.number} (${where.join(", ")})${s.direction === "backward" ? " undo" : ""}`;
}

/** Builds the notice of `kind` for the change `before` → `after`. */
export function buildNotice(
  kind: NoticeKind,
  before: Release,
  after: Release,
  o: { url: string; at: number },
): Notice {
  const sr = noticeStep(after, kind);
  const step = sr ? stepOf(after, sr) : null;
  const cause = causeOf(after);
  const sha =
    [...after.step_runs.flatMap((s) => s.attempts)].sort(
      (a, b) => b.preflight_at - a.preflight_at,
    )[0]?.sha ??
    after.manifest.tool_revision ??
    null;
  let headline = `${after.id} ${HEADLINE[kind]}`;
  if (kind === "waiting" || kind === "ended") headline += ` (${after.state})`;
  if (kind === "rolled_back" && cause === "operator_abort") headline += " after an operator abort";
  const parts = [headline];
  if (kind === "waiting_for_rerun" && typeof after.rerun_deadline === "number") {
    parts[0] += ` until ${new Date(after.rerun_deadline).toISOString().slice(0, 16).replace("T", " ")} UTC`;
  }
  if (kind === "abandoned" || kind === "waiting_for_promotion" || after.hold) {
    if (after.reason) parts.push(after.reason);
    if (after.abandoned) {
      const lanes = Object.entries(after.abandoned.lanes);
      parts.push(`confirmed ${lanes.map(([l, img]) => `${l} runs ${img}`).join(", ")}`);
    }
  } else if (step && kind !== "succeeded") {
    parts.push(`${stepLabel(step)} ${step.state}${step.error ? `: ${step.error}` : ""}`);
  } else if (after.reason) parts.push(after.reason);
  return {
    v: 1,
    kind,
    release_id: after.id,
    state: after.state,
    previous_state: before.state,
    recipe_name: after.manifest.recipe_name,
    model: after.manifest.model,
    image: after.manifest.image,
    previous_image: after.manifest.previous_image,
    reason: after.reason,
    cause,
    step,
    commit_sha: sha,
    url: o.url,
    at: o.at,
    summary: `${parts.join(": ")} [${after.manifest.model}]`.slice(0, 1000),
  };
}

/**
 * The notice of a drift recorded on `release` (the release that decided the drifted lanes;
 * docs/drift.md): its state does not change, `summary` says what differs (desired vs observed).
 */
export function buildDriftNotice(
  release: Release,
  message: string,
  /** `headline`: what drifted, in words (default: the lanes). */
  o: { url: string; at: number; headline?: string },
): Notice {
  return {
    v: 1,
    kind: "drift",
    release_id: release.id,
    state: release.state,
    previous_state: release.state,
    recipe_name: release.manifest.recipe_name,
    model: release.manifest.model,
    image: release.manifest.image,
    previous_image: release.manifest.previous_image,
    reason: null,
    cause: null,
    step: null,
    commit_sha: release.manifest.tool_revision ?? null,
    url: o.url,
    at: o.at,
    summary:
      `${release.id} ${o.headline ?? HEADLINE.drift}: ${message.replace(/^\[drift\] /, "")}`.slice(
        0,
        1000,
      ),
  };
}

/**
 * The notice of a recovery drill falling due on `release`'s model (docs/recovery-actions.md
 * "The drill schedule"): a `drill_due` notice whose summary is the message.
 */
export function buildDrillDueNotice(
  release: Release,
  message: string,
  o: { url: string; at: number },
): Notice {
  return {
    ...buildDriftNotice(release, "", o),
    kind: "drill_due",
    summary: `${release.id} ${HEADLINE.drill_due}: ${message.replace(/^\[drill\] /, "")}`.slice(
      0,
      1000,
    ),
  };
}

/**
 * The notice of an incident declared or resolved on `release`'s model (docs/incidents.md): the
 * release's state does not change; `summary` says which incident, its severity, who and why.
 */
export function buildIncidentNotice(
  release: Release,
  text: string,
  o: { url: string; at: number },
): Notice {
  return {
    ...buildDriftNotice(release, "", o),
    kind: "incident",
    summary: `${release.manifest.model} (${release.id}): ${text}`.slice(0, 1000),
  };
}
