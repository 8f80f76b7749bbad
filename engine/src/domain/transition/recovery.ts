/**
 * Recovery classes in the release (docs/lifecycle.md "Recovery classes"): a `roll_forward_only`
 * release whose `unsafe_after` step may have taken effect is past its roll-forward point. From
 * there the engine never compensates: a failure (step, gate, re-run window) holds the release
 * `paused` with `roll_forward_hold` set and a reason that offers roll forward, and `abort` ends
 * it `aborted` with nothing undone. Before the point the release compensates as any other.
 *
 * A `recoverable` release compensates as any other, but traffic rollback alone does not restore
 * service: once compensation has undone what took effect, the release waits `needs_operator`
 * with `restore` set for an operator to run the recipe's `restore` action and confirm it
 * (`confirm_restore`, reason required); only then does it end `rolled_back`. The restore is
 * the operator's (a runbook action on state Baton does not own); the engine's part is not to
 * call the release rolled back, nor free its lanes, before someone confirms it.
 *
 * A `rollback` of a succeeded recoverable release is a new release (the previous admitted
 * manifest again) whose `lineage.restore` carries the rolled-back recipe's restore action: once
 * its steps have put traffic and images back it waits `needs_operator` the same way, and
 * `confirm_restore` ends it `succeeded`.
 */
import { restoreToolWords } from "../restore-state.ts";
import type { Release } from "../types.ts";
import { suggestedCommand } from "../verbs.ts";
import { type Draft, stepRunAt } from "./draft.ts";
import { guards } from "./guards.ts";

/** The step index after which rollback is unsafe, or null (not roll_forward_only). */
export function rollForwardPoint(r: Release): number | null {
  const rec = r.manifest.recovery;
  return rec?.class === "roll_forward_only" && typeof rec.unsafe_after === "number"
    ? rec.unsafe_after
    : null;
}

/** Whether the release's `unsafe_after` step run may have taken effect (or is under way). */
export function pastRollForwardPoint(r: Release): boolean {
  const at = rollForwardPoint(r);
  if (at === null) return false;
  const sr = stepRunAt(r, at, "fwd");
  return sr !== undefined && (guards.inFlight(sr) || guards.mayHaveTakenEffect(sr));
}

/** `step 11 attach_queue_lane on lane-b`: the release's roll-forward point, for people. */
export function rollForwardPointLabel(r: Release): string {
  const at = rollForwardPoint(r) ?? -1;
  const step = r.manifest.steps[at];
  return `step ${at + 1} ${step?.name ?? "?"}${step?.lane ? ` on ${step.lane}` : step ? ` of wave ${step.wave + 1}` : ""}`;
}

/** The CLI line that rolls the release forward. */
export const rollForwardCommand = (id: string) => suggestedCommand("roll_forward", { target: id });

/**
 * Instead of compensating: holds a release past its roll-forward point `paused`, saying why,
 * and offering roll forward (and a retry of the failed step run when there is one).
 */
export function holdForRollForward(d: Draft, why: string): void {
  const r = d.release;
  const failed = stepRunAt(r, r.cursor, "fwd");
  const retryable =
    failed !== undefined && guards.waitsOnOperator({ ...r, state: "paused" }, failed);
  r.state = "paused";
  r.rerun_deadline = null;
  r.gate = null;
  r.roll_forward_hold = { at: d.now, unsafe_after: rollForwardPoint(r) ?? -1, why };
  r.reason = `${why}; not compensated: the recipe's recovery class is roll_forward_only and ${rollForwardPointLabel(r)} may have taken effect, after which rollback is unsafe; roll forward with a fixed recipe (${rollForwardCommand(r.id)})${retryable && failed ? `, or retry ${failed.id} (${suggestedCommand("retry", { target: failed.id })})` : ""}; abort ends the release without undoing anything`;
  d.accept(`[engine] release ${r.id} held for roll forward: ${r.reason}`, null, {
    roll_forward_hold: { unsafe_after: r.roll_forward_hold.unsafe_after, why },
  });
}

/** The CLI line that confirms a recoverable release's restore action. */
export const confirmRestoreCommand = (id: string) =>
  suggestedCommand("confirm_restore", { target: id });

/**
 * Whether a release whose compensation just ended must wait for its restore action: the
 * recipe's class is `recoverable`, some forward step may have taken effect (so something was
 * rolled back), and nobody confirmed the restore yet.
 */
export function awaitsRestore(r: Release): boolean {
  return (
    r.manifest.recovery?.class === "recoverable" &&
    !r.restore?.confirmed &&
    r.step_runs.some((sr) => sr.direction === "fwd" && guards.mayHaveTakenEffect(sr))
  );
}

/**
 * Whether a rollback release whose last step just succeeded must wait for the restore action
 * of the recoverable release it rolls back (`lineage.restore`), not confirmed yet.
 */
export function awaitsRollbackRestore(r: Release): boolean {
  return r.lineage?.verb === "rollback" && r.lineage.restore !== undefined && !r.restore?.confirmed;
}

/** Whether `r` is a rollback release whose steps all ran (its wait is for the restore). */
export function rollbackDone(r: Release): boolean {
  return r.lineage?.verb === "rollback" && r.cursor >= r.manifest.steps.length;
}

/**
 * A rollback of a recoverable release ran every step (traffic and images are back): it waits
 * `needs_operator` for the rolled-back recipe's restore action, saying which and how to confirm
 * it. Its lanes stay claimed meanwhile; `confirm_restore` ends it `succeeded`.
 */
export function holdForRollbackRestore(d: Draft): void {
  const r = d.release;
  const of = r.lineage?.of ?? "?";
  const action = r.lineage?.restore ?? "(the recipe names none)";
  r.state = "needs_operator";
  r.restore = { action, since: d.now, confirmed: null };
  r.reason = `the rollback of ${of} put traffic and images back (all ${r.manifest.steps.length} steps done), but ${of}'s recovery class is recoverable: run its restore action, then confirm it (${confirmRestoreCommand(r.id)}); until then the rollback has not succeeded and its lanes stay claimed; restore action: ${action}`;
  d.accept(`[engine] release ${r.id} waits for the restore action of ${of}: ${r.reason}`, null, {
    restore: { action, since: d.now, of },
  });
}

/** A release waiting `needs_operator` for its restore action to be run and confirmed. */
export function waitingForRestore(r: Release): boolean {
  return r.state === "needs_operator" && !!r.restore && !r.restore.confirmed;
}

/**
 * Compensation of a recoverable release ended: it waits `needs_operator` for the restore
 * action, saying which and how to confirm it. Its lanes stay claimed meanwhile.
 */
export function holdForRestore(d: Draft): void {
  const r = d.release;
  const action = r.manifest.recovery?.restore ?? (restoreToolWords(r) || "(the recipe names none)");
  r.state = "needs_operator";
  // Runs of the recipe's restore tool stay on the record; the wait starts now.
  r.restore = {
    action,
    since: r.restore?.since ?? d.now,
    confirmed: null,
    ...(r.restore?.runs ? { runs: r.restore.runs } : {}),
  };
  r.reason = `traffic was rolled back (every step that may have taken effect was undone), but the recipe's recovery class is recoverable: run its restore action, then confirm it (${confirmRestoreCommand(r.id)}); until then the release is not rolled back and its lanes stay claimed; restore action: ${action}`;
  d.accept(`[engine] release ${r.id} waits for its restore action: ${r.reason}`, null, {
    restore: { action, since: d.now },
  });
}
