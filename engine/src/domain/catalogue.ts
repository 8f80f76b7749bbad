/**
 * The step catalogue, as data: each row names a step, where it runs, its
 * forward action and, when it mutates state, its backward (compensating) action. Actions are
 * referenced by name and built by the functions in `ACTIONS`, like guards in a state table.
 * A row without `backward` is an assertion (`assert_*`).
 *
 * Operation-key targets (the last part of `{release}:{step}:{fwd|bwd}:{target}`) are built
 * here. Each is deterministic, short, and names the one effect of its step run:
 * `lane=<id>:excluded=true`, `lane=<id>:image=<first 12 hex of digest>`,
 * `lane=<id>:smoke=<12 hex>`, `lane=<id>:capabilities=advertised`, `traffic=<p>`.
 */
import type { ConformanceCheck } from "./conformance-schema.ts";
import type { StepKind } from "./states.ts";
import type { Json, ManifestLane, StepAction } from "./types.ts";

/** Traffic state: the absolute % on deployed lanes and the per-lane weights (sum 100). */
export interface TrafficState {
  percent: number;
  weights: Record<string, number>;
}

/**
 * A lane as the control plane showed it when the release started (the observed baseline):
 * what compensation restores. Weight is in `ManifestLane.baseline_weight`.
 */
export interface LaneBaseline {
  excluded: boolean;
  capabilities: string[];
  advertised: boolean;
  /**
   * Image the lane ran at start (`name@sha256:…`), null/absent when unknown: what a backward
   * `restore_queue_lane` leaves running (else the recipe's `previous_image`).
   */
  image?: string | null;
}

/** What an action builder needs to know about its place in the table. */
export interface StepContext {
  /** The lane of a lane-scoped step, null for wave-scoped steps. */
  lane: ManifestLane | null;
  /** The lane's observed baseline (lane-scoped steps): backward actions restore it. */
  baseline: LaneBaseline | null;
  image: string;
  previous_image: string;
  /** Traffic this step establishes forward (`drain_wave`, `set_traffic`, the assertion). */
  traffic: TrafficState;
  /** Traffic right before this step: what its backward write restores. */
  previous_traffic: TrafficState;
  /** `assert_check_passed`: the gate's check this step runs (analysis `checks`). */
  check?: { name: string; tool: string; args?: Record<string, string | number | boolean> };
  /** `assert_conformance_passed`: the recipe's conformance check this step runs. */
  conformance?: ConformanceCheck;
}

export type ActionName =
  | "exclude_lane"
  | "include_lane"
  | "attach_queue_lane"
  | "restore_queue_lane"
  | "assert_smoke_passed"
  | "advertise_capabilities"
  | "withdraw_capabilities"
  | "set_traffic"
  | "drain_wave"
  | "assert_traffic_observed"
  | "assert_check_passed"
  | "assert_conformance_passed";

/** Forward step names, in the order they appear per lane and then per wave. */
export type StepName =
  | "drain_wave"
  | "exclude_lane"
  | "attach_queue_lane"
  | "assert_smoke_passed"
  | "advertise_capabilities"
  | "include_lane"
  | "set_traffic"
  | "assert_traffic_observed"
  | "assert_check_passed"
  | "assert_conformance_passed";

/**
 * One row of the catalogue. Per wave: the `wave_start` rows, then the `lane` rows for each lane
 * of the wave in order, then the `wave` rows, then, on a gated wave whose analysis lists
 * `checks`, one `check` row per check and lane of the wave (docs/gate.md "Checks"). A check row
 * is wave-scoped in the table (its `lane` is null, so a parallel wave's lane walk leaves it
 * alone); the lane it checks is in its arguments and its operation key. The `conformance` rows
 * (one per check of the recipe's `conformance`) come before everything else, before wave 1's
 * first step (docs/recipes.md "Conformance checks"), wave-scoped in the same way.
 */
export interface CatalogueRow {
  name: StepName;
  kind: StepKind;
  scope: "conformance" | "wave_start" | "lane" | "wave" | "check";
  forward: ActionName;
  backward?: ActionName;
}

/** The table compiled for every wave: lane rows for each lane, then the wave rows. */
export const CATALOGUE: readonly CatalogueRow[] = [
  {
    name: "assert_conformance_passed",
    kind: "runner",
    scope: "conformance",
    forward: "assert_conformance_passed",
  },
  {
    name: "drain_wave",
    kind: "control_plane",
    scope: "wave_start",
    forward: "drain_wave",
    backward: "set_traffic",
  },
  {
    name: "exclude_lane",
    kind: "control_plane",
    scope: "lane",
    forward: "exclude_lane",
    backward: "include_lane",
  },
  {
    name: "attach_queue_lane",
    kind: "runner",
    scope: "lane",
    forward: "attach_queue_lane",
    backward: "restore_queue_lane",
  },
  { name: "assert_smoke_passed", kind: "runner", scope: "lane", forward: "assert_smoke_passed" },
  {
    name: "advertise_capabilities",
    kind: "control_plane",
    scope: "lane",
    forward: "advertise_capabilities",
    backward: "withdraw_capabilities",
  },
  {
    name: "include_lane",
    kind: "control_plane",
    scope: "lane",
    forward: "include_lane",
    backward: "exclude_lane",
  },
  {
    name: "set_traffic",
    kind: "control_plane",
    scope: "wave",
    forward: "set_traffic",
    backward: "set_traffic",
  },
  {
    name: "assert_traffic_observed",
    kind: "control_plane",
    scope: "wave",
    forward: "assert_traffic_observed",
  },
  { name: "assert_check_passed", kind: "runner", scope: "check", forward: "assert_check_passed" },
];

/** Forward step names of the catalogue, in table order. */
export const STEP_NAMES: readonly StepName[] = CATALOGUE.map((r) => r.name);

/** `sha256:<hex>` digest of an image reference, first 12 hex (as `docker images` shows). */
export function shortDigest(image: string): string {
  const at = image.indexOf("@sha256:");
  return at < 0 ? "unpinned" : image.slice(at + 8, at + 8 + 12);
}

function needLane(ctx: StepContext, action: ActionName): ManifestLane {
  if (!ctx.lane) throw new Error(`[recipe] action ${action} needs a lane`);
  return ctx.lane;
}

/** The lane fields a runner step carries in its dispatch payload. */
export type RunnerLane = Pick<
  ManifestLane,
  "id" | "host" | "port" | "user" | "host_key" | "queue" | "health_url"
> &
  Partial<Pick<ManifestLane, "jump">>;

/**
 * Runner args (shared decision): the lane, the image to run after, the image before.
 * Also sizes dispatch payloads in the contract check, so both read one shape.
 */
export function runnerArgs(
  lane: RunnerLane,
  image: string,
  previous: string,
): Record<string, Json> {
  return {
    lane: {
      id: lane.id,
      host: lane.host,
      port: lane.port,
      user: lane.user,
      host_key: lane.host_key,
      ...(lane.jump ? { jump: { ...lane.jump } } : {}),
      queue: lane.queue,
      health_url: lane.health_url,
    },
    image,
    previous_image: previous,
  };
}

/** The image compensation leaves on the lane: its observed one, else `previous_image`. */
function restoreImage(ctx: StepContext): string {
  return ctx.baseline?.image ?? ctx.previous_image;
}

function marker(ctx: StepContext, name: ActionName, present: boolean): StepAction {
  const lane = needLane(ctx, name);
  return {
    kind: "control_plane",
    name,
    target: `lane=${lane.id}:excluded=${present}`,
    request: { op: "set_marker", lane: lane.id, marker: "excluded", present },
  };
}

function capabilities(
  ctx: StepContext,
  name: ActionName,
  advertised: boolean,
  list: readonly string[] = needLane(ctx, name).capabilities,
): StepAction {
  const lane = needLane(ctx, name);
  return {
    kind: "control_plane",
    name,
    target: `lane=${lane.id}:capabilities=${advertised ? "advertised" : "withdrawn"}`,
    request: {
      op: "set_capabilities",
      lane: lane.id,
      capabilities: [...list],
      advertised,
    },
  };
}

/**
 * Action builders by name. `direction` says which traffic state `set_traffic` establishes:
 * forward the step's, backward the one right before it (absolute, never a relative change).
 * Backward `include_lane` and `withdraw_capabilities` restore the lane's observed baseline
 * (`ctx.baseline`: its marker, its capabilities and whether they were advertised), not values
 * derived from the recipe.
 */
export const ACTIONS: Record<
  ActionName,
  (ctx: StepContext, direction: "forward" | "backward") => StepAction
> = {
  exclude_lane: (ctx) => marker(ctx, "exclude_lane", true),
  include_lane: (ctx, direction) =>
    marker(
      ctx,
      "include_lane",
      direction === "backward" ? (ctx.baseline?.excluded ?? false) : false,
    ),
  attach_queue_lane: (ctx) => {
    const lane = needLane(ctx, "attach_queue_lane");
    return {
      kind: "runner",
      name: "attach_queue_lane",
      target: `lane=${lane.id}:image=${shortDigest(ctx.image)}`,
      tool: "attach-queue-lane",
      // A shadow-safe lane's declared environment goes with the candidate's deploy only.
      args: {
        ...runnerArgs(lane, ctx.image, restoreImage(ctx)),
        ...(lane.shadow_env ? { env: { ...lane.shadow_env } } : {}),
      },
    };
  },
  // Restores the image the lane ran at start (observed baseline), else the recipe's previous.
  restore_queue_lane: (ctx) => {
    const lane = needLane(ctx, "restore_queue_lane");
    const image = restoreImage(ctx);
    return {
      kind: "runner",
      name: "restore_queue_lane",
      target: `lane=${lane.id}:image=${shortDigest(image)}`,
      tool: "restore-queue-lane",
      args: runnerArgs(lane, image, ctx.image),
    };
  },
  assert_smoke_passed: (ctx) => {
    const lane = needLane(ctx, "assert_smoke_passed");
    return {
      kind: "runner",
      name: "assert_smoke_passed",
      target: `lane=${lane.id}:smoke=${shortDigest(ctx.image)}`,
      tool: "run-smoke",
      args: runnerArgs(lane, ctx.image, ctx.previous_image),
    };
  },
  advertise_capabilities: (ctx) => capabilities(ctx, "advertise_capabilities", true),
  withdraw_capabilities: (ctx) =>
    ctx.baseline
      ? capabilities(
          ctx,
          "withdraw_capabilities",
          ctx.baseline.advertised,
          [...new Set(ctx.baseline.capabilities)].sort(),
        )
      : capabilities(ctx, "withdraw_capabilities", false),
  drain_wave: (ctx) => ({
    kind: "control_plane",
    name: "drain_wave",
    target: `drain:traffic=${ctx.traffic.percent}`,
    request: {
      op: "set_traffic",
      weights: { ...ctx.traffic.weights },
      percent: ctx.traffic.percent,
    },
  }),
  set_traffic: (ctx, direction) => {
    const t = direction === "forward" ? ctx.traffic : ctx.previous_traffic;
    return {
      kind: "control_plane",
      name: "set_traffic",
      target: `traffic=${t.percent}`,
      request: { op: "set_traffic", weights: { ...t.weights }, percent: t.percent },
    };
  },
  // A gate's deterministic check against one candidate lane: the check's allowlisted tool with
  // the lane, the images and the check's own arguments; read-only, so no backward action.
  assert_check_passed: (ctx) => {
    const lane = needLane(ctx, "assert_check_passed");
    const check = ctx.check;
    if (!check) throw new Error("[recipe] action assert_check_passed needs a check");
    return {
      kind: "runner",
      name: "assert_check_passed",
      target: `lane=${lane.id}:check=${check.name}`,
      tool: check.tool,
      args: {
        ...runnerArgs(lane, ctx.image, ctx.previous_image),
        check: { name: check.name, args: { ...(check.args ?? {}) } },
      },
    };
  },
  // A mixed-version conformance check, before any exposure: the check's allowlisted tool with
  // both images, the side of each, and the lane it may use; read-only, so no backward action.
  assert_conformance_passed: (ctx) => {
    const lane = needLane(ctx, "assert_conformance_passed");
    const c = ctx.conformance;
    if (!c) throw new Error("[recipe] action assert_conformance_passed needs a conformance check");
    return {
      kind: "runner",
      name: "assert_conformance_passed",
      target: `conformance=${c.name}`,
      tool: c.tool,
      args: {
        ...runnerArgs(lane, ctx.image, ctx.previous_image),
        conformance: {
          name: c.name,
          reader: c.reader,
          writer: c.writer,
          reader_image: c.reader === "new" ? ctx.image : ctx.previous_image,
          writer_image: c.writer === "new" ? ctx.image : ctx.previous_image,
          args: { ...(c.args ?? {}) },
        },
      },
    };
  },
  assert_traffic_observed: (ctx) => ({
    kind: "control_plane",
    name: "assert_traffic_observed",
    target: `traffic=${ctx.traffic.percent}`,
    request: {
      op: "assert_traffic",
      weights: { ...ctx.traffic.weights },
      percent: ctx.traffic.percent,
    },
  }),
};
