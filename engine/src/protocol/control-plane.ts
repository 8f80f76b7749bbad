/**
 * The control-plane wire contract (docs/control-plane.openapi.yaml), shared by the engine's
 * adapters, the test double and the reference control plane: the identity every write carries
 * (`WriteContext`, with the model the write addresses), the header names it travels in, the
 * shapes of a lane and of one absolute write, and how a `ControlPlaneOp` maps onto a
 * write and is judged against a state read back (rule: resolve `unknown` by reading).
 */

/** Model name when a client names none. */
export const DEFAULT_MODEL = "default";

/**
 * A control-plane request, absolute by construction (docs/state-machine.md rule 4).
 * `assert_traffic` is a read: it compares the control plane's weights to `weights`.
 */
export type ControlPlaneOp =
  | { op: "set_traffic"; weights: Record<string, number>; percent: number }
  | { op: "set_marker"; lane: string; marker: "excluded"; present: boolean }
  | { op: "set_capabilities"; lane: string; capabilities: string[]; advertised: boolean }
  | { op: "assert_traffic"; weights: Record<string, number>; percent: number };

/** Header names of a keyed write. */
export const WRITE_HEADERS = {
  operation_key: "Idempotency-Key",
  release_id: "Baton-Release-Id",
  generation: "Baton-Generation",
  release_uid: "Baton-Release-Uid",
} as const;

/** Identity of a write, sent with every request (over HTTP: `WRITE_HEADERS`). */
export interface WriteContext {
  operation_key: string;
  release_id: string;
  generation: number;
  /**
   * The model the write addresses (the release's `manifest.model`): traffic is per model, and
   * the op itself names none. One adapter therefore serves releases of every model.
   */
  model: string;
  /**
   * The release's random identity (`Release.uid`). The control plane keeps it in the ledger:
   * the same key from another uid (another engine database numbering releases from r1 again)
   * is refused 422, never replayed. Absent for releases stored before uids existed: then a
   * repeated key is matched on the body alone.
   */
  release_uid?: string;
}

/** The control plane's view of one lane. A lane with `model: null` carries no model's traffic yet. */
export interface LaneState {
  id: string;
  /** Model whose traffic this lane serves; set by a traffic write or a lane declaration. */
  model: string | null;
  /** Absolute share (%) of the model's traffic. */
  weight: number;
  /** Marker `excluded`: true takes the lane out of routing (its share goes to the others). */
  excluded: boolean;
  /** Sorted, de-duplicated capability names. */
  capabilities: string[];
  advertised: boolean;
  updated_at: number;
  /**
   * Image the lane runs (`name@sha256:…`), when the control plane knows it: the reference
   * control plane keeps what the lane last reported (`PUT /v1/lanes/:lane/image`, or `image`
   * in its declaration). Absent when nothing was reported; the fleet view then uses what the
   * target reported in a step result, and the observed baseline records the lane's image as
   * unknown.
   */
  image?: string | null;
}

/** What the control plane holds for the lanes of a model (the fleet view's "observed"). */
export type LanesRead =
  | { ok: true; lanes: LaneState[] }
  /** Unreachable, timed out or answered non-2xx: the message says which. */
  | { ok: false; message: string };

/** One absolute write. Canonicalised before hashing (capabilities sorted). */
export type CpAction =
  /** All lanes of `model` at once; lanes of the model not named get 0. Weights sum to 100. */
  | { kind: "set_traffic"; model: string; weights: Record<string, number> }
  /** One lane's absolute weight (no sum check: use `set_traffic` for a consistent model). */
  | { kind: "set_weight"; lane: string; weight: number }
  | { kind: "set_marker"; lane: string; marker: "excluded"; present: boolean }
  | { kind: "set_capabilities"; lane: string; capabilities: string[]; advertised: boolean }
  /**
   * Declares a lane (creates it if absent) and assigns it to `model`; `image`, when given, is
   * the image the lane runs now (kept as `LaneState.image`).
   */
  | { kind: "declare_lane"; lane: string; model: string; image?: string };

/** The write an op asks for; `assert_traffic` is a read and has none. */
export function actionOf(op: ControlPlaneOp, model: string): CpAction | null {
  switch (op.op) {
    case "set_traffic":
      return { kind: "set_traffic", model, weights: op.weights };
    case "set_marker":
      return { kind: "set_marker", lane: op.lane, marker: op.marker, present: op.present };
    case "set_capabilities":
      return {
        kind: "set_capabilities",
        lane: op.lane,
        capabilities: op.capabilities,
        advertised: op.advertised,
      };
    case "assert_traffic":
      return null;
  }
}

/**
 * Whether traffic read back equals the target weights: every lane at its target weight, where a
 * lane absent on either side counts as 0 (an unknown lane takes no traffic; the write is absolute
 * for the whole model, so lanes it does not name are at 0).
 */
export function weightsMatch(
  observed: Record<string, number>,
  target: Record<string, number>,
): boolean {
  const ids = new Set([...Object.keys(observed), ...Object.keys(target)]);
  // Own properties only: a lane may be called `constructor` or `toString`.
  const at = (w: Record<string, number>, id: string) => (Object.hasOwn(w, id) ? w[id] : 0);
  for (const id of ids) if (at(observed, id) !== at(target, id)) return false;
  return true;
}

/** Whether a lane read back (undefined = unknown lane) shows the target of a lane op. */
export function laneMatches(
  op: Extract<ControlPlaneOp, { op: "set_marker" | "set_capabilities" }>,
  lane: LaneState | undefined,
): boolean {
  if (!lane) return false;
  if (op.op === "set_marker") return lane.excluded === op.present;
  const want = [...new Set(op.capabilities)].sort();
  return (
    lane.advertised === op.advertised &&
    lane.capabilities.length === want.length &&
    lane.capabilities.every((c, i) => c === want[i])
  );
}
