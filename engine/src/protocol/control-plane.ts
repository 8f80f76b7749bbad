/**
 * The port's `ControlPlaneOp` in the control plane's terms: which write it is, and whether a
 * state read back matches its target. Shared by the HTTP adapter and the test double so both
 * judge `observe` (rule 5: resolve `unknown` by reading) the same way.
 */
import type { ControlPlaneOp } from "../domain/types.ts";
import type { CpAction, LaneState } from "../control-plane/model.ts";

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
