/**
 * Gate summaries: a release's stored evidence (evidence.ts) grouped per gate — one per
 * (generation, wave, phase) — with the latest evaluation's figures and, per metric, the
 * series of its confidence-sequence bounds over the wave's time. What the release record's
 * `evidence.gates`, `baton status` and the dashboard's gate charts show (docs/gate.md
 * "Evidence"). Pure.
 */
import type { GateDecision, GatePhase } from "./decide.ts";
import { type GateEvidence, loadQuantile, type MetricEvidence } from "./evidence.ts";
import { type MetricResult, metricSentence } from "./metric.ts";
import { count } from "./words.ts";

/** One look of one metric: Δ (positive is better) and its bounds at `elapsed_ms`. */
export interface BoundPoint {
  /** ms since the wave's exposure was observed. */
  elapsed_ms: number;
  estimate: number | null;
  lower: number | null;
  upper: number | null;
  /** δ at this look (a relative margin moves with the control's value). */
  margin: number | null;
}

/** A gate of one wave (one phase, one generation) as its evaluations left it. */
export interface GateSummary {
  generation: number;
  manifest_digest: string;
  /** 0-based wave index. */
  wave: number;
  phase: GatePhase;
  /** How many evaluations were stored. */
  evaluations: number;
  /** Epoch ms of the first and latest evaluation. */
  first_at: number;
  last_at: number;
  /** The latest evaluation's decision and reason. */
  decision: GateDecision;
  reason: string;
  alpha: number;
  elapsed_ms: number;
  /** Assignment units per arm at the latest evaluation. */
  arms: GateEvidence["arms"];
  srm: GateEvidence["srm"];
  /** Per metric, the latest evaluation's figures. */
  metrics: MetricEvidence[];
}

/** A summary with each metric's bounds over time (for charts). */
export interface GateSeries extends GateSummary {
  series: { name: string; required: boolean; points: BoundPoint[] }[];
}

/**
 * Groups `evidence` (any order) per (generation, wave, phase), oldest gate first; each
 * group's latest evaluation (highest seq) gives its figures. `maxPoints` thins each metric's
 * series evenly (the first and the latest look are always kept).
 */
export function gateSeries(evidence: readonly GateEvidence[], maxPoints = 240): GateSeries[] {
  const groups = new Map<string, GateEvidence[]>();
  for (const e of evidence) {
    const k = `${e.generation}\u0000${e.wave}\u0000${e.phase}`;
    const g = groups.get(k);
    if (g) g.push(e);
    else groups.set(k, [e]);
  }
  const out: GateSeries[] = [];
  for (const list of groups.values()) {
    list.sort((a, b) => a.seq - b.seq);
    const first = list[0] as GateEvidence;
    const last = list.at(-1) as GateEvidence;
    const names = new Map<string, boolean>();
    for (const e of list) for (const m of e.metrics) names.set(m.name, m.required);
    const picked = thin(list, maxPoints);
    out.push({
      generation: last.generation,
      manifest_digest: last.manifest_digest,
      wave: last.wave,
      phase: last.phase,
      evaluations: list.length,
      first_at: first.at,
      last_at: last.at,
      decision: last.decision,
      reason: last.reason,
      alpha: last.alpha,
      elapsed_ms: last.elapsed_ms,
      arms: last.arms,
      srm: last.srm,
      metrics: last.metrics,
      series: [...names].map(([name, required]) => ({
        name,
        required,
        points: picked.flatMap((e) => {
          const m = e.metrics.find((x) => x.name === name);
          return m
            ? [
                {
                  elapsed_ms: e.elapsed_ms,
                  estimate: m.estimate,
                  lower: m.lower,
                  upper: m.upper,
                  margin: m.margin,
                },
              ]
            : [];
        }),
      })),
    });
  }
  return out.sort((a, b) => a.first_at - b.first_at || a.wave - b.wave);
}

/** The summaries without the series (what the release record keeps). */
export function gateSummaries(evidence: readonly GateEvidence[]): GateSummary[] {
  return gateSeries(evidence, 2).map(({ series: _s, ...rest }) => rest);
}

function thin<T>(list: readonly T[], max: number): T[] {
  if (list.length <= max) return [...list];
  const out: T[] = [];
  const step = (list.length - 1) / (max - 1);
  for (let i = 0; i < max; i++) out.push(list[Math.round(i * step)] as T);
  return out;
}

/** `1.23%` for a share; `—` when unknown. */
export function pct(v: number | null | undefined, digits = 2): string {
  return v === null || v === undefined ? "—" : `${(v * 100).toFixed(digits)}%`;
}

/** Signed share difference in percentage points: `+0.12 pp`. */
export function pp(v: number | null | undefined): string {
  if (v === null || v === undefined) return "—";
  const x = v * 100;
  return `${x >= 0 ? "+" : "−"}${Math.abs(x).toFixed(2)} pp`;
}

/** A stored metric as the sentence builder reads it (the evidence keeps the same figures). */
function asResult(m: MetricEvidence): MetricResult {
  const difference =
    m.estimate !== null && m.lower !== null && m.upper !== null
      ? { estimate: m.estimate, lower: m.lower, upper: m.upper }
      : null;
  return {
    name: m.name,
    kind: m.quantile ? "quantile" : "ratio",
    required: m.required,
    dryRun: m.dry_run === true,
    better: m.better ?? "lower",
    missing: m.missing,
    readError: false,
    candidate: m.candidate,
    control: m.control,
    difference,
    margin: m.margin,
    floored: m.floored === true,
    slo:
      m.slo && m.slo.lower !== null && m.slo.upper !== null
        ? { limit: m.slo.limit, lower: m.slo.lower, upper: m.slo.upper }
        : null,
    verdict: m.verdict,
    ...(m.quantile ? { quantile: loadQuantile(m.quantile) } : {}),
  };
}

/**
 * One line per metric of a summary, for people, as the gate's reasons say it: `error-rate
 * (primary): candidate 1.00% vs control 0.90%, allowed +2.0 points: within (at most 0.30 points
 * worse than the control, anytime-valid at α 0.05; candidate 10/1,000, control 90/10,000, lower
 * is better)`; a metric without data says why.
 */
export function metricLine(m: MetricEvidence, alpha = 0.05): string {
  const kind = `${m.required ? "primary" : "guardrail"}${m.dry_run ? ", dry run" : ""}`;
  if (m.missing) return `${m.name} (${kind}): no data — ${m.missing}`;
  const sentence = metricSentence(asResult(m), alpha);
  return `${m.name} (${kind})${sentence.slice(m.name.length)}`;
}

/** `candidate 1,000 / control 9,000 units (planned 10.0%, observed 10.0%)`. */
export function armsLine(s: Pick<GateSummary, "arms" | "srm">): string {
  if (!s.arms) return "no unit counts";
  const total = s.arms.candidate + s.arms.control;
  const planned = s.srm?.planned[0];
  const shares = [
    ...(planned !== undefined ? [`planned ${pct(planned, 1)} candidate`] : []),
    ...(total > 0 ? [`observed ${pct(s.arms.candidate / total, 1)}`] : []),
  ];
  const units = `candidate ${count(s.arms.candidate)} / control ${count(s.arms.control)} units`;
  return shares.length > 0 ? `${units} (${shares.join(", ")})` : units;
}

/** `SRM: ok (log BF 0.12, p 1)` / `SRM: mismatch …` / `SRM: not tested`. */
export function srmLine(s: Pick<GateSummary, "srm">): string {
  const x = s.srm;
  if (!x) return "SRM: not tested";
  const lbf = x.log_bayes_factor === null ? "—" : x.log_bayes_factor.toFixed(2);
  const p =
    x.p_value === null ? "—" : x.p_value < 1e-4 ? x.p_value.toExponential(1) : x.p_value.toFixed(4);
  return `SRM: ${x.mismatch ? "MISMATCH" : "ok"} (planned ${x.planned.map((v) => pct(v, 1)).join("/")}, observed ${x.observed.map(count).join("/")}; log Bayes factor ${lbf}, anytime p ${p})`;
}
