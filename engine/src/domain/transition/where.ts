/**
 * Where a release is, for messages people read: `running at step 4` (steps count from 1),
 * `compensating at step 3`, or just the state once it ended (never "rolled_back at step -1").
 */
import { TERMINAL_RELEASE_STATES } from "../states.ts";
import type { Release } from "../types.ts";

export function whereIs(r: Release): string {
  if (TERMINAL_RELEASE_STATES.has(r.state) || r.cursor < 0) return r.state;
  if (r.cursor >= r.manifest.steps.length) return `${r.state} past the last step`;
  return `${r.state} at step ${r.cursor + 1}`;
}
