/**
 * Identities on the wire, one pattern each: a release id (`r<N>`) and a step-run id
 * (`sr_<release>_<step>_<f|b>`). The schemas are branded zod types: a value typed
 * `ReleaseId`/`StepRunId` has been checked. The engine, the dashboard, the CLI and the action
 * all take the patterns from here.
 */
import * as z from "zod";
import { lazySchema } from "./lazy-schema.ts";

/** `bytes` random bytes as lowercase hex (Web Crypto, which every runtime the engine runs on has). */
export function randomHex(bytes: number): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (x) =>
    x.toString(16).padStart(2, "0"),
  ).join("");
}

/** `r<N>`: a release id, e.g. `r17` (N up to 12 digits). */
export const RELEASE_ID_PATTERN = /^r[0-9]{1,12}$/;
/**
 * `rv<N>`: a recovery run, e.g. `rv3`: a recovery action run by an allowlisted runner tool
 * outside any release (a credential revocation). On the runner protocol it stands where a
 * step run and its release stand: the dispatch's `step_run_id` and `release.id`.
 */
export const RECOVERY_RUN_ID_PATTERN = /^rv[0-9]{1,12}$/;
/** `sr_<release number>_<step index>_<f|b>`, e.g. `sr_17_6_f`. */
export const STEP_RUN_ID_PATTERN = /^sr_[0-9]{1,12}_[0-9]{1,4}_[fb]$/;

/**
 * A release id on the wire (plain string type, for message schemas whose values code builds
 * from strings); `ReleaseId` is the same check, branded.
 */
export const ReleaseIdText = lazySchema(() =>
  z.string().regex(RELEASE_ID_PATTERN, "must look like r<number>, e.g. r17"),
);
/** A checked release id (branded). */
export const ReleaseId = lazySchema(() => ReleaseIdText.brand<"ReleaseId">());
export type ReleaseId = z.infer<typeof ReleaseId>;

/** A step-run id on the wire (plain string type); `StepRunId` is the same check, branded. */
export const StepRunIdText = lazySchema(() =>
  z.string().regex(STEP_RUN_ID_PATTERN, "must look like sr_<release>_<step>_<f|b>, e.g. sr_17_6_f"),
);
/** A checked step-run id (branded). */
export const StepRunId = lazySchema(() => StepRunIdText.brand<"StepRunId">());
export type StepRunId = z.infer<typeof StepRunId>;

/** What a runner is dispatched to run: a step run, or a recovery run (`rv3`). */
export const RunnerRunIdText = lazySchema(() =>
  z
    .string()
    .refine(
      (s) => STEP_RUN_ID_PATTERN.test(s) || RECOVERY_RUN_ID_PATTERN.test(s),
      "must look like sr_<release>_<step>_<f|b> (e.g. sr_17_6_f) or a recovery run rv<number>",
    ),
);

/** What a dispatched run belongs to: a release, or a recovery run standing for itself. */
export const RunOwnerIdText = lazySchema(() =>
  z
    .string()
    .refine(
      (s) => RELEASE_ID_PATTERN.test(s) || RECOVERY_RUN_ID_PATTERN.test(s),
      "must look like r<number> (e.g. r17) or a recovery run rv<number>",
    ),
);

/** Whether `s` is a recovery run id (`rv3`). */
export function isRecoveryRunId(s: string): boolean {
  return RECOVERY_RUN_ID_PATTERN.test(s);
}

/** Whether `s` is a release id. */
export function isReleaseId(s: string): s is ReleaseId {
  return RELEASE_ID_PATTERN.test(s);
}

/** Whether `s` is a step-run id. */
export function isStepRunId(s: string): s is StepRunId {
  return STEP_RUN_ID_PATTERN.test(s);
}

/** Builds a step-run id from its parts (`stepRunId(17, 6, false)` → `sr_17_6_f`). */
export function stepRunId(releaseNumber: number, stepIndex: number, backward: boolean): string {
  return `sr_${releaseNumber}_${stepIndex}_${backward ? "b" : "f"}`;
}

/** Release id of a step-run id (`sr_17_6_f` → `r17`), or null when the id is malformed. */
export function releaseIdOfStepRun(id: string): string | null {
  if (!STEP_RUN_ID_PATTERN.test(id)) return null;
  return `r${id.split("_")[1]}`;
}
