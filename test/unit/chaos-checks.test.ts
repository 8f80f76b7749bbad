/**
 * The crash scenarios' "applied at most once" count over deploy.sh's ledger: a phase recorded
 * again while its first record stands is a duplicate; a start deploy.sh undid (its container
 * failed health and was removed: a "-" record) may be applied again by a retry.
 */
import { describe, expect, it } from "vitest";
import type { Release } from "../../engine/src/domain/types.ts";
import { countEffects } from "../support/chaos-checks.ts";
import type { Evidence } from "../support/chaos-world.ts";

const OK = '{"status":"ok"}';
function evidence(lines: [string, string][]): Evidence {
  return {
    release: { step_runs: [] } as unknown as Release,
    history: [],
    attemptResults: [],
    pendingOutbox: [],
    cpHistory: [],
    cpLedger: [],
    deployLedger: lines.map(([phase, line]) => ({
      key: "r1:10:fwd:lane-b",
      sub: "deploy",
      phase,
      line,
    })),
    dockerCalls: [],
    dispatches: [],
  };
}

describe("countEffects over deploy.sh's ledger", () => {
  it("a start recorded twice with nothing undone is a duplicate", () => {
    const c = countEffects(
      evidence([
        ["start", OK],
        ["start", OK],
      ]),
    );
    expect(c.duplicates).toBe(1);
    expect(c.problems).toEqual(["deploy.sh recorded r1:10:fwd:lane-b deploy start 2 times"]);
  });
  it("a start undone by deploy.sh (removed after failed health) and started by a retry is not", () => {
    const c = countEffects(
      evidence([
        ["start", OK],
        ["start", "-"],
        ["start", OK],
      ]),
    );
    expect(c.duplicates).toBe(0);
    expect(c.problems).toEqual([]);
  });
  it("a third start after the undo and the retry is a duplicate again", () => {
    const c = countEffects(
      evidence([
        ["start", OK],
        ["start", "-"],
        ["start", OK],
        ["start", OK],
      ]),
    );
    expect(c.duplicates).toBe(1);
  });
});
