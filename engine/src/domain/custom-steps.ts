/**
 * Custom steps (docs/recipes.md "Custom steps"): step pairs a recipe declares under
 * `custom_steps`, each an allowlisted runner tool forward and its compensating tool backward
 * (or `irreversible: true`, a recovery boundary). Here: the contract check's rules for them
 * (over the raw input, reading only its well-typed parts) and the builder of their rows in the
 * step table. A custom row is a runner step like `attach_queue_lane`: dispatched, preflighted
 * and called back the same way, keyed `{release}:{step}:{fwd|bwd}:lane=<id>:step=<name>`.
 */
import { allowlistFix, TOOL_ALLOWLIST } from "./allowlist.ts";
import { runnerArgs, STEP_NAMES } from "./catalogue.ts";
import type { Problem } from "./errors.ts";
import { asArray as arr, asObject as obj } from "./json.ts";
import { hasContract, type MigrationCustomStep, migrationCustomSteps } from "./migration.ts";
import {
  CUSTOM_STEP_ANCHORS,
  type CustomStep,
  type CustomStepAnchor,
  DEFAULT_RUNNER_RETRIES,
  type Recipe,
} from "./recipe.ts";
import type { ManifestLane, ManifestStep, StepAction } from "./types.ts";

/** The built-in lane steps: a custom step placed by one of them runs in each lane's block. */
const LANE_ANCHORS: readonly CustomStepAnchor[] = [
  "exclude_lane",
  "attach_queue_lane",
  "assert_smoke_passed",
  "advertise_capabilities",
  "include_lane",
];

/** Names of the catalogue's backward actions: a custom step may not take them either. */
const BACKWARD_ACTIONS = ["restore_queue_lane", "withdraw_capabilities"];

/** Whether a step placed `position` `anchor` runs while its lane is excluded (serves nothing). */
function drainedAt(position: "before" | "after", anchor: CustomStepAnchor): boolean {
  if (anchor === "exclude_lane") return position === "after";
  if (anchor === "include_lane") return position === "before";
  return LANE_ANCHORS.includes(anchor);
}

/** The anchor and side of a placement, or null when it names neither or both. */
export function placementOf(
  c: Pick<CustomStep, "placement">,
): { position: "before" | "after"; anchor: CustomStepAnchor } | null {
  const { before, after } = c.placement;
  if (before && !after) return { position: "before", anchor: before };
  if (after && !before) return { position: "after", anchor: after };
  return null;
}

/** Whether a custom step placed by `anchor` is a lane row (else a wave row per lane). */
export function isLaneAnchor(anchor: CustomStepAnchor): boolean {
  return LANE_ANCHORS.includes(anchor);
}

/** `Use an allowlisted tool (…), or …` for a tool outside the allowlist. */
/**
 * Largest `inputs` JSON (bytes, UTF-8) of one custom step: a quarter of GitHub's 64 KiB
 * `client_payload`, leaving the lane, the images and the envelope ample room.
 */
export const MAX_INPUTS_BYTES = 16_384;

/** The drained placements, for a fix text. */
const DRAINED_FORMS =
  "between exclude_lane and include_lane, e.g. `placement: {after: exclude_lane}` or `placement: {before: include_lane}`";

/**
 * The contract check's rules for `custom_steps` (the schema checks each field's form): unique
 * names that are no built-in step's, allowlisted tools, a backward tool or `irreversible`
 * (not both), exactly one of `placement.before`/`after`, waves and lanes of this recipe that
 * place the step at least once, `needs_drained` only where its lanes are excluded, and an
 * irreversible step only with the roll_forward_only recovery class (or none). Never throws.
 */
export function customStepProblems(input: unknown): Problem[] {
  const root = obj(input);
  if (!root) return [];
  const problems: Problem[] = [];
  const waves = arr(obj(root.rollout)?.waves).map((w) => obj(w));
  const laneWave = new Map<string, number>();
  waves.forEach((w, i) => {
    for (const id of arr(w?.lanes))
      if (typeof id === "string" && !laneWave.has(id)) laneWave.set(id, i + 1);
  });
  const laneIds = arr(root.lanes)
    .map((l) => obj(l)?.id)
    .filter((x): x is string => typeof x === "string");
  const seen = new Map<string, number>();
  arr(root.custom_steps).forEach((raw, i) => {
    const c = obj(raw);
    if (!c) return;
    const at = `custom_steps.${i}`;
    const name = typeof c.name === "string" ? c.name : `#${i + 1}`;
    if (typeof c.name === "string") {
      const j = seen.get(c.name);
      if (j !== undefined) {
        problems.push({
          path: `${at}.name`,
          message: `duplicate custom step name \`${c.name}\` (also custom_steps.${j})`,
          fix: "Give every custom step its own name: the dashboard, the CLI and the record show steps by it.",
        });
      } else seen.set(c.name, i);
      if (
        (STEP_NAMES as readonly string[]).includes(c.name) ||
        BACKWARD_ACTIONS.includes(c.name) ||
        c.name.startsWith("assert_") ||
        c.name.startsWith("undo_")
      ) {
        problems.push({
          path: `${at}.name`,
          message: `\`${c.name}\` is a built-in step's name or prefix (${STEP_NAMES.join(", ")}, assert_*, undo_*)`,
          fix: "Name the step after what it does, e.g. warm_cache or load_adapter.",
        });
      }
    }
    for (const field of ["forward", "backward"] as const) {
      const tool = c[field];
      if (typeof tool === "string" && !TOOL_ALLOWLIST.includes(tool)) {
        problems.push({
          path: `${at}.${field}`,
          message: `${field} tool \`${tool}\` of custom step \`${name}\` is not in the allowlist`,
          fix: allowlistFix(tool),
        });
      }
    }
    if (c.backward === undefined && c.irreversible !== true) {
      problems.push({
        path: `${at}.backward`,
        message: `custom step \`${name}\` has no backward tool, so compensation could not undo it`,
        fix: `Add \`backward: <allowlisted tool that undoes ${name}>\`, or declare \`irreversible: true\` if it cannot be undone (the release then rolls forward only once the step may have taken effect).`,
      });
    }
    if (c.backward !== undefined && c.irreversible === true) {
      problems.push({
        path: `${at}.irreversible`,
        message: `custom step \`${name}\` is declared irreversible but has a backward tool`,
        fix: "Remove `irreversible: true` (compensation runs the backward tool), or remove `backward` if the step cannot be undone.",
      });
    }
    const cls = root.recovery_class;
    if (c.irreversible === true && (cls === "reversible" || cls === "recoverable")) {
      problems.push({
        path: `${at}.irreversible`,
        message: `irreversible custom step \`${name}\` makes the release roll forward only once it may have taken effect, but recovery_class is ${cls}`,
        fix: `Set \`recovery_class: roll_forward_only\` (or leave it out), or give \`${name}\` a backward tool instead of \`irreversible: true\`.`,
      });
    }
    const inputs = obj(c.inputs);
    const size = inputs ? new TextEncoder().encode(JSON.stringify(inputs)).length : 0;
    if (size > MAX_INPUTS_BYTES) {
      problems.push({
        path: `${at}.inputs`,
        message: `the inputs of custom step \`${name}\` are ${size} bytes of JSON; every run of the step carries them in its dispatch payload, which GitHub caps at 64 KiB`,
        fix: `Keep \`inputs\` under ${MAX_INPUTS_BYTES} bytes: pass a reference (a path, a URL, a key) to larger data instead of the data.`,
      });
    }
    const placement = obj(c.placement);
    if (!placement) return;
    const before = placement.before;
    const after = placement.after;
    if ((before === undefined) === (after === undefined)) {
      problems.push({
        path: `${at}.placement`,
        message:
          before === undefined
            ? `custom step \`${name}\` is placed neither before nor after a step`
            : `custom step \`${name}\` is placed both before ${String(before)} and after ${String(after)}`,
        fix: `Give exactly one of \`placement.before\` or \`placement.after\`: one of ${CUSTOM_STEP_ANCHORS.join(", ")}.`,
      });
    }
    const side = before !== undefined ? "before" : "after";
    const anchor = before ?? after;
    if (
      c.needs_drained === true &&
      typeof anchor === "string" &&
      (CUSTOM_STEP_ANCHORS as readonly string[]).includes(anchor) &&
      !drainedAt(side, anchor as CustomStepAnchor)
    ) {
      problems.push({
        path: `${at}.placement.${side}`,
        message: `custom step \`${name}\` needs_drained, but placed ${side} ${anchor} its lanes are serving traffic (not excluded)`,
        fix: `Place it ${DRAINED_FORMS}, or remove \`needs_drained\` if it is safe while the lane serves.`,
      });
    }
    const chosen = arr(placement.waves).filter((w): w is number => typeof w === "number");
    chosen.forEach((w, k) => {
      if (Number.isInteger(w) && w > waves.length) {
        problems.push({
          path: `${at}.placement.waves.${k}`,
          message: `wave ${w} does not exist: the rollout has ${waves.length} wave(s)`,
          fix: `List waves of the rollout: ${waves.length > 1 ? `1 to ${waves.length}` : "1"} (1 = the first wave).`,
        });
      }
    });
    const lanes = arr(placement.lanes).filter((l): l is string => typeof l === "string");
    lanes.forEach((id, k) => {
      const w = laneWave.get(id);
      if (!laneIds.includes(id)) {
        problems.push({
          path: `${at}.placement.lanes.${k}`,
          message: `lane \`${id}\` is not a lane of this recipe`,
          fix: `List lanes of the recipe: ${laneIds.join(", ") || "<a lane id>"}.`,
        });
      } else if (w !== undefined && chosen.length > 0 && !chosen.includes(w)) {
        problems.push({
          path: `${at}.placement.lanes.${k}`,
          message: `lane \`${id}\` is deployed in wave ${w}, which placement.waves does not list, so \`${name}\` never runs for it`,
          fix: `Add ${w} to \`placement.waves\`, or remove \`${id}\` from \`placement.lanes\`.`,
        });
      }
    });
  });
  return problems;
}

/** Whether the recipe declares an irreversible custom step (a recovery boundary of its own). */
export function hasIrreversibleCustomStep(input: unknown): boolean {
  return (
    arr(obj(input)?.custom_steps).some((c) => obj(c)?.irreversible === true) || hasContract(input)
  );
}

/**
 * The custom steps placed `position` `anchor` in wave `wave` (0-based) for lane `lane`, in the
 * order the recipe declares them.
 */
export function customStepsAt(
  r: Recipe,
  position: "before" | "after",
  anchor: CustomStepAnchor,
  wave: number,
  lane: string,
): CustomStep[] {
  // A migration's phases are custom steps too (domain/migration.ts), ahead of the recipe's own.
  return [...migrationCustomSteps(r), ...(r.custom_steps ?? [])].filter((c) => {
    const p = placementOf(c);
    if (!p || p.position !== position || p.anchor !== anchor) return false;
    if (c.placement.waves && !c.placement.waves.includes(wave + 1)) return false;
    return !c.placement.lanes || c.placement.lanes.includes(lane);
  });
}

/**
 * One direction of a custom step for `lane`: its tool with the lane, the candidate image and
 * the image compensation leaves on the lane (`restore_image`), the step's name, direction and
 * timeout, and the recipe's `inputs`. The same operation-key target both ways.
 */
function customAction(
  c: CustomStep,
  lane: ManifestLane,
  image: string,
  restoreImage: string,
  direction: "forward" | "backward",
  timeoutMs: number,
): StepAction {
  const tool = direction === "forward" ? c.forward : c.backward;
  if (!tool) throw new Error(`[recipe] custom step ${c.name} has no ${direction} tool`);
  return {
    kind: "runner",
    name: direction === "forward" ? c.name : `undo_${c.name}`,
    target: `lane=${lane.id}:step=${c.name}`,
    tool,
    args: {
      ...runnerArgs(lane, image, restoreImage),
      step: { name: c.name, direction, timeout_ms: timeoutMs },
      inputs: { ...(c.inputs ?? {}) },
    },
  };
}

/**
 * The table row of custom step `c` for `lane` in wave `wave`: a runner step. `laneRow`: a row
 * of the lane's block (placed by a lane step); otherwise a wave row (its `lane` null, the lane
 * in its action), as a gate's check rows are. Retries, failure policy and re-run window: the
 * step's own, else the recipe's policy; its timeout is the callback deadline.
 */
export function customStepRow(
  r: Recipe,
  c: CustomStep,
  lane: ManifestLane,
  restoreImage: string,
  wave: number,
  index: number,
  laneRow: boolean,
): ManifestStep {
  const timeout = c.timeout_ms ?? r.deadlines.callback_ms;
  return {
    index,
    name: c.name,
    kind: "runner",
    lane: laneRow ? lane.id : null,
    wave,
    forward: customAction(c, lane, r.image, restoreImage, "forward", timeout),
    backward: c.backward ? customAction(c, lane, r.image, restoreImage, "backward", timeout) : null,
    retries: c.retries ?? r.policy.retries ?? DEFAULT_RUNNER_RETRIES,
    on_failure: c.on_failure ?? r.policy.on_failure,
    start_deadline_ms: r.deadlines.start_ms,
    callback_deadline_ms: timeout,
    rerun_window_ms: (c.rerun_window_minutes ?? r.policy.rerun_window_minutes) * 60_000,
    custom: {
      ...(c.irreversible ? { irreversible: true as const } : {}),
      ...(c.needs_drained ? { needs_drained: true as const } : {}),
      ...("phase" in c ? { phase: (c as MigrationCustomStep).phase } : {}),
    },
  };
}
