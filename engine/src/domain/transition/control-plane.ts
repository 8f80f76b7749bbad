/**
 * Control-plane step runs: outcomes of keyed, absolute writes (with the read-back made right
 * after every 2xx) and of reads after `unknown` (docs/state-machine.md "Control-plane steps",
 * rules 4, 5).
 */
import type { ReleaseEvent, StepRun } from "../types.ts";
import { type Draft, describe } from "./draft.ts";
import { guards } from "./guards.ts";
import { backoffMs, CONTROL_PLANE_TRIES_MAX } from "./limits.ts";
import { emitControlPlane } from "./send.ts";
import { settled } from "./settle.ts";

type Ev<T extends ReleaseEvent["type"]> = Extract<ReleaseEvent, { type: T }>;

/** The outcome of an apply. `unknown` is resolved by reading the target, never assumed. */
export function applied(d: Draft, sr: StepRun, e: Ev<"applied">): void {
  const r = d.release;
  if (sr.state !== "applying") {
    d.ignore(
      `[engine] outcome ${e.outcome} for ${sr.id} ignored: the step run is ${sr.state}, no apply is outstanding`,
      sr.id,
    );
    return;
  }
  // Answered 2xx: the control plane has recorded the key, so no earlier copy can land later.
  if (e.outcome === "ok") delete sr.apply_unanswered;
  if (e.outcome === "ok" && e.read_back?.matches === false) {
    // Answered 2xx, not applied: a failed step run (forward: the failure handling compensates;
    // backward: retried within its budget, then needs_operator with this message).
    sr.state = "failed";
    sr.last_error = `the control plane answered 2xx but the read-back shows ${e.read_back.message}`;
    d.accept(`[engine] ${describe(r, sr)} failed: ${sr.last_error}`, sr.id);
    settled(d, sr);
    return;
  }
  if (e.outcome === "ok" && e.read_back?.matches === null && guards.isCurrent(r, sr)) {
    sr.state = "unknown";
    sr.last_error = `answered 2xx but could not be read back: ${e.read_back.message}`;
    emitControlPlane(d, sr, "read", null);
    d.accept(
      `[engine] ${describe(r, sr)} ${sr.last_error}; reading the control plane's actual state`,
      sr.id,
    );
    return;
  }
  if (e.outcome === "ok") {
    sr.state = "succeeded";
    sr.last_error = null;
    const seen = e.read_back ? `; read back: ${e.read_back.message}` : "";
    d.accept(`[engine] ${describe(r, sr)} applied (${sr.operation_key})${seen}`, sr.id);
    settled(d, sr);
    return;
  }
  if (e.outcome === "failed") {
    sr.state = "failed";
    sr.last_error = e.message;
    d.accept(`[engine] ${describe(r, sr)} refused by the control plane: ${e.message}`, sr.id);
    settled(d, sr);
    return;
  }
  sr.state = "unknown";
  sr.last_error = e.message;
  sr.apply_unanswered = true;
  if (guards.isCurrent(r, sr)) {
    emitControlPlane(d, sr, "read", null);
    d.accept(
      `[engine] ${describe(r, sr)} outcome unknown (${e.message}); reading the control plane's actual state`,
      sr.id,
    );
    return;
  }
  // A forward write in flight when compensation began: its backward write is absolute and
  // carries a newer generation, so there is nothing to observe first.
  d.accept(
    `[engine] ${describe(r, sr)} outcome unknown (${e.message}); compensation will write the earlier state`,
    sr.id,
  );
  settled(d, sr);
}

/** The control plane's actual state, read after `unknown`. */
export function observed(d: Draft, sr: StepRun, e: Ev<"observed">): void {
  const r = d.release;
  if (sr.state !== "unknown" || !guards.isCurrent(r, sr)) {
    d.ignore(
      `[engine] observation of ${sr.id} ignored: the step run is ${sr.state} and release ${r.id} is ${r.state}`,
      sr.id,
    );
    return;
  }
  if (e.matches === true && sr.apply_unanswered === true) {
    // The target state is in force, but a request of ours that timed out may still land
    // later, after the next step's write, and undo it (during compensation all backward
    // writes carry the same generation, so the receiver's fence cannot order them). Re-send
    // the identical keyed write: once it is answered 2xx the control plane has recorded the
    // key, and the late request can only be a replay (rule 5).
    if (sr.tries >= CONTROL_PLANE_TRIES_MAX) {
      sr.state = "failed";
      sr.last_error = `at its target state, but no write of ${sr.operation_key} was answered in ${sr.tries} tries; a timed-out request may still land later`;
      d.accept(`[engine] ${describe(r, sr)} failed: ${sr.last_error}`, sr.id);
      settled(d, sr);
      return;
    }
    sr.tries += 1;
    const wait = backoffMs(sr.tries - 1);
    sr.state = "applying";
    emitControlPlane(d, sr, "apply", d.now + wait);
    d.accept(
      `[engine] ${describe(r, sr)} observed at its target state, but its timed-out write may still land; sending the same keyed write again in ${wait} ms so a late copy is only a replay (try ${sr.tries} of ${CONTROL_PLANE_TRIES_MAX})`,
      sr.id,
    );
    return;
  }
  if (e.matches === true) {
    sr.state = "succeeded";
    sr.last_error = null;
    d.accept(`[engine] ${describe(r, sr)} observed at its target state: succeeded`, sr.id);
    settled(d, sr);
    return;
  }
  if (sr.tries >= CONTROL_PLANE_TRIES_MAX) {
    sr.state = "failed";
    sr.last_error = `not at its target state after ${sr.tries} tries: ${e.message}`;
    d.accept(`[engine] ${describe(r, sr)} failed: ${sr.last_error}`, sr.id);
    settled(d, sr);
    return;
  }
  sr.tries += 1;
  const wait = backoffMs(sr.tries - 1);
  if (e.matches === false) {
    // Re-send the identical keyed, absolute write (rule 5): never a relative change.
    sr.state = "applying";
    emitControlPlane(d, sr, "apply", d.now + wait);
    d.accept(
      `[engine] ${describe(r, sr)} not at its target state (${e.message}); sending the same keyed write again in ${wait} ms (try ${sr.tries} of ${CONTROL_PLANE_TRIES_MAX})`,
      sr.id,
    );
  } else {
    emitControlPlane(d, sr, "read", d.now + wait);
    d.accept(
      `[engine] ${describe(r, sr)} could not be read (${e.message}); reading again in ${wait} ms (try ${sr.tries} of ${CONTROL_PLANE_TRIES_MAX})`,
      sr.id,
    );
  }
}
