/**
 * In-memory test double of the `ControlPlane` port, for engine tests that need a control plane
 * without HTTP. It applies the reference server's own rules (`ControlPlaneCore`: ledger by
 * operation key, 422 on a reused key with another request, 409 on a stale generation, absolute
 * writes, history), so what passes here passes against the real server.
 *
 * What tests read from it:
 * - `calls`: every `apply` / `observe` call, in order, with the op, context and result.
 * - `applications(key)` / `applicationCounts()`: applied changes per operation key. A replay
 *   (same key, same request) is not an application; a fault that applies (`apply_then_hang`) is.
 * - `weights(model?)`, `lane(id)`, `route(n)`, `history()`, `ledger()`: the state.
 * - `faults.arm({mode, count, match?, on?})`: `error` -> `unknown` without applying (a 500),
 *   `hang` -> `unknown` without applying (a timeout), `apply_then_hang` -> applies, then
 *   `unknown`, `lie` -> `ok` without applying (caught only by reading back). Reads (`on: "read"`) fail with `{ok: false}` for `error`/`hang`.
 * - `seed([{id, weight, excluded, capabilities, advertised, model}])`: starting state, no history.
 *
 * Example:
 *   const cp = new MemoryControlPlane();
 *   cp.seed([{ id: "a", weight: 100 }, { id: "b", weight: 0 }]);  // model "default"
 *   cp.faults.arm({ mode: "apply_then_hang", match: ":traffic=10" });
 *   await cp.apply({ op: "set_traffic", weights: { a: 90, b: 10 }, percent: 10 }, ctx); // unknown
 *   (await cp.observe(op, ctx)).matches === true; cp.applications(ctx.operation_key) === 1;
 */
import { ControlPlaneCore, DEFAULT_MODEL } from "../../control-plane/core.ts";
import { CpError } from "../../control-plane/errors.ts";
import { FaultPlan } from "../../control-plane/faults.ts";
import { MemoryCpStore } from "../../control-plane/memory-store.ts";
import type {
  ChangeRecord,
  LaneState,
  LedgerEntry,
  RouteResult,
} from "../../control-plane/model.ts";
import type { ControlPlaneOp } from "../../domain/types.ts";
import type {
  ApplyResult,
  ControlPlane,
  LanesRead,
  ObserveResult,
  WriteContext,
} from "../../ports/control-plane.ts";
import { actionOf, laneMatches, weightsMatch } from "../../protocol/control-plane.ts";

/** One recorded call of the port. `at` is the double's clock (epoch ms). */
export type RecordedCall =
  | { method: "apply"; op: ControlPlaneOp; ctx: WriteContext; result: ApplyResult; at: number }
  | { method: "observe"; op: ControlPlaneOp; ctx: WriteContext; result: ObserveResult; at: number };

export interface MemoryControlPlaneOptions {
  /** Model that reads (`weights()`, `route()`) and `seed` default to; writes name theirs in the context. Default `default`. */
  model?: string;
  /** Clock, epoch ms. Default `Date.now`. */
  now?: () => number;
}

/** The in-memory control plane. `apply` and `observe` never throw. */
export class MemoryControlPlane implements ControlPlane {
  readonly core: ControlPlaneCore;
  readonly faults = new FaultPlan();
  readonly calls: RecordedCall[] = [];
  readonly model: string;
  private readonly now: () => number;

  constructor(options: MemoryControlPlaneOptions = {}) {
    this.model = options.model ?? DEFAULT_MODEL;
    this.now = options.now ?? Date.now;
    this.core = new ControlPlaneCore(new MemoryCpStore(), this.now);
  }

  async apply(op: ControlPlaneOp, ctx: WriteContext): Promise<ApplyResult> {
    const result = this.applyNow(op, ctx);
    this.calls.push(structuredClone({ method: "apply", op, ctx, result, at: this.now() }));
    return result;
  }

  async observe(op: ControlPlaneOp, ctx: WriteContext): Promise<ObserveResult> {
    const result = this.observeNow(op, ctx.model);
    this.calls.push(structuredClone({ method: "observe", op, ctx, result, at: this.now() }));
    return result;
  }

  private applyNow(op: ControlPlaneOp, ctx: WriteContext): ApplyResult {
    const action = actionOf(op, ctx.model);
    if (action === null) {
      // assert_traffic: a read; ok when the weights match, failed when they do not.
      const seen = this.observeNow(op, ctx.model);
      if (!seen.ok) return { outcome: "unknown", message: seen.message };
      return seen.matches
        ? { outcome: "ok", replayed: false }
        : {
            outcome: "failed",
            status: 409,
            message: `[control-plane] traffic of model ${ctx.model} is ${JSON.stringify(seen.observed)}, expected ${JSON.stringify((op as { weights: unknown }).weights)}`,
          };
    }
    const fault = this.faults.take("write", ctx.operation_key);
    if (fault?.mode === "error") {
      return {
        outcome: "unknown",
        message: "[control-plane] HTTP 500 (injected fault): nothing applied",
      };
    }
    if (fault?.mode === "hang") {
      return { outcome: "unknown", message: "[control-plane] request timed out (injected fault)" };
    }
    if (fault?.mode === "lie") return { outcome: "ok", replayed: false };
    try {
      const { replayed } = this.core.write(ctx, action);
      if (fault?.mode === "apply_then_hang") {
        return {
          outcome: "unknown",
          message: "[control-plane] request timed out (injected fault, applied)",
        };
      }
      return { outcome: "ok", replayed };
    } catch (err) {
      if (err instanceof CpError)
        return { outcome: "failed", status: err.status, message: err.message };
      return { outcome: "unknown", message: `[control-plane] ${(err as Error).message}` };
    }
  }

  private observeNow(op: ControlPlaneOp, model: string): ObserveResult {
    const fault = this.faults.take(
      "read",
      op.op === "set_traffic" || op.op === "assert_traffic"
        ? `/v1/models/${model}/traffic`
        : `/v1/lanes/${op.lane}`,
    );
    if (fault)
      return { ok: false, message: `[control-plane] read failed (injected fault: ${fault.mode})` };
    if (op.op === "set_traffic" || op.op === "assert_traffic") {
      const observed = this.weights(model);
      return { ok: true, matches: weightsMatch(observed, op.weights), observed };
    }
    const lane = this.lane(op.lane);
    return { ok: true, matches: laneMatches(op, lane), observed: lane ?? null };
  }

  /** Applications of `key` (history entries), 0 if never applied. */
  applications(key: string): number {
    return this.core.applicationCounts()[key] ?? 0;
  }

  /** Operation key -> number of applications. */
  applicationCounts(): Record<string, number> {
    return this.core.applicationCounts();
  }

  /** The port's listing: lanes of `model` (all when omitted); read faults match `/v1/lanes`. */
  async lanes(model?: string): Promise<LanesRead> {
    const fault = this.faults.take("read", "/v1/lanes");
    if (fault)
      return { ok: false, message: `[control-plane] read failed (injected fault: ${fault.mode})` };
    return { ok: true, lanes: structuredClone(this.core.lanes(model)) };
  }

  /** Lane id -> weight of a model's lanes ({} when none). */
  weights(model: string = this.model): Record<string, number> {
    const out: Record<string, number> = {};
    for (const lane of this.core.lanes(model)) out[lane.id] = lane.weight;
    return out;
  }

  /** A lane's state, or undefined when unknown. */
  lane(id: string): LaneState | undefined {
    return this.core.lanes().find((l) => l.id === id);
  }

  /** The deterministic router over the model's lanes. Throws `CpError` 404 if no lane serves it. */
  route(requests: number, model: string = this.model): RouteResult {
    return this.core.route(model, requests);
  }

  history(): ChangeRecord[] {
    return this.core.history();
  }

  ledger(): LedgerEntry[] {
    return this.core.ledger();
  }

  /** Starting state (no history, no ledger); lanes default to the double's model. */
  seed(lanes: (Partial<LaneState> & { id: string })[]): void {
    this.core.seed(lanes.map((l) => ({ model: this.model, ...l })));
  }
}
