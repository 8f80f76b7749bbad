/**
 * In-memory Dispatcher double for tests and benchmarks. Records every dispatch, counts them
 * per operation key, and checks each payload against GitHub's documented limits for
 * `repository_dispatch` (10 top-level keys, 64 KB), answering 422 like GitHub would.
 * It can be told to answer 4xx/5xx or to throw for the next N calls.
 */
import type { Dispatcher, DispatchResult } from "../../ports/dispatcher.ts";
import { type DispatchPayload, GITHUB_DISPATCH_LIMITS } from "../../protocol/messages.ts";

/** What the double answers for a call: GitHub's 204, an HTTP error, or a thrown error. */
export type DispatchBehaviour =
  | { kind: "accept" }
  | { kind: "status"; status: number; message: string }
  | { kind: "throw"; message: string };

export class MemoryDispatcher implements Dispatcher {
  /** Every dispatch received, in order (including refused ones). */
  readonly calls: DispatchPayload[] = [];
  /** Dispatches answered 204, in order. */
  readonly accepted: DispatchPayload[] = [];
  /** Accepted dispatches per operation key. */
  readonly acceptedByKey = new Map<string, number>();
  private queue: DispatchBehaviour[] = [];
  private listeners: ((p: DispatchPayload) => void)[] = [];

  /** Answers the next `times` calls with `b` (then back to accepting). */
  failNext(b: Exclude<DispatchBehaviour, { kind: "accept" }>, times = 1): void {
    for (let i = 0; i < times; i++) this.queue.push(b);
  }

  /** Calls `fn` with each accepted payload (e.g. a simulated runner). */
  onAccepted(fn: (p: DispatchPayload) => void): void {
    this.listeners.push(fn);
  }

  /** Accepted dispatches of one step run (each re-send counts). */
  acceptedFor(stepRunId: string): DispatchPayload[] {
    return this.accepted.filter((c) => c.step_run_id === stepRunId);
  }

  async dispatch(payload: DispatchPayload): Promise<DispatchResult> {
    this.calls.push(payload);
    const keys = Object.keys(payload).length;
    const bytes = Buffer.byteLength(JSON.stringify(payload), "utf8");
    if (keys > GITHUB_DISPATCH_LIMITS.client_payload_max_top_level_keys) {
      return {
        ok: false,
        retryable: false,
        status: 422,
        message: `client_payload: No more than 10 properties are allowed; ${keys} were supplied.`,
      };
    }
    if (bytes >= GITHUB_DISPATCH_LIMITS.client_payload_max_bytes) {
      return { ok: false, retryable: false, status: 422, message: "client_payload is too large" };
    }
    const b = this.queue.shift() ?? { kind: "accept" };
    if (b.kind === "throw") throw new Error(b.message);
    if (b.kind === "status") {
      return { ok: false, retryable: b.status >= 500, status: b.status, message: b.message };
    }
    const key = payload.release.operation_key;
    this.acceptedByKey.set(key, (this.acceptedByKey.get(key) ?? 0) + 1);
    this.accepted.push(payload);
    for (const fn of this.listeners) fn(payload);
    return { ok: true };
  }
}
