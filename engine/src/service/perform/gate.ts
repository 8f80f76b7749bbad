/**
 * Performs a `gate` row: one evaluation of a wave's gate from the metrics source (decided by
 * the pure domain), stored as evidence and fed back as the `gate` event.
 */
import type { GateEffect, ReleaseEvent } from "../../domain/types.ts";
import type { MetricsSource } from "../../ports/metrics-source.ts";
import type { OutboxRow } from "../../ports/store.ts";
import { evaluateGate } from "../gate-evaluator.ts";
import type { PerformContext } from "./context.ts";

/**
 * Evaluates a gate once (docs/gate.md): reads the metrics source, decides (pure domain),
 * stores the evidence, and returns it as the `gate` event. Idempotent per evaluation: if
 * this evaluation was stored already (a crash after storing, a lease taken over), the stored
 * record is the one fed back, so the release reads exactly what the store keeps.
 */
export async function performGate(
  ctx: PerformContext,
  row: OutboxRow,
  e: GateEffect,
): Promise<ReleaseEvent> {
  const release = await ctx.deps.releases.recentRelease(row.release_id);
  if (!release) {
    throw new Error(`[engine] release ${row.release_id} of outbox row ${row.id} is gone`);
  }
  const binding = {
    release_id: release.id,
    generation: e.generation,
    manifest_digest: release.manifest_digest,
    wave: e.wave,
  };
  const evidence = await evaluateGate(ctx.deps.metrics ?? NO_METRICS, {
    manifest: release.manifest,
    binding,
    seq: e.seq,
    waveStartedAt: e.since,
    now: ctx.deps.clock.now(),
    // The control arm is the baseline observed at start, not an assumed image.
    controlLanes: (release.baseline?.lanes ?? [])
      .filter((l) => l.weight > 0 && !l.excluded)
      .map((l) => l.id),
    ...(e.streak ? { streak: e.streak } : {}),
  });
  if (!evidence) {
    throw new Error(`[engine] release ${release.id} wave ${e.wave} has no gate to evaluate`);
  }
  if (!(await ctx.deps.store.appendEvidence(evidence))) {
    const kept = (await ctx.deps.store.listEvidence(release.id)).find(
      (x) =>
        x.generation === e.generation &&
        x.wave === e.wave &&
        x.seq === e.seq &&
        x.manifest_digest === release.manifest_digest,
    );
    if (kept) return { type: "gate", evidence: kept };
  }
  return { type: "gate", evidence };
}

/** No metrics source configured: every read is missing evidence, which never passes. */
export const NO_METRICS: MetricsSource = {
  async observe(q) {
    const why = "no metrics source is configured (set BATON_PROMETHEUS_URL; docs/gate.md)";
    return {
      assignments: { missing: why },
      metrics: Object.fromEntries(q.analysis.metrics.map((m) => [m.name, { missing: why }])),
    };
  },
};
