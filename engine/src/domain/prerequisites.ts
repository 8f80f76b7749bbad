/**
 * Rollback prerequisites as data (docs/lifecycle.md "Rollback prerequisites"): before a
 * rollback of a succeeded release is admitted, the engine asks each lane's machine whether the
 * rollback could run there. Each check of each lane is one row of the new release's evidence;
 * a failed row refuses the rollback (422) naming the lane, the check and the fix. Pure shapes
 * and the reading of the target's answer; the asking is the `TargetProbe` port.
 */
import type { RecoveryClass } from "./recipe.ts";

/** The checks, in the order they are listed for each lane. */
export const PREREQUISITE_CHECKS = ["lane_credentials", "image_present", "lane_capacity"] as const;
/**
 * A check of the rolled-back release itself, not of a lane: its recipe's recovery class allows
 * a rollback (a `roll_forward_only` release does not). Its row has `lane: null`.
 */
export const RECOVERY_CLASS_CHECK = "recovery_class" as const;
export type PrerequisiteCheckName =
  | (typeof PREREQUISITE_CHECKS)[number]
  | typeof RECOVERY_CLASS_CHECK;

/** One row of prerequisite evidence: one check on one lane (null: of the release itself). */
export interface PrerequisiteCheck {
  check: PrerequisiteCheckName;
  lane: string | null;
  /** `skipped`: not asked (no way to reach the lane's machine from the engine, or an earlier check failed). */
  outcome: "pass" | "fail" | "skipped";
  /** One sentence for people: what the target answered. */
  message: string;
  /** What to do when it failed; null otherwise. */
  fix: string | null;
}

/** The prerequisites of one rollback, stored on the release it started (`Release.prerequisites`). */
export interface PrerequisiteReport {
  ok: boolean;
  /** Epoch ms when the answers were in. */
  at: number;
  /** The image the rollback deploys (the previous admitted manifest's). */
  image: string;
  checks: PrerequisiteCheck[];
}

/** One line of `deploy.sh inspect` output (scripts/target/deploy.sh). */
interface InspectLine {
  phase: string;
  status: string;
  message?: string;
}

/**
 * Reads the JSON lines `deploy.sh inspect` printed on `lane` into the three checks (pure).
 * A check the output does not answer fails, naming what was printed.
 */
export function checksFromInspect(
  lane: string,
  image: string,
  stdout: string,
  deployScript: string,
): PrerequisiteCheck[] {
  const lines = new Map<string, InspectLine>();
  for (const raw of stdout.split("\n")) {
    try {
      const l = JSON.parse(raw) as InspectLine;
      if (l && typeof l.phase === "string" && typeof l.status === "string") lines.set(l.phase, l);
    } catch {
      // not a result line
    }
  }
  const args = lines.get("args");
  const row = (check: PrerequisiteCheckName, phase: string, fix: string): PrerequisiteCheck => {
    const l = lines.get(phase);
    if (l?.status === "ok") {
      return { check, lane, outcome: "pass", message: l.message ?? "ok", fix: null };
    }
    const message =
      l?.message ??
      args?.message ??
      `${deployScript} inspect printed no ${phase} line (an older deploy.sh?): ${stdout.trim().slice(-200) || "no output"}`;
    return { check, lane, outcome: "fail", message, fix };
  };
  return [
    row(
      "lane_credentials",
      "access",
      `give the deploy user of lane ${lane} access to the container runtime and its ledger, and install the current deploy.sh as ${deployScript} (docs/runner.md)`,
    ),
    row(
      "image_present",
      "image",
      `load the image on lane ${lane}'s machine again (e.g. \`docker pull ${image}\`, or \`docker load\` from a saved archive), then roll back again; or roll forward with a fixed image (baton roll-forward)`,
    ),
    row(
      "lane_capacity",
      "capacity",
      `free disk space on lane ${lane}'s machine (old images, logs), or lower BATON_MIN_FREE_MB in its deploy.conf, then roll back again`,
    ),
  ];
}

/** The three checks of a lane the engine could not log in to (the SSH error in `message`). */
export function checksUnreachable(lane: string, message: string, fix: string): PrerequisiteCheck[] {
  return [
    { check: "lane_credentials", lane, outcome: "fail", message, fix },
    {
      check: "image_present",
      lane,
      outcome: "skipped",
      message: "not asked: the engine could not log in to the lane's machine",
      fix: null,
    },
    {
      check: "lane_capacity",
      lane,
      outcome: "skipped",
      message: "not asked: the engine could not log in to the lane's machine",
      fix: null,
    },
  ];
}

/** The checks of a lane when the engine has no way to ask its machine (no target probe). */
export function checksNotAsked(lane: string, why: string): PrerequisiteCheck[] {
  return PREREQUISITE_CHECKS.map((check) => ({
    check,
    lane,
    outcome: "skipped" as const,
    message: `not asked: ${why}`,
    fix: null,
  }));
}

/**
 * The `recovery_class` row for rolling back `id` (pure): it fails when `id`'s manifest declared
 * `roll_forward_only` (rollback is unsafe once its `unsafe_after` step ran, and a succeeded
 * release ran it), naming roll forward as the fix; it passes for `reversible` (also the default
 * when none is declared) and `recoverable` (naming the restore action that must follow).
 */
export function recoveryClassCheck(
  id: string,
  recovery: { class: RecoveryClass; restore?: string } | undefined,
): PrerequisiteCheck {
  const cls = recovery?.class ?? "reversible";
  if (cls === "roll_forward_only") {
    return {
      check: RECOVERY_CLASS_CHECK,
      lane: null,
      outcome: "fail",
      message: `${id}'s recipe declares recovery_class roll_forward_only: it ran past the step after which rollback is unsafe, so it cannot be rolled back`,
      fix: `roll forward instead: start a fixed recipe of the same model as a new release (baton start <fixed-recipe.yaml> --bundle <bundle.json>)`,
    };
  }
  return {
    check: RECOVERY_CLASS_CHECK,
    lane: null,
    outcome: "pass",
    message:
      cls === "recoverable"
        ? `${id}'s recovery class is recoverable: rollback is allowed; the restore action must follow it: ${recovery?.restore ?? "(none named)"}`
        : `${id}'s recovery class is ${recovery ? "reversible" : "reversible (none declared)"}: traffic rollback restores service`,
    fix: null,
  };
}

/** Where a row is: `lane L` or `release` (the recovery class row). */
const where = (c: PrerequisiteCheck): string => (c.lane === null ? "release" : `lane ${c.lane}`);

/** One sentence for a history entry or a refusal: how many passed, and each failure. */
export function prerequisitesSummary(r: PrerequisiteReport): string {
  const failed = r.checks.filter((c) => c.outcome === "fail");
  const passed = r.checks.filter((c) => c.outcome === "pass").length;
  const skipped = r.checks.filter((c) => c.outcome === "skipped").length;
  const head = `${passed} passed, ${failed.length} failed, ${skipped} skipped for image ${r.image}`;
  if (failed.length === 0) return head;
  return `${head}: ${failed.map((c) => `${where(c)} ${c.check}: ${c.message}`).join("; ")}`;
}
