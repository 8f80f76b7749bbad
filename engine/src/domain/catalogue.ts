/**
 * The step catalogue, as data (STYLE.md §3): each row names a step, where it runs, its
 * forward action and, when it mutates state, its backward (compensating) action. Actions are
 * referenced by name and built by the functions in `ACTIONS`, like guards in a state table.
 * A row without `backward` is an assertion (`assert_*`).
 *
 * Operation-key targets (the last part of `{release}:{step}:{fwd|bwd}:{target}`) are built
 * here. Each is deterministic, short, and names the one effect of its step run:
 * `lane=<id>:excluded=true`, `lane=<id>:image=<first 12 hex of digest>`,
 * `lane=<id>:smoke=<12 hex>`, `lane=<id>:capabilities=advertised`, `traffic=<p>`.
 */
import type { StepKind } from "./states.ts";
import type { Json, ManifestLane, StepAction } from "./types.ts";

/** Names of the runner tools the engine may dispatch (scripts/release/allowlist.json). */
export const TOOL_ALLOWLIST: readonly string[] = [
  "attach-queue-lane",
  "restore-queue-lane",
  "run-smoke",
  "noop",
];

/** Traffic state: the absolute % on deployed lanes and the per-lane weights (sum 100). */
export interface TrafficState {
  percent: number;
  weights: Record<string, number>;
}

/** What an action builder needs to know about its place in the table. */
export interface StepContext {
  /** The lane of a lane-scoped step, null for wave-scoped steps. */
  lane: ManifestLane | null;
  image: string;
  previous_image: string;
  /** Traffic after this wave's `set_traffic`. */
  traffic: TrafficState;
  /** Traffic before this wave (the previous wave's, or the baseline with percent 0). */
  previous_traffic: TrafficState;
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
  | "assert_traffic_observed";

/** Forward step names, in the order they appear per lane and then per wave. */
export type StepName =
  | "exclude_lane"
  | "attach_queue_lane"
  | "assert_smoke_passed"
  | "advertise_capabilities"
  | "include_lane"
  | "set_traffic"
  | "assert_traffic_observed";

/** One row of the catalogue. `scope: lane` rows repeat for each lane of a wave, in order. */
export interface CatalogueRow {
  name: StepName;
  kind: StepKind;
  scope: "lane" | "wave";
  forward: ActionName;
  backward?: ActionName;
}

/** The table compiled for every wave: lane rows for each lane, then the wave rows. */
export const CATALOGUE: readonly CatalogueRow[] = [
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

function marker(ctx: StepContext, name: ActionName, present: boolean): StepAction {
  const lane = needLane(ctx, name);
  return {
    kind: "control_plane",
    name,
    target: `lane=${lane.id}:excluded=${present}`,
    request: { op: "set_marker", lane: lane.id, marker: "excluded", present },
  };
}

function capabilities(ctx: StepContext, name: ActionName, advertised: boolean): StepAction {
  const lane = needLane(ctx, name);
  return {
    kind: "control_plane",
    name,
    target: `lane=${lane.id}:capabilities=${advertised ? "advertised" : "withdrawn"}`,
    request: {
      op: "set_capabilities",
      lane: lane.id,
      capabilities: [...lane.capabilities],
      advertised,
    },
  };
}

/**
 * Action builders by name. `direction` says which traffic state `set_traffic` establishes:
 * forward the wave's, backward the one before it (absolute, never a relative change).
 */
export const ACTIONS: Record<
  ActionName,
  (ctx: StepContext, direction: "forward" | "backward") => StepAction
> = {
  exclude_lane: (ctx) => marker(ctx, "exclude_lane", true),
  include_lane: (ctx) => marker(ctx, "include_lane", false),
  attach_queue_lane: (ctx) => {
    const lane = needLane(ctx, "attach_queue_lane");
    return {
      kind: "runner",
      name: "attach_queue_lane",
      target: `lane=${lane.id}:image=${shortDigest(ctx.image)}`,
      tool: "attach-queue-lane",
      args: runnerArgs(lane, ctx.image, ctx.previous_image),
    };
  },
  restore_queue_lane: (ctx) => {
    const lane = needLane(ctx, "restore_queue_lane");
    return {
      kind: "runner",
      name: "restore_queue_lane",
      target: `lane=${lane.id}:image=${shortDigest(ctx.previous_image)}`,
      tool: "restore-queue-lane",
      args: runnerArgs(lane, ctx.previous_image, ctx.image),
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
  withdraw_capabilities: (ctx) => capabilities(ctx, "withdraw_capabilities", false),
  set_traffic: (ctx, direction) => {
    const t = direction === "forward" ? ctx.traffic : ctx.previous_traffic;
    return {
      kind: "control_plane",
      name: "set_traffic",
      target: `traffic=${t.percent}`,
      request: { op: "set_traffic", weights: { ...t.weights }, percent: t.percent },
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
