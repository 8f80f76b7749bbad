/**
 * Rollback prerequisites as data (docs/lifecycle.md "Rollback prerequisites"): before a
 * rollback of a succeeded release is admitted, the engine asks each lane's machine whether the
 * rollback could run there. Each check of each lane is one row of the new release's evidence;
 * a failed row refuses the rollback (422) naming the lane, the check and the fix. Pure shapes
 * and the reading of the target's answer; the asking is the `TargetProbe` port.
 */
import { runnerArgs, shortDigest } from "./catalogue.ts";
import {
  PREREQUISITE_CHECKS,
  type PrerequisiteCheck,
  type PrerequisiteCheckName,
  type PrerequisiteReport,
  RECOVERY_CLASS_CHECK,
} from "./prerequisite-checks.ts";
import type { RecoveryClass } from "./recipe.ts";
import type { Manifest, ManifestStep } from "./types.ts";

export {
  PREREQUISITE_CHECKS,
  type PrerequisiteCheck,
  type PrerequisiteCheckName,
  type PrerequisiteReport,
  RECOVERY_CLASS_CHECK,
} from "./prerequisite-checks.ts";

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
 * The checks of a lane a runner probe step will ask (`asked_by: "runner"`): `skipped`
 * "asking: …" until the probe's callback answers them (`recordProbeAnswer`).
 */
export function checksAsking(lane: string): PrerequisiteCheck[] {
  return PREREQUISITE_CHECKS.map((check) => ({
    check,
    lane,
    outcome: "skipped" as const,
    message: `asking: a read-only runner step (${PROBE_TOOL}) asks lane ${lane}'s machine before anything of the rollback is applied`,
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

// ------------------------------------------------------------ asked by a runner step

/**
 * The read-only probe step a rollback runs first, once per lane, when the engine cannot reach
 * the machines itself (no `TargetProbe`; the GitHub dispatcher): a runner step whose tool runs
 * `deploy.sh inspect` over SSH and reports the three checks in its signed callback
 * (docs/lifecycle.md "Rollback prerequisites"). The state machine knows it by this name: it is
 * never compensated (no backward action), never raises the high-water mark (nothing it does
 * takes effect), is never retried by the engine, and a probe that does not pass ends the
 * rollback `aborted` before any effect of the rollback itself was applied.
 */
export const PROBE_STEP = "inspect_lane" as const;
/**
 * Probe steps of one rollback in flight at once, at most (docs/lifecycle.md "Rollback
 * prerequisites"). The probes run concurrently, since they only read; this bounds how many
 * workflow runs wait for a runner at once, because each probe's start deadline runs from its
 * dispatch: with a small runner pool, a fleet of hundreds dispatched at once would lose its
 * last probes to their deadlines. The GitHub dispatcher's pacing (80 dispatches a minute) is
 * below this on top of it.
 */
export const PROBES_IN_FLIGHT_MAX = 20;
/** The runner tool of a probe step (scripts/release/inspect-lane.ts). */
export const PROBE_TOOL = "inspect-lane" as const;
/** The phases the probe tool reports in checks.json (besides `connect`), in check order. */
export const PROBE_PHASES = ["access", "image", "capacity"] as const;

/** Whether `step` is a rollback's read-only probe step (`PROBE_STEP`). */
export function isProbeStep(step: Pick<ManifestStep, "name"> | undefined): boolean {
  return step?.name === PROBE_STEP;
}

/**
 * `m` with one probe step per lane put first (pure): each a runner step of the tool
 * `inspect-lane` with the lane and the image the rollback deploys in its args, no backward
 * action, no retries, no re-run window, the start and callback deadlines of the manifest's
 * first runner step (its recipe's). The other steps keep their order, their indexes shifted by
 * the number of lanes (and `recovery.unsafe_after` with them).
 */
export function withProbeSteps(m: Manifest): Manifest {
  const n = m.lanes.length;
  const firstRunner = m.steps.find((s) => s.kind === "runner");
  const probes: ManifestStep[] = m.lanes.map((lane, i) => ({
    index: i,
    name: PROBE_STEP,
    kind: "runner",
    // Not a lane row: lane rows are what a parallel wave schedules and counts out of service.
    lane: null,
    wave: 0,
    forward: {
      kind: "runner",
      name: PROBE_STEP,
      target: `lane=${lane.id}:inspect=${shortDigest(m.image)}`,
      tool: PROBE_TOOL,
      args: runnerArgs(lane, m.image, m.previous_image),
    },
    backward: null,
    retries: 0,
    on_failure: "compensate",
    start_deadline_ms: firstRunner?.start_deadline_ms ?? 600_000,
    callback_deadline_ms: firstRunner?.callback_deadline_ms ?? 1_800_000,
    rerun_window_ms: 0,
  }));
  return {
    ...m,
    steps: [...probes, ...m.steps.map((s) => ({ ...s, index: s.index + n }))],
    ...(m.recovery?.unsafe_after !== undefined
      ? { recovery: { ...m.recovery, unsafe_after: m.recovery.unsafe_after + n } }
      : {}),
  };
}

/** The lane a probe step asks (its action's `args.lane.id`), or null when it names none. */
export function probeLaneOf(step: ManifestStep | undefined): string | null {
  const a = step?.forward;
  if (a?.kind !== "runner") return null;
  const id = (a.args.lane as { id?: unknown } | undefined)?.id;
  return typeof id === "string" ? id : null;
}

/** The checks of a lane whose runner probe did not pass, for `why` (its fix: roll back again). */
export function checksNotAnswered(lane: string, why: string, fix: string): PrerequisiteCheck[] {
  return [
    { check: "lane_credentials", lane, outcome: "fail", message: `not answered: ${why}`, fix },
    ...PREREQUISITE_CHECKS.slice(1).map((check) => ({
      check,
      lane,
      outcome: "skipped" as const,
      message: "not asked: the probe of the lane did not answer",
      fix: null,
    })),
  ];
}

/** Why a probe callback's checks.json could not be read (the service answers 422 with it). */
export class ProbeChecksError extends Error {
  constructor(
    readonly path: string,
    message: string,
    readonly fix: string,
  ) {
    super(message);
  }
}

/**
 * Reads the checks.json a probe step's callback carries (the tool `inspect-lane` writes one
 * record per phase: `connect`, then `access`, `image`, `capacity`, each with `lane` and
 * `status`) into the three checks of `lane` (pure). A connect that failed fails
 * `lane_credentials` (the runner could not log in) and skips the rest.
 * @throws ProbeChecksError when checks.json is not an array of records, a record names another
 *   lane than the step's, or a phase is missing or duplicated.
 */
export function checksFromProbe(
  lane: string,
  image: string,
  checks: unknown,
  deployScript = "the deploy script",
): PrerequisiteCheck[] {
  const fix = `report the checks.json the bundled tool ${PROBE_TOOL} writes (one record per phase: connect, ${PROBE_PHASES.join(", ")}, each with "lane": "${lane}"); run the release-step action and tools of this engine's version`;
  if (!Array.isArray(checks)) {
    throw new ProbeChecksError(
      "body.checks",
      `a probe's checks must be an array of check records, got ${checks === null ? "null" : typeof checks}`,
      fix,
    );
  }
  const byName = new Map<string, { status: string; message: string }>();
  checks.forEach((c, i) => {
    const rec = c as { name?: unknown; status?: unknown; lane?: unknown; message?: unknown };
    if (
      !rec ||
      typeof rec !== "object" ||
      typeof rec.name !== "string" ||
      typeof rec.status !== "string"
    ) {
      throw new ProbeChecksError(
        `body.checks[${i}]`,
        `check record ${i} must be an object with string name and status`,
        fix,
      );
    }
    if (rec.name !== "connect" && !(PROBE_PHASES as readonly string[]).includes(rec.name)) return;
    if (rec.lane !== lane) {
      throw new ProbeChecksError(
        `body.checks[${i}].lane`,
        `check ${rec.name} reports on lane ${JSON.stringify(rec.lane ?? null)}, but this probe step asks lane ${lane}`,
        fix,
      );
    }
    if (byName.has(rec.name)) {
      throw new ProbeChecksError(
        `body.checks[${i}].name`,
        `check ${rec.name} is reported twice`,
        fix,
      );
    }
    byName.set(rec.name, {
      status: rec.status,
      message: typeof rec.message === "string" ? rec.message : "",
    });
  });
  const connect = byName.get("connect");
  if (!connect) {
    throw new ProbeChecksError("body.checks", "the probe's checks.json has no connect record", fix);
  }
  if (connect.status !== "ok") {
    return checksUnreachable(
      lane,
      `the runner could not log in to lane ${lane}'s machine (${connect.status}): ${connect.message || "no message"}`,
      `authorise the runners' SSH key (BATON_SSH_KEY) for the lane's deploy user and make the machine reachable with its pinned host key, then roll back again`,
    ).map((c) =>
      c.outcome === "skipped"
        ? { ...c, message: "not asked: the runner could not log in to the lane's machine" }
        : c,
    );
  }
  const lines = PROBE_PHASES.map((phase) => {
    const got = byName.get(phase);
    if (!got) {
      throw new ProbeChecksError(
        "body.checks",
        `the probe's checks.json has no ${phase} record`,
        fix,
      );
    }
    return JSON.stringify({
      phase,
      status: got.status,
      message: got.message || `${phase} ${got.status}`,
    });
  });
  return checksFromInspect(lane, image, lines.join("\n"), deployScript);
}
