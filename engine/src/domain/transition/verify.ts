/**
 * Recovery verification in the release (docs/lifecycle.md "Recovery verification"): when an
 * undo has run down to step 1 the release stays `compensating` and reads its lanes once (a
 * `verify` effect: the control plane's lanes, and each lane a runner step touched at its
 * machine); the reading comes back as `verified` and is judged here against the observed
 * baseline (domain/verification.ts). Passed: `rolled_back` (a recoverable release then waits for
 * its restore action). A difference: `needs_operator`, naming each lane and field, with
 * `baton verify` (read again once fixed) and `abandon` as its exits. `baton verify` of a
 * `succeeded` release compares with the manifest's declared end state, and of a `rolled_back`
 * one with the baseline; a closed release's state never changes, the result is recorded.
 */
import { closedReleaseAccepts } from "../lifecycle-states.ts";
import type { Release, ReleaseEvent } from "../types.ts";
import { suggestedCommand } from "../verbs.ts";
import {
  desiredAfterSuccess,
  desiredAfterUndo,
  judgeVerification,
  type RecoveryVerification,
  VERIFY_TRIES_MAX,
} from "../verification.ts";
import type { Draft, Refusal } from "./draft.ts";
import { guards } from "./guards.ts";
import { backoffMs } from "./limits.ts";
import { awaitsRestore, holdForRestore } from "./recovery.ts";
import { beginsAutomaticRestore } from "./restore.ts";

type Ev<T extends ReleaseEvent["type"]> = Extract<ReleaseEvent, { type: T }>;

/** A verification of `r` is reading now. */
export function verifying(r: Release): boolean {
  return r.verification?.state === "verifying";
}

/**
 * An undo whose verification failed: the release waits `needs_operator` with nothing left to
 * undo (its exits: `verify` again, `abandon`).
 */
export function waitsOnVerification(r: Release): boolean {
  return r.state === "needs_operator" && r.cursor < 0 && r.verification?.state === "failed";
}

/**
 * Starts a verification of `r` (state unchanged): a new `verification` (next seq, this
 * generation) and one `verify` effect. `trigger` and `actor` say who asked; `reason` why (an
 * operator's optional reason, kept in the history).
 */
export function beginVerification(
  d: Draft,
  trigger: RecoveryVerification["trigger"],
  actor: string,
  reason = "",
): void {
  const r = d.release;
  const fromManifest = r.state === "succeeded";
  const desired = fromManifest ? desiredAfterSuccess(r) : desiredAfterUndo(r);
  const seq = (r.verification?.seq ?? 0) + 1;
  const undoReason = r.verification ? r.verification.undo_reason : r.reason;
  r.verification = {
    seq,
    generation: r.generation,
    trigger,
    requested_by: actor,
    requested_at: d.now,
    desired_from: fromManifest ? "manifest" : "baseline",
    state: "verifying",
    tries: 1,
    desired,
    at: null,
    by: null,
    lanes: [],
    gaps: [],
    summary: null,
    undo_reason: undoReason,
  };
  d.emit({
    type: "verify",
    seq,
    generation: r.generation,
    lanes: desired.map((l) => ({ id: l.id, image: l.image, target: l.target })),
    not_before: null,
  });
  const asked = desired.filter((l) => l.target).map((l) => l.id);
  d.accept(
    `[engine] release ${r.id} verifies ${fromManifest ? "its lanes against the manifest's end state" : "its recovery against the observed baseline"} (verification ${seq}, asked by ${actor}${reason.trim() ? `: ${reason.trim()}` : ""}): reads every lane's weight, excluded marker and capabilities from the control plane${asked.length > 0 ? `, and the image and health of ${asked.join(", ")} at their machines` : ""}`,
    null,
    {
      actor,
      ...(reason.trim() ? { reason: reason.trim() } : {}),
      verification: { seq, trigger, desired_from: fromManifest ? "manifest" : "baseline" },
    },
  );
}

/** After the undo (and its verification): rolled_back, or the restore wait of a recoverable release. */
function finishUndo(d: Draft): void {
  const r = d.release;
  if (awaitsRestore(r)) {
    // A recipe with a restore tool: the engine runs it (once); otherwise an operator does.
    if (beginsAutomaticRestore(d)) return;
    holdForRestore(d);
    return;
  }
  r.state = "rolled_back";
  r.reason = r.verification?.undo_reason ?? r.reason;
  d.accept(
    `[engine] release ${r.id} rolled back: every step that may have taken effect was undone and verification ${r.verification?.seq ?? "?"} found every lane as it was at start`,
  );
}

/**
 * `verify` by an operator: a `needs_operator` release whose verification failed (the state
 * goes back to `compensating` while it reads), or a `succeeded` / `rolled_back` release (its
 * state stays). Refused while a verification reads, and in every other state, naming why.
 */
export function verifyRequested(d: Draft, e: Ev<"verify">): Refusal | undefined {
  const r = d.release;
  if (verifying(r)) {
    return {
      status: 409,
      code: "conflict",
      reason: `[engine] release ${r.id} is already verifying (verification ${r.verification?.seq}); its result comes by itself: baton watch ${r.id}`,
    };
  }
  if (waitsOnVerification(r)) {
    r.state = "compensating";
    beginVerification(d, "operator", e.actor, e.reason);
    return undefined;
  }
  if (r.state === "succeeded" || r.state === "rolled_back") {
    beginVerification(d, "operator", e.actor, e.reason);
    return undefined;
  }
  const why =
    r.state === "aborted"
      ? `it was aborted with nothing applied (nothing to verify); ${closedReleaseAccepts(r.id, r.state)}`
      : r.state === "abandoned"
        ? `it was abandoned: the operator confirmed what each lane runs; ${closedReleaseAccepts(r.id, r.state)}`
        : r.state === "needs_operator"
          ? "it waits on an undo step, not on a verification: retry or resolve that step run (baton status shows it); the undo is verified when it ends"
          : r.state === "compensating"
            ? "it is undoing; its recovery is verified by itself when the undo ends"
            : "verify checks a succeeded release, or an undo once it ended; this release is still under way";
  return {
    status: 409,
    code: "conflict",
    reason: `[engine] release ${r.id} is ${r.state}; ${why}`,
  };
}

/**
 * The reading of a `verify` effect. Another seq or generation, or no verification reading:
 * recorded, nothing changes (rule 1). A read error: read again with backoff, at most
 * `VERIFY_TRIES_MAX` reads, then failed. Otherwise judged: the verdicts are kept on the
 * release; an undo's verification ends the release (`rolled_back`, or `needs_operator`).
 */
export function verified(d: Draft, e: Ev<"verified">): Refusal | undefined {
  const r = d.release;
  const v = r.verification;
  if (v?.state !== "verifying" || v.seq !== e.seq || v.generation !== e.generation) {
    d.ignore(
      `[engine] verification reading ${e.seq} (generation ${e.generation}) ignored: release ${r.id} ${v ? `is at verification ${v.seq} (generation ${v.generation}, ${v.state})` : "has no verification"}`,
    );
    return undefined;
  }
  const reading = e.reading;
  if (reading.read_error !== null && v.tries < VERIFY_TRIES_MAX) {
    v.tries += 1;
    d.emit({
      type: "verify",
      seq: v.seq,
      generation: v.generation,
      lanes: v.desired.map((l) => ({ id: l.id, image: l.image, target: l.target })),
      not_before: d.now + backoffMs(v.tries - 1),
    });
    d.accept(
      `[engine] verification ${v.seq} of release ${r.id} could not read the control plane (${reading.read_error}); reading again (try ${v.tries} of ${VERIFY_TRIES_MAX})`,
    );
    return undefined;
  }
  const judged =
    reading.read_error !== null
      ? {
          passed: false,
          lanes: [],
          gaps: [],
          summary: `the control plane could not be read in ${v.tries} tries: ${reading.read_error}`,
        }
      : judgeVerification(v.desired, reading);
  v.state = judged.passed ? "passed" : "failed";
  v.at = reading.at;
  v.by = reading.by;
  v.lanes = judged.lanes;
  v.gaps = judged.gaps;
  v.summary = judged.summary;
  const data = {
    verification: {
      seq: v.seq,
      passed: judged.passed,
      summary: judged.summary,
      gaps: judged.gaps,
    },
  };
  const gaps = judged.gaps.length > 0 ? ` (not observed: ${judged.gaps.join("; ")})` : "";
  if (guards.isTerminal(r)) {
    d.accept(
      `[engine] verification ${v.seq} of ${r.state} release ${r.id} ${judged.passed ? "passed" : "found differences"}: ${judged.summary}${gaps}`,
      null,
      data,
    );
    return undefined;
  }
  if (judged.passed) {
    d.accept(
      `[engine] verification ${v.seq} of release ${r.id} passed: ${judged.summary}${gaps}`,
      null,
      data,
    );
    finishUndo(d);
    return undefined;
  }
  r.state = "needs_operator";
  r.reason = `the undo ran, but verification ${v.seq} found the lanes not as they were at start: ${judged.summary}; fix the lane by hand, then verify again (${suggestedCommand("verify", { target: r.id })}), or abandon the release confirming what each lane runs`;
  d.accept(`[engine] release ${r.id} needs an operator: ${r.reason}`, null, data);
  return undefined;
}
