/**
 * The simulator's receivers of external effects: a control plane and a target (the lane a
 * runner's tool deploys to). Both count applications per operation key: a repeat of the
 * same key and body is a replay (no second application), the same key with another body is
 * refused, and a write from an older generation than one already seen is refused (rule 7).
 */
import type { ControlPlaneOp } from "../../../engine/src/domain/types.ts";

/** One application at a receiver, in order, for ordering checks. */
export interface Application {
  seq: number;
  receiver: "control_plane" | "target";
  operation_key: string;
  direction: "fwd" | "bwd";
  step_index: number;
  generation: number;
}

export type ReceiveResult = "applied" | "replayed" | "refused_body" | "refused_stale";

/** Shared bookkeeping: keys, bodies, generations and the application log. */
export class KeyedReceiver {
  readonly bodies = new Map<string, string>();
  readonly applications = new Map<string, number>();
  private maxGeneration = new Map<string, number>();

  constructor(
    readonly name: "control_plane" | "target",
    private readonly log: Application[],
  ) {}

  /** Decides whether a keyed write applies; records it if so. */
  receive(key: string, body: unknown, generation: number): ReceiveResult {
    const json = JSON.stringify(body);
    const seen = this.bodies.get(key);
    if (seen !== undefined) return seen === json ? "replayed" : "refused_body";
    const release = key.split(":")[0]!;
    if (generation < (this.maxGeneration.get(release) ?? 0)) return "refused_stale";
    this.maxGeneration.set(release, generation);
    this.bodies.set(key, json);
    this.applications.set(key, (this.applications.get(key) ?? 0) + 1);
    const [, step, dir] = key.split(":");
    this.log.push({
      seq: this.log.length,
      receiver: this.name,
      operation_key: key,
      direction: dir === "bwd" ? "bwd" : "fwd",
      step_index: Number(step),
      generation,
    });
    return "applied";
  }
}

/** The control plane's state: absolute weights, markers and capabilities per lane. */
export class SimControlPlane extends KeyedReceiver {
  weights: Record<string, number> = { l1: 0, l0: 100 };
  excluded = new Set<string>();
  advertised = new Set<string>();
  /** Capabilities as last set per lane (sorted). */
  capabilities = new Map<string, string[]>();

  constructor(log: Application[]) {
    super("control_plane", log);
  }

  /** A keyed write; `assert_traffic` is a read and never counts as an application. */
  apply(op: ControlPlaneOp, key: string, generation: number): ReceiveResult | "mismatch" {
    if (op.op === "assert_traffic") return this.matches(op) ? "replayed" : "mismatch";
    const res = this.receive(key, op, generation);
    if (res !== "applied") return res;
    if (op.op === "set_traffic") this.weights = { ...op.weights };
    else if (op.op === "set_marker") {
      if (op.present) this.excluded.add(op.lane);
      else this.excluded.delete(op.lane);
    } else {
      if (op.advertised) this.advertised.add(op.lane);
      else this.advertised.delete(op.lane);
      this.capabilities.set(op.lane, [...new Set(op.capabilities)].sort());
    }
    return res;
  }

  matches(op: ControlPlaneOp): boolean {
    switch (op.op) {
      case "set_traffic":
      case "assert_traffic":
        return JSON.stringify(sorted(this.weights)) === JSON.stringify(sorted(op.weights));
      case "set_marker":
        return this.excluded.has(op.lane) === op.present;
      case "set_capabilities":
        return this.advertised.has(op.lane) === op.advertised;
    }
  }
}

const sorted = (w: Record<string, number>) =>
  Object.fromEntries(Object.entries(w).sort(([a], [b]) => a.localeCompare(b)));
