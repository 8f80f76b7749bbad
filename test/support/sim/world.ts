/**
 * A pure, deterministic simulator of everything around the transition function: the store
 * (release + outbox), the reconciler performing effects, GitHub (which may deliver a dispatch
 * twice or not at all), runners (preflight, tool, callback, re-runs from the Actions UI),
 * operators, deadlines and engine crashes. Property tests drive it with generated commands
 * and check invariants (test/property/transition.property.test.ts).
 *
 * A crash loses only what is not committed: outcomes performed but not yet fed back, and
 * requests being handled. The restarted engine reloads the stored release and its pending
 * outbox (through a JSON round-trip, as a database would) and performs those effects again.
 */

import { guards } from "../../../engine/src/domain/transition/guards.ts";
import { transition as pureTransition } from "../../../engine/src/domain/transition.ts";
import type {
  Effect,
  Release,
  ReleaseEvent,
  TransitionResult,
} from "../../../engine/src/domain/types.ts";
import { payloadDigest } from "../../../engine/src/protocol/payload-digest.ts";
import { withExpectedPayloadDigest } from "../../../engine/src/service/payload-digest.ts";
import { type Application, KeyedReceiver, SimControlPlane } from "./receivers.ts";

/** The transition as the service runs it: preflights carry the engine's payload digest. */
const transition = withExpectedPayloadDigest(pureTransition);

export interface Command {
  /** What happens next (see `World.apply`). */
  k: number;
  a: number;
  b: number;
}

interface Row {
  id: number;
  effect: Effect;
  done: boolean;
}

interface Run {
  run_id: string;
  run_attempt: number;
  effect: Extract<Effect, { type: "dispatch" }>;
  phase: "preflight" | "execute" | "callback" | "done";
  attempt: number | null;
  overall: "pass" | "fail" | null;
}

interface Ghost {
  row: Extract<Effect, { type: "control_plane" }>;
}

const INTERNAL = new Set([
  "dispatch_accepted",
  "dispatch_failed",
  "applied",
  "observed",
  "deadline",
  "verified",
]);

export class World {
  release: Release;
  outbox: Row[] = [];
  /** Outcomes performed but not yet committed (lost on crash). */
  volatile: { rowId: number; event: ReleaseEvent }[] = [];
  runs: Run[] = [];
  sentCallbacks: ReleaseEvent[] = [];
  ghosts: Ghost[] = [];
  readonly log: Application[] = [];
  readonly cp = new SimControlPlane(this.log);
  readonly target = new KeyedReceiver("target", this.log);
  /** (step run, attempt) -> the (run id / run attempt)s that executed the tool under it. */
  readonly executions = new Map<string, Set<string>>();
  readonly violations: string[] = [];
  /** Set once the release left the forward path (compensating, needs_operator, terminal). */
  leftForward = false;
  aborted = false;
  refusedBody = 0;
  now: number;
  events = 0;
  private nextRow = 1;
  private nextRun = 5000;

  constructor(release: Release, now: number) {
    this.now = now;
    this.cp.weights = Object.fromEntries(
      release.manifest.lanes.map((l) => [l.id, l.baseline_weight]),
    );
    // The control plane at start is what a complete undo writes back: each field as the
    // backward action of the first step that touches it leaves it (the fixtures' tables are
    // not derived from a start state, so this makes "undone" and "as at start" the same).
    const steps = release.manifest.steps;
    for (let i = steps.length - 1; i >= 0; i--) {
      const b = steps[i]?.backward;
      if (b?.kind !== "control_plane") continue;
      const q = b.request;
      if (q.op === "set_traffic") this.cp.weights = { ...q.weights };
      else if (q.op === "set_marker") {
        if (q.present) this.cp.excluded.add(q.lane);
        else this.cp.excluded.delete(q.lane);
      } else if (q.op === "set_capabilities") {
        if (q.advertised) this.cp.advertised.add(q.lane);
        else this.cp.advertised.delete(q.lane);
        this.cp.capabilities.set(q.lane, [...new Set(q.capabilities)].sort());
      }
    }
    // What the engine observed of that control plane at start (its observed baseline).
    this.release = release.baseline
      ? release
      : {
          ...release,
          baseline: {
            read_at: now,
            lanes: release.manifest.lanes.map((l) => ({
              id: l.id,
              weight: this.cp.weights[l.id] ?? 0,
              excluded: this.cp.excluded.has(l.id),
              capabilities: this.cp.capabilities.get(l.id) ?? [],
              advertised: this.cp.advertised.has(l.id),
              image: null,
            })),
            recipe_manifest_digest: release.manifest_digest,
          },
        };
  }

  // ------------------------------------------------------------------ the engine side

  /** Transition + commit, with the per-step invariants. */
  commit(event: ReleaseEvent, rowId?: number): TransitionResult {
    this.events += 1;
    this.now += 1_000;
    const before = this.release;
    let res: TransitionResult;
    try {
      res = transition(before, event, this.now);
    } catch (err) {
      this.violations.push(`transition threw on ${event.type}: ${(err as Error).message}`);
      throw err;
    }
    const msgs = res.history.map((h) => h.message);
    if (msgs.some((m) => !m.startsWith("[engine] ")))
      this.violations.push(`history without [engine]: ${msgs.join(" | ")}`);
    if (!res.ok) {
      if (INTERNAL.has(event.type))
        this.violations.push(`engine outcome ${event.type} refused: ${res.reason}`);
      if (res.history.length !== 1)
        this.violations.push("a refusal must carry exactly one history entry");
    } else if (res.changed) {
      if (guards.isTerminal(before))
        this.violations.push(`terminal ${before.state} changed on ${event.type}`);
      if (res.release.resource_version !== before.resource_version + 1)
        this.violations.push("resource_version must move by 1");
      const fwd = res.effects.flatMap((e) =>
        e.type !== "deadline" && e.type !== "verify" && e.step_run_id.endsWith("_f") ? [e] : [],
      );
      if (this.leftForward && fwd.length > 0)
        this.violations.push(
          `forward effect ${fwd[0]!.step_run_id} after the release left running (${event.type})`,
        );
      this.release = res.release;
      for (const effect of res.effects)
        this.outbox.push({ id: this.nextRow++, effect, done: false });
      const s = this.release.state;
      if (s === "compensating" || s === "needs_operator" || guards.isTerminal(this.release))
        this.leftForward = true;
      if (event.type === "abort" && s !== "running") this.aborted = true;
    } else if (res.release !== before) {
      this.violations.push("an unchanged result must return the same release object");
    }
    if (rowId !== undefined) {
      const row = this.outbox.find((r) => r.id === rowId);
      if (row) row.done = true;
    }
    return res;
  }

  pending(kind: "effect" | "deadline"): Row[] {
    return this.outbox.filter(
      (r) => !r.done && (kind === "deadline") === (r.effect.type === "deadline"),
    );
  }

  /** Performs an outbox row at its receiver; the outcome is committed now or later. */
  perform(row: Row, fault: number, defer: boolean): void {
    const e = row.effect;
    let outcome: ReleaseEvent | null = null;
    if (e.type === "dispatch") {
      const f = fault % 10;
      const deliveries = f <= 4 ? 1 : f === 5 ? 2 : f === 8 ? 1 : 0;
      for (let i = 0; i < deliveries; i++) this.deliver(e);
      if (f <= 6)
        outcome = { type: "dispatch_accepted", step_run_id: e.step_run_id, dispatch: e.dispatch };
      else
        outcome = {
          type: "dispatch_failed",
          step_run_id: e.step_run_id,
          dispatch: e.dispatch,
          retryable: f !== 9,
          message: f === 9 ? "HTTP 422 Unprocessable Entity" : "HTTP 502 Bad Gateway",
        };
    } else if (e.type === "control_plane" && e.mode === "apply") {
      const f = fault % 8;
      if (f === 5) {
        this.ghosts.push({ row: e }); // the request may still land later
        outcome = {
          type: "applied",
          step_run_id: e.step_run_id,
          outcome: "unknown",
          message: "timeout before an answer",
        };
      } else {
        const res = this.cp.apply(e.request, e.operation_key, e.generation);
        if (res === "refused_body") this.refusedBody += 1;
        const okay = res === "applied" || res === "replayed";
        outcome =
          f === 6
            ? {
                type: "applied",
                step_run_id: e.step_run_id,
                outcome: "unknown",
                message: "timeout after sending",
              }
            : {
                type: "applied",
                step_run_id: e.step_run_id,
                outcome: okay ? "ok" : "failed",
                message: okay ? res : `HTTP 409 ${res}`,
              };
        if (f === 7) outcome = null; // crash after the effect, before its outcome
      }
    } else if (e.type === "control_plane") {
      const unreadable = fault % 5 === 4;
      outcome = {
        type: "observed",
        step_run_id: e.step_run_id,
        matches: unreadable ? null : this.cp.matches(e.request),
        message: unreadable ? "HTTP 500" : "read",
      };
    } else if (e.type === "verify") {
      // The reading comes from the simulated control plane's lanes (what the receivers hold);
      // the simulator keeps no image per lane, so the targets are not observed.
      const unreadable = fault % 7 === 6;
      outcome = {
        type: "verified",
        seq: e.seq,
        generation: e.generation,
        reading: {
          at: this.now,
          by: "simulated control plane",
          read_error: unreadable ? "HTTP 500" : null,
          lanes: this.release.manifest.lanes.map((l) => ({
            id: l.id,
            control_plane: {
              weight: this.cp.weights[l.id] ?? 0,
              excluded: this.cp.excluded.has(l.id),
              capabilities: this.cp.capabilities.get(l.id) ?? [],
              advertised: this.cp.advertised.has(l.id),
            },
            target: null,
            target_gap: "the simulator keeps no image per lane",
          })),
        },
      };
    } else if (e.type === "deadline") {
      outcome = {
        type: "deadline",
        step_run_id: e.step_run_id,
        kind: e.kind,
        dispatch: e.dispatch,
        attempt: e.attempt,
      };
    }
    if (!outcome) return;
    if (defer) this.volatile.push({ rowId: row.id, event: outcome });
    else this.commit(outcome, row.id);
  }

  crash(): void {
    this.volatile = [];
    // Restart: the engine reloads what the store holds.
    this.release = JSON.parse(JSON.stringify(this.release)) as Release;
    this.outbox = JSON.parse(JSON.stringify(this.outbox)) as Row[];
  }

  // ------------------------------------------------------------------ GitHub and runners

  private deliver(e: Extract<Effect, { type: "dispatch" }>): void {
    this.runs.push({
      run_id: String(this.nextRun++),
      run_attempt: 1,
      effect: e,
      phase: "preflight",
      attempt: null,
      overall: null,
    });
  }

  /** One step of a workflow run. `v` picks the variant (lost request, tool result, death). */
  stepRun(run: Run, v: number): void {
    const e = run.effect;
    if (run.phase === "preflight") {
      if (v % 7 === 6) return; // request lost: engine crashed before commit; the action retries
      const step = this.release.manifest.steps[Number(e.step_run_id.split("_")[2])];
      const action = e.step_run_id.endsWith("_b") ? step?.backward : step?.forward;
      const res = this.commit({
        type: "preflight",
        step_run_id: e.step_run_id,
        release_id: this.release.id,
        generation: e.generation,
        manifest_digest: this.release.manifest_digest,
        dispatch: e.dispatch,
        run_id: run.run_id,
        run_attempt: run.run_attempt,
        sha: this.release.manifest.tool_revision ?? "abc1234",
        tool: action?.kind === "runner" ? action.tool : e.tool,
        // What the runner received: the dispatch effect's work.
        payload_digest: payloadDigest({
          tool: e.tool,
          args: e.args,
          operation_key: e.operation_key,
        }),
      });
      if (res.ok && res.reply.proceed === true) {
        if (this.leftForward && e.step_run_id.endsWith("_f"))
          this.violations.push(
            `forward preflight ${e.step_run_id} accepted after the release left running`,
          );
        run.attempt = Number(res.reply.attempt);
        run.phase = "execute";
        const key = `${e.step_run_id}#${run.attempt}`;
        const who = this.executions.get(key) ?? new Set<string>();
        who.add(`${run.run_id}/${run.run_attempt}`);
        this.executions.set(key, who);
      } else run.phase = "done";
      return;
    }
    if (run.phase === "execute") {
      if (v % 9 === 8) {
        run.phase = "done"; // the runner died: no callback ever
        return;
      }
      const r = v % 4;
      let applied: string = "not_run";
      if (r !== 2)
        applied = this.target.receive(
          e.operation_key,
          { tool: e.tool, args: e.args },
          e.generation,
        );
      if (applied === "refused_body") this.refusedBody += 1;
      const good = applied === "applied" || applied === "replayed";
      run.overall = r <= 1 && good ? "pass" : "fail";
      run.phase = "callback";
      return;
    }
    if (run.phase === "callback") {
      if (v % 5 === 4) return; // request lost; the action retries
      const cb: ReleaseEvent = {
        type: "callback",
        step_run_id: e.step_run_id,
        run_id: run.run_id,
        run_attempt: run.run_attempt,
        status: run.overall === "pass" ? "succeeded" : "failed",
        overall: run.overall ?? "fail",
      };
      this.sentCallbacks.push(cb);
      this.commit(cb);
      run.phase = "done";
    }
  }

  /** A maintainer re-runs a workflow run from the Actions UI (same run id, next attempt). */
  rerun(run: Run): void {
    const latest = Math.max(
      ...this.runs.filter((r) => r.run_id === run.run_id).map((r) => r.run_attempt),
    );
    this.runs.push({
      ...run,
      run_attempt: latest + 1,
      phase: "preflight",
      attempt: null,
      overall: null,
    });
  }

  // ------------------------------------------------------------------ commands

  /** Applies one generated command. */
  apply(c: Command): void {
    const pick = <T>(xs: T[]): T | undefined => (xs.length ? xs[c.a % xs.length] : undefined);
    const k = c.k % 20;
    if (k <= 4 || k >= 18) {
      // The reconciler performs a due effect; its outcome is committed now or later.
      const row = pick(this.pending("effect"));
      if (row) this.perform(row, c.b % 16, Math.floor(c.b / 16) % 3 === 0);
    } else if (k <= 6) {
      const o = pick(this.volatile);
      if (o) {
        this.volatile = this.volatile.filter((x) => x !== o);
        this.commit(o.event, o.rowId);
      }
    } else if (k <= 8) {
      // A deadline fires (possibly racing a runner that is about to report).
      const row = pick(this.pending("deadline"));
      if (row) this.perform(row, 0, false);
    } else if (k <= 12) {
      const run = pick(this.runs.filter((r) => r.phase !== "done"));
      if (run) this.stepRun(run, c.b);
    } else if (k === 13) {
      // A duplicate, late or older-attempt callback.
      const cb = pick(this.sentCallbacks);
      if (cb) this.commit(cb);
    } else if (k === 14) {
      const run = pick(this.runs);
      if (run) this.rerun(run);
    } else if (k === 15) {
      // A control-plane request that timed out lands now.
      const g = pick(this.ghosts);
      if (g) {
        this.ghosts = this.ghosts.filter((x) => x !== g);
        const res = this.cp.apply(g.row.request, g.row.operation_key, g.row.generation);
        if (res === "refused_body") this.refusedBody += 1;
      }
    } else if (k === 16) {
      this.operator(c);
    } else {
      this.crash();
    }
  }

  operator(c: Command): void {
    const r = this.release;
    const which = c.b % 4;
    if (which === 0) this.commit({ type: "abort", actor: "sim-operator", reason: "generated" });
    else if (which === 1) this.commit({ type: "resume", actor: "sim-operator" });
    else {
      const current = r.step_runs.find(
        (s) =>
          s.step_index === r.cursor &&
          (s.direction === "bwd") === (r.state === "compensating" || r.state === "needs_operator"),
      );
      const target = which === 2 ? current : r.step_runs[c.a % Math.max(1, r.step_runs.length)];
      if (target) this.commit({ type: "retry", actor: "sim-operator", step_run_id: target.id });
    }
  }

  /**
   * Runs without faults until the release is terminal, resolving operator holds (a paused
   * release is aborted, a needs_operator one has its step run retried). Returns the number of
   * simulator steps it took, or -1 when it made no progress.
   */
  drain(maxSteps: number): number {
    for (let i = 0; i < maxSteps; i++) {
      const r = this.release;
      if (
        guards.isTerminal(r) &&
        this.pending("effect").length === 0 &&
        this.runs.every((x) => x.phase === "done")
      )
        return i;
      const vol = this.volatile.shift();
      if (vol) {
        this.commit(vol.event, vol.rowId);
        continue;
      }
      const row = this.pending("effect")[0];
      if (row) {
        this.perform(row, 0, false);
        continue;
      }
      const run = this.runs.find((x) => x.phase !== "done");
      if (run) {
        this.stepRun(run, 0);
        continue;
      }
      const deadline = this.pending("deadline")[0];
      if (deadline) {
        this.perform(deadline, 0, false);
        continue;
      }
      if (guards.isTerminal(r)) return i;
      if (r.state === "paused")
        this.commit({ type: "abort", actor: "drain", reason: "end of run" });
      else if (r.state === "needs_operator" && r.verification?.state === "failed") {
        this.commit({ type: "verify", actor: "drain" });
      } else if (r.state === "needs_operator") {
        const s = r.step_runs.find((x) => x.step_index === r.cursor && x.direction === "bwd");
        if (!s) return -1;
        this.commit({ type: "retry", actor: "drain", step_run_id: s.id });
      } else return -1;
    }
    return -1;
  }
}
