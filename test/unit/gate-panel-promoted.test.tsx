/** @jsxImportSource hono/jsx */
/**
 * The gate panel after a promote: an inconclusive gate an operator promoted past says who
 * promoted it, when and why, and no longer says "an operator must promote or abort"; before
 * the promote it still asks for one. Built from the transition's own history entries.
 */
import { describe, expect, it } from "vitest";
import { INCONCLUSIVE_ASKS } from "../../engine/src/domain/gate/decide.ts";
import type { GateEvidence } from "../../engine/src/domain/gate/evidence.ts";
import { lastStepOfWave } from "../../engine/src/domain/gate/waves.ts";
import { newRelease } from "../../engine/src/domain/transition.ts";
import type { HistoryEntry, Release } from "../../engine/src/domain/types.ts";
import { GatePanel } from "../../engine/src/http/dashboard/gate-panel.tsx";
import { compileRecipeInput } from "../../engine/src/recipes/compile-text.ts";
import { advanceTo, ok, T0 } from "../support/sim/drive.ts";
import { goodRecipe } from "./recipe-fixture.ts";

const ANALYSIS = {
  min_samples: 100,
  bake_ms: 10_000,
  interval_ms: 2_000,
  max_wait_ms: 60_000,
  metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.01 } }],
};

function pausedAtInconclusiveGate(): { r: Release; evidence: GateEvidence } {
  const input = goodRecipe() as Record<string, unknown>;
  input.analysis = ANALYSIS;
  const c = compileRecipeInput(input as never);
  const r0 = newRelease("r5", 5, c.manifest, c.manifest_digest, T0);
  const last = lastStepOfWave(r0.manifest, 0);
  const before = advanceTo(r0, last);
  const s = before.step_runs.find((x) => x.step_index === last && x.direction === "fwd")!;
  const r = ok(before, {
    type: "applied",
    step_run_id: s.id,
    outcome: "ok",
    message: "ok",
  }).release;
  const evidence: GateEvidence = {
    release_id: r.id,
    generation: r.generation,
    manifest_digest: r.manifest_digest,
    wave: 0,
    seq: 1,
    at: T0 + 60_000,
    phase: "gate",
    decision: "inconclusive",
    reason: `inconclusive after 60 s (max_wait_ms 60,000): insufficient data; ${INCONCLUSIVE_ASKS}`,
    alpha: 0.05,
    elapsed_ms: 60_000,
    arms: { candidate: 10, control: 90 },
    srm: null,
    metrics: [],
  };
  const paused = ok(r, { type: "gate", evidence }).release;
  expect(paused.state).toBe("paused");
  return { r: paused, evidence };
}

const html = async (r: Release, evidence: GateEvidence, history: HistoryEntry[]) =>
  String(await (<GatePanel release={r} evidence={[evidence]} history={history} />).toString());

describe("the gate panel after a promote", () => {
  it("says who promoted past the inconclusive gate, and stops asking for a promote", async () => {
    const { r, evidence } = pausedAtInconclusiveGate();
    const waiting = await html(r, evidence, []);
    expect(waiting).toContain(INCONCLUSIVE_ASKS);
    expect(waiting).not.toContain("Promoted past this gate");

    const promoted = ok(r, {
      type: "promote",
      actor: "operator:maria",
      reason: "p99 within the SLO by hand",
    });
    const after = await html(promoted.release, evidence, promoted.history);
    expect(after).not.toContain(INCONCLUSIVE_ASKS);
    expect(after).toContain(
      "Promoted past this gate: promoted by operator:maria at 2027-01-15 08:00:00Z: p99 within the SLO by hand",
    );
  });
});
