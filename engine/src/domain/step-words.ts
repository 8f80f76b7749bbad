/** Steps for people: numbers count from 1 (the step table's index and wave count from 0). */
import type { ManifestStep } from "./types.ts";

/** `step 9 (wave 2)`: a step for people. */
export function stepWords(step: Pick<ManifestStep, "index" | "wave">): string {
  return `step ${step.index + 1} (wave ${step.wave + 1})`;
}
