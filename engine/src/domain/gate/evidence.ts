/**
 * Evidence (docs/glossary.md): one stored gate evaluation, bound to the release id, generation,
 * manifest digest and wave it was taken for. A guard asks `evidenceSatisfies(evidence,
 * binding)`: evidence from another release, generation, manifest or wave never satisfies it,
 * whatever its decision. The record is plain JSON (no NaN or ±Infinity: those become null) so
 * both stores and canonical JSON can carry it.
 */
import type { QuantileMargin } from "./analysis.ts";
import type { GateDecision, GateEvaluation, GatePhase, MetricResult } from "./decide.ts";
import type { ArmQuantile, QuantileResult } from "./quantile.ts";

/** What an evaluation is about. */
export interface EvidenceBinding {
  release_id: string;
  generation: number;
  manifest_digest: string;
  /** 0-based wave index in the manifest. */
  wave: number;
}

/** One metric's numbers in an evidence record. */
export interface MetricEvidence {
  name: string;
  required: boolean;
  /** Recorded, never decided (absent on records written before dry runs existed). */
  dry_run?: boolean;
  /** Which direction of the metric is better (absent on older records: lower). */
  better?: "lower" | "higher";
  verdict: MetricResult["verdict"];
  missing: string | null;
  candidate: { x: number; n: number } | null;
  control: { x: number; n: number } | null;
  /** Δ (oriented: positive is better) and its confidence-sequence bounds. */
  estimate: number | null;
  lower: number | null;
  upper: number | null;
  /** δ ≥ 0; pass needs lower ≥ −δ. */
  margin: number | null;
  /** True when a relative margin was raised to its floor (absent: not floored). */
  floored?: boolean;
  slo: { limit: number; lower: number | null; upper: number | null } | null;
  /** A quantile metric's bounds, ms (+∞ stored as null); absent for a share's metric. */
  quantile?: StoredQuantile;
}

/** One arm's quantile as stored: `upper` and `bucket.high` null for +∞. */
export interface StoredArmQuantile {
  n: number;
  bucket: { low: number; high: number | null };
  lower: number;
  upper: number | null;
}

/** {@link QuantileResult} as stored (JSON-safe). */
export interface StoredQuantile {
  quantile: number;
  candidate: StoredArmQuantile;
  control: StoredArmQuantile | null;
  margin: QuantileMargin | null;
  slo_ms: number | null;
}

const storeArm = (a: ArmQuantile): StoredArmQuantile => ({
  n: a.n,
  bucket: { low: a.bucket.low, high: fin(a.bucket.high) },
  lower: a.lower,
  upper: fin(a.upper),
});

const loadArm = (a: StoredArmQuantile): ArmQuantile => ({
  n: a.n,
  bucket: { low: a.bucket.low, high: a.bucket.high ?? Number.POSITIVE_INFINITY },
  lower: a.lower,
  upper: a.upper ?? Number.POSITIVE_INFINITY,
});

/** A quantile's bounds as stored (JSON-safe). */
export function storeQuantile(q: QuantileResult): StoredQuantile {
  return {
    quantile: q.quantile,
    candidate: storeArm(q.candidate),
    control: q.control ? storeArm(q.control) : null,
    margin: q.margin ? { ...q.margin } : null,
    slo_ms: q.slo_ms,
  };
}

/** The stored bounds read back (null stands for +∞). */
export function loadQuantile(q: StoredQuantile): QuantileResult {
  return {
    quantile: q.quantile,
    candidate: loadArm(q.candidate),
    control: q.control ? loadArm(q.control) : null,
    margin: q.margin,
    slo_ms: q.slo_ms,
  };
}

/** One stored gate evaluation. */
/**
 * How the release labels were checked at one evaluation (docs/record.md "Release labels"):
 * requests labelled with the release, counted where the router forwarded them and where the
 * lanes served them (by the `baton-release` label they echoed), and whether the two agree.
 */
export interface ReleaseLabelCheck {
  release: string;
  /** Requests the router forwarded labelled `release`. */
  router: number;
  /** Requests the lanes counted under `release` in their metrics. */
  lanes: number;
  agree: boolean;
}

export interface GateEvidence extends EvidenceBinding {
  /** 1-based evaluation number within the (release, generation, wave). */
  seq: number;
  /** Epoch ms of the evaluation. */
  at: number;
  phase: GatePhase;
  decision: GateDecision;
  reason: string;
  alpha: number;
  elapsed_ms: number;
  arms: { candidate: number; control: number } | null;
  srm: {
    planned: number[];
    observed: number[];
    log_bayes_factor: number | null;
    p_value: number | null;
    mismatch: boolean;
  } | null;
  metrics: MetricEvidence[];
  /**
   * This evaluation could not read data it needs (a failed read), and this one had every datum
   * and still could not decide: what the gate's consecutive-error and inconclusive limits
   * count. Absent on records written before the limits existed (false).
   */
  read_error?: boolean;
  undecided?: boolean;
  /** The release-label check read with the numbers; absent when the source cannot tell. */
  labels?: ReleaseLabelCheck;
}

const fin = (v: number | undefined): number | null =>
  v !== undefined && Number.isFinite(v) ? v : null;

/** The evidence record of `evaluation` (JSON-safe). */
export function toEvidence(
  binding: EvidenceBinding,
  seq: number,
  at: number,
  e: GateEvaluation,
): GateEvidence {
  return {
    release_id: binding.release_id,
    generation: binding.generation,
    manifest_digest: binding.manifest_digest,
    wave: binding.wave,
    seq,
    at,
    phase: e.phase,
    decision: e.decision,
    reason: e.reason,
    alpha: e.alpha,
    elapsed_ms: e.elapsedMs,
    arms: e.arms ? { ...e.arms } : null,
    srm: e.srm
      ? {
          planned: [...e.srm.planned],
          observed: [...e.srm.observed],
          log_bayes_factor: fin(e.srm.logBayesFactor),
          p_value: fin(e.srm.pValue),
          mismatch: e.srm.mismatch,
        }
      : null,
    read_error: e.readError,
    undecided: e.undecided,
    metrics: e.metrics.map(metricEvidence),
  };
}

/** One metric's result as stored (JSON-safe: NaN and ±Infinity become null). */
export function metricEvidence(m: MetricResult): MetricEvidence {
  return {
    name: m.name,
    required: m.required,
    ...(m.dryRun ? { dry_run: true } : {}),
    better: m.better,
    verdict: m.verdict,
    missing: m.missing,
    candidate: m.candidate ? { ...m.candidate } : null,
    control: m.control ? { ...m.control } : null,
    estimate: fin(m.difference?.estimate),
    lower: fin(m.difference?.lower),
    upper: fin(m.difference?.upper),
    margin: fin(m.margin ?? undefined),
    ...(m.floored ? { floored: true } : {}),
    slo: m.slo ? { limit: m.slo.limit, lower: fin(m.slo.lower), upper: fin(m.slo.upper) } : null,
    ...(m.quantile ? { quantile: storeQuantile(m.quantile) } : {}),
  };
}

/** True when `e` is about exactly this release, generation, manifest and wave. */
export function boundTo(e: EvidenceBinding, b: EvidenceBinding): boolean {
  return (
    e.release_id === b.release_id &&
    e.generation === b.generation &&
    e.manifest_digest === b.manifest_digest &&
    e.wave === b.wave
  );
}

/**
 * The guard of a gated wave's promotion: a `pass` of the gate phase, bound to `binding`.
 * Anything else (another release, generation, manifest or wave; a watch-phase pass; wait,
 * fail, inconclusive; no evidence) does not satisfy it.
 */
export function evidenceSatisfies(e: GateEvidence | undefined, binding: EvidenceBinding): boolean {
  return e !== undefined && e.phase === "gate" && e.decision === "pass" && boundTo(e, binding);
}

/**
 * The gate's state for `binding` from a list of evidence (any order, any bindings): the
 * decision of its latest bound evaluation (highest seq), or `pending` when there is none.
 */
export function latestDecision(
  evidence: readonly GateEvidence[],
  binding: EvidenceBinding,
  phase: GatePhase = "gate",
): GateDecision | "pending" {
  let best: GateEvidence | undefined;
  for (const e of evidence) {
    if (e.phase === phase && boundTo(e, binding) && (!best || e.seq > best.seq)) best = e;
  }
  return best ? best.decision : "pending";
}
