/**
 * Manifests built by hand from `engine/src/domain/types.ts`, for transition tests and the
 * simulator. Independent of the recipe compiler on purpose: these tests pin the state
 * machine, not the compiler. Step names and tools follow docs shared-decisions (step table).
 */
import type { FailurePolicy } from "../../engine/src/domain/states.ts";
import type {
  ControlPlaneOp,
  Manifest,
  ManifestStep,
  StepAction,
} from "../../engine/src/domain/types.ts";

export const DIGEST = "d".repeat(64);
export const OTHER_DIGEST = "e".repeat(64);
export const IMAGE = `registry.example/acme/model@sha256:${"1".repeat(64)}`;
export const PREVIOUS_IMAGE = `registry.example/acme/model@sha256:${"0".repeat(64)}`;
export const START_DEADLINE_MS = 60_000;
export const CALLBACK_DEADLINE_MS = 600_000;

/** How a test describes one step: kind, whether it has a backward action, policy. */
export interface StepSpec {
  name: string;
  kind: "runner" | "control_plane";
  /** false = an assertion (no backward action). */
  backward: boolean;
  retries?: number;
  on_failure?: FailurePolicy;
  /** Runner steps: the re-run window in ms (absent: none, compensate at once). */
  rerun_window_ms?: number;
  lane?: string;
  wave?: number;
  /** control-plane steps: the request; defaults to a marker write on the lane. */
  request?: ControlPlaneOp;
  backwardRequest?: ControlPlaneOp;
  tool?: string;
  backwardTool?: string;
}

const lane = (id: string) => ({
  id,
  host: "127.0.0.1",
  port: 22,
  user: "deploy",
  host_key: `SHA256:${"A".repeat(43)}`,
  queue: `q-${id}`,
  capabilities: ["chat"],
  health_url: `http://127.0.0.1:9/${id}/health`,
});

function runnerAction(
  name: string,
  tool: string,
  laneId: string,
  image: string,
  prev: string,
): StepAction {
  const l = lane(laneId);
  return {
    kind: "runner",
    name,
    target: `lane=${laneId}`,
    tool,
    args: {
      lane: {
        id: l.id,
        host: l.host,
        port: l.port,
        user: l.user,
        host_key: l.host_key,
        queue: l.queue,
        health_url: l.health_url,
      },
      image,
      previous_image: prev,
    },
  };
}

function targetOf(op: ControlPlaneOp): string {
  switch (op.op) {
    case "set_traffic":
      return `traffic=${op.percent}`;
    case "assert_traffic":
      return `observed=${op.percent}`;
    case "set_marker":
      return `lane=${op.lane}:excluded=${op.present}`;
    case "set_capabilities":
      return `lane=${op.lane}:capabilities=${op.advertised}`;
  }
}

function cpAction(name: string, request: ControlPlaneOp): StepAction {
  return { kind: "control_plane", name, target: targetOf(request), request };
}

/** Builds one manifest step from a spec; indices are assigned by `manifestOf`. */
function buildStep(spec: StepSpec, index: number): ManifestStep {
  const laneId = spec.lane ?? "l1";
  let forward: StepAction;
  let backward: StepAction | null = null;
  if (spec.kind === "runner") {
    forward = runnerAction(
      spec.name,
      spec.tool ?? "attach-queue-lane",
      laneId,
      IMAGE,
      PREVIOUS_IMAGE,
    );
    if (spec.backward) {
      backward = runnerAction(
        `restore_${spec.name}`,
        spec.backwardTool ?? "restore-queue-lane",
        laneId,
        PREVIOUS_IMAGE,
        IMAGE,
      );
    }
  } else {
    const req = spec.request ?? {
      op: "set_marker",
      lane: laneId,
      marker: "excluded",
      present: index % 2 === 0,
    };
    forward = cpAction(spec.name, req);
    if (spec.backward) {
      const back: ControlPlaneOp =
        spec.backwardRequest ??
        (req.op === "set_marker"
          ? { ...req, present: !req.present }
          : req.op === "set_capabilities"
            ? { ...req, advertised: !req.advertised }
            : { op: "set_traffic", weights: { [laneId]: 0 }, percent: 0 });
      backward = cpAction(`undo_${spec.name}`, back);
    }
  }
  return {
    index,
    name: spec.name,
    kind: spec.kind,
    lane: laneId,
    wave: spec.wave ?? 0,
    forward,
    backward,
    retries: spec.retries ?? 0,
    on_failure: spec.on_failure ?? "compensate",
    start_deadline_ms: START_DEADLINE_MS,
    callback_deadline_ms: CALLBACK_DEADLINE_MS,
    ...(spec.rerun_window_ms === undefined ? {} : { rerun_window_ms: spec.rerun_window_ms }),
  };
}

/** A manifest whose steps are exactly `specs`, in order. */
export function manifestOf(
  specs: StepSpec[],
  opts: { tool_revision?: string | null } = {},
): Manifest {
  const laneIds = [...new Set(specs.map((s) => s.lane ?? "l1"))];
  return {
    v: 1,
    recipe_name: "fixture",
    model: "acme-chat",
    image: IMAGE,
    previous_image: PREVIOUS_IMAGE,
    tool_revision: opts.tool_revision ?? null,
    lanes: laneIds.map((id) => ({
      ...lane(id),
      baseline_weight: Math.floor(100 / laneIds.length),
    })),
    waves: [{ lanes: laneIds, traffic: 100 }],
    steps: specs.map(buildStep),
  };
}

const weights = (p: number): Record<string, number> => ({ l1: p, l0: 100 - p });

/**
 * The shared step table for one lane `l1` and one wave at `percent` (shared-decisions):
 * 0 exclude_lane (cp), 1 attach_queue_lane (runner), 2 assert_smoke_passed (runner, no
 * backward), 3 advertise_capabilities (cp), 4 include_lane (cp), 5 set_traffic(p) (cp),
 * 6 assert_traffic_observed(p) (cp read, no backward).
 */
export function waveSpecs(percent = 10, opts: Partial<StepSpec> = {}): StepSpec[] {
  const l = "l1";
  return [
    {
      name: "exclude_lane",
      kind: "control_plane",
      backward: true,
      request: { op: "set_marker", lane: l, marker: "excluded", present: true },
      ...opts,
    },
    {
      name: "attach_queue_lane",
      kind: "runner",
      backward: true,
      tool: "attach-queue-lane",
      backwardTool: "restore-queue-lane",
      ...opts,
    },
    { name: "assert_smoke_passed", kind: "runner", backward: false, tool: "run-smoke", ...opts },
    {
      name: "advertise_capabilities",
      kind: "control_plane",
      backward: true,
      request: { op: "set_capabilities", lane: l, capabilities: ["chat"], advertised: true },
      ...opts,
    },
    {
      name: "include_lane",
      kind: "control_plane",
      backward: true,
      request: { op: "set_marker", lane: l, marker: "excluded", present: false },
      ...opts,
    },
    {
      name: "set_traffic",
      kind: "control_plane",
      backward: true,
      request: { op: "set_traffic", weights: weights(percent), percent },
      backwardRequest: { op: "set_traffic", weights: weights(0), percent: 0 },
      ...opts,
    },
    {
      name: "assert_traffic_observed",
      kind: "control_plane",
      backward: false,
      request: { op: "assert_traffic", weights: weights(percent), percent },
      ...opts,
    },
  ];
}

/** F15's table: 0 pull+start (runner), 1 smoke (runner, no backward), 2 traffic 10%, 3 traffic 50%, 4 observe 50%. */
export function f15Specs(): StepSpec[] {
  return [
    { name: "attach_queue_lane", kind: "runner", backward: true },
    { name: "assert_smoke_passed", kind: "runner", backward: false, tool: "run-smoke" },
    {
      name: "set_traffic",
      kind: "control_plane",
      backward: true,
      request: { op: "set_traffic", weights: weights(10), percent: 10 },
      backwardRequest: { op: "set_traffic", weights: weights(0), percent: 0 },
    },
    {
      name: "set_traffic",
      kind: "control_plane",
      backward: true,
      request: { op: "set_traffic", weights: weights(50), percent: 50 },
      backwardRequest: { op: "set_traffic", weights: weights(10), percent: 10 },
    },
    {
      name: "assert_traffic_observed",
      kind: "control_plane",
      backward: false,
      request: { op: "assert_traffic", weights: weights(50), percent: 50 },
    },
  ];
}
