/** Mapping between step-run ids and release ids (docs/state-machine.md "Identities"). */
import { STEP_RUN_ID_PATTERN } from "../protocol/messages.ts";

/** `r<N>`, the release id format. */
export const RELEASE_ID_PATTERN = /^r[0-9]{1,12}$/;

/** Release id of a step-run id (`sr_17_6_f` → `r17`), or null when the id is malformed. */
export function releaseIdOfStepRun(stepRunId: string): string | null {
  if (!STEP_RUN_ID_PATTERN.test(stepRunId)) return null;
  return `r${stepRunId.split("_")[1]}`;
}
