/**
 * Error annotations with GitHub's limit in mind: a step shows at most 10 error annotations,
 * so the first MAX_ERROR_ANNOTATIONS - 3 become `::error` annotations and the rest go to the
 * log as plain lines, with one last annotation saying how many were moved there.
 * `core.setFailed` also annotates (the step calls it at most twice): it keeps 2 of the budget.
 */
import * as core from "@actions/core";

/** Error annotations GitHub shows per step. */
export const MAX_ERROR_ANNOTATIONS = 10;

let used = 0;
let moved = 0;

/** Annotates `message` as an error while the budget lasts, else logs it. */
export function annotateError(message: string): void {
  // Keep one annotation for the note about the rest, and two for setFailed.
  if (used < MAX_ERROR_ANNOTATIONS - 3) {
    used++;
    core.error(message);
  } else {
    moved++;
    core.info(`[error] ${message}`);
  }
}

/** Emits the note about errors moved to the log (once, when there were any). */
export function flushAnnotations(): void {
  if (moved === 0) return;
  used++;
  core.error(
    `[action] ${moved} more error(s) are in the step log (GitHub shows at most ${MAX_ERROR_ANNOTATIONS} annotations per step)`,
  );
  moved = 0;
}

/** For tests: the counters. */
export function annotationCounts(): { used: number; moved: number } {
  return { used, moved };
}
