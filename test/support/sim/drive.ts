/**
 * Small helpers to drive a release through `transition` in tests: event builders that take
 * identity from the release, and `step` that asserts the event was accepted.
 */
import { expect } from "vitest";
import { newRelease, transition } from "../../../engine/src/domain/transition.ts";
import type {
  Effect,
  Manifest,
  PreflightEvent,
  Release,
  ReleaseEvent,
  StepRun,
  TransitionResult,
} from "../../../engine/src/domain/types.ts";
import { expectedPayloadDigest } from "../../../engine/src/service/payload-digest.ts";
import { DIGEST, manifestOf, type StepSpec } from "../manifest-fixture.ts";

export const T0 = 1_800_000_000_000;

export type Ok = Extract<TransitionResult, { ok: true }>;
export type Refused = Extract<TransitionResult, { ok: false }>;

/** A pending release `r17` over `specs` (or a manifest). */
export function release(specs: StepSpec[] | Manifest, number = 17): Release {
  const manifest = Array.isArray(specs) ? manifestOf(specs) : specs;
  return newRelease(`r${number}`, number, manifest, DIGEST, T0);
}

/** Applies `event`, expects it accepted, returns the result. */
export function ok(r: Release, event: ReleaseEvent, now = T0): Ok {
  const res = transition(r, event, now);
  if (!res.ok) throw new Error(`expected ${event.type} to be accepted, refused: ${res.reason}`);
  return res;
}

/** Applies `event`, expects a refusal, returns it. */
export function refused(r: Release, event: ReleaseEvent, now = T0): Refused {
  const res = transition(r, event, now);
  if (res.ok) throw new Error(`expected ${event.type} to be refused, got changed=${res.changed}`);
  return res;
}

export function sr(r: Release, index: number, dir: "fwd" | "bwd" = "fwd"): StepRun {
  const found = r.step_runs.find((s) => s.step_index === index && s.direction === dir);
  if (!found) throw new Error(`no step run (${index}, ${dir}) in ${r.id}`);
  return found;
}

export const srId = (r: Release, index: number, dir: "fwd" | "bwd" = "fwd") => sr(r, index, dir).id;

export function preflightOf(
  r: Release,
  id: string,
  o: Partial<PreflightEvent> = {},
): PreflightEvent {
  const s = r.step_runs.find((x) => x.id === id);
  const step = s ? r.manifest.steps[s.step_index] : undefined;
  const action = s?.direction === "bwd" ? step?.backward : step?.forward;
  // The genuine payload's digest, and the engine's own (as the service computes it).
  const digest = s ? expectedPayloadDigest(r, s) : undefined;
  return {
    type: "preflight",
    step_run_id: id,
    release_id: r.id,
    generation: r.generation,
    manifest_digest: r.manifest_digest,
    dispatch: s?.dispatch ?? 1,
    run_id: "9001",
    run_attempt: 1,
    sha: "abc1234",
    tool: action?.kind === "runner" ? action.tool : "attach-queue-lane",
    payload_digest: digest ?? "0".repeat(64),
    ...(digest === undefined ? {} : { expected_payload_digest: digest }),
    ...o,
  };
}

export function callbackOf(
  id: string,
  overall: "pass" | "fail",
  o: { run_id?: string; run_attempt?: number; status?: string } = {},
): ReleaseEvent {
  return {
    type: "callback",
    step_run_id: id,
    run_id: o.run_id ?? "9001",
    run_attempt: o.run_attempt ?? 1,
    status: o.status ?? (overall === "pass" ? "succeeded" : "failed"),
    overall,
  };
}

/**
 * The reading of `r`'s verification in flight: every lane as desired (`pass`), or lane 1's
 * weight one point off (`fail`); targets not observed.
 */
export function verifiedEvent(r: Release, outcome: "pass" | "fail" = "pass"): ReleaseEvent {
  const v = r.verification;
  if (v?.state !== "verifying") throw new Error(`${r.id} is not verifying`);
  return {
    type: "verified",
    seq: v.seq,
    generation: v.generation,
    reading: {
      at: T0,
      by: "test reading",
      read_error: null,
      lanes: v.desired.map((l, i) => ({
        id: l.id,
        control_plane: {
          weight: outcome === "fail" && i === 0 ? l.weight + 1 : l.weight,
          excluded: l.excluded,
          capabilities: l.capabilities,
          advertised: l.advertised,
        },
        target: null,
        target_gap: "not observed in this test",
      })),
    },
  };
}

/**
 * An undo that has run to its end: asserts `r` is `compensating` and verifying with one
 * `verify` effect's worth of work left, and feeds it a reading that finds every lane as desired.
 */
export function verifyPasses(r: Release, now = T0): Release {
  expect(r.state).toBe("compensating");
  expect(r.cursor).toBe(-1);
  expect(r.verification?.state).toBe("verifying");
  return ok(r, verifiedEvent(r, "pass"), now).release;
}

/**
 * Drives the current step run (at the cursor, in the release's direction) to an outcome; a
 * release whose undo is done and is verifying gets its reading (`verifiedEvent`).
 */
export function finishCurrent(r: Release, outcome: "pass" | "fail", now = T0): Release {
  if (r.state === "compensating" && r.verification?.state === "verifying") {
    return ok(r, verifiedEvent(r, outcome), now).release;
  }
  const dir = r.state === "compensating" ? "bwd" : "fwd";
  const s = sr(r, r.cursor, dir);
  if (s.kind === "control_plane") {
    return ok(
      r,
      {
        type: "applied",
        step_run_id: s.id,
        outcome: outcome === "pass" ? "ok" : "failed",
        message: outcome === "pass" ? "applied" : "HTTP 409 stale generation",
      },
      now,
    ).release;
  }
  let cur = r;
  if (s.state === "dispatching")
    cur = ok(
      cur,
      { type: "dispatch_accepted", step_run_id: s.id, dispatch: s.dispatch },
      now,
    ).release;
  const runId = String(9000 + s.dispatch);
  cur = ok(cur, preflightOf(cur, s.id, { run_id: runId }), now).release;
  return ok(cur, callbackOf(s.id, outcome, { run_id: runId }), now).release;
}

/** Starts `r` and passes steps until the cursor reaches `index`. */
export function advanceTo(r: Release, index: number, now = T0): Release {
  let cur = r.state === "pending" ? ok(r, { type: "start" }, now).release : r;
  while (cur.state === "running" && cur.cursor < index) cur = finishCurrent(cur, "pass", now);
  expect(cur.cursor).toBe(index);
  return cur;
}

export const effectTypes = (effects: Effect[]) =>
  effects.map((e) =>
    e.type === "control_plane"
      ? `cp:${e.mode}:${e.step_run_id}`
      : e.type === "verify"
        ? `verify:${e.seq}`
        : `${e.type}:${e.step_run_id}`,
  );

/** Deep-freezes a value so that any mutation throws in strict mode. */
export function deepFreeze<T>(v: T): T {
  if (v && typeof v === "object" && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}
