/**
 * Gate benchmark (`npm run bench:gate`). A seeded simulation of canary waves, every
 * figure from the gate's own decision function (`decideGate`) fed with simulated counts:
 *
 * - A/A (`aa_runs` canaries × `looks` looks): both arms have the same error rate (2%); each
 *   look adds 1,000 requests split 20/80 candidate/control by a fair draw. The gate is read at
 *   every look with margin δ = 0 and a bake longer than the run, so the only way it stops is
 *   `fail` (a regression claimed, or an SRM alarm). `false_stop_rate` = share of canaries
 *   that ever stop, split into `metric_false_stop_rate` (stopped on the error-rate metric) and
 *   `srm_false_stop_rate` (stopped on the sample-ratio test); each must be ≤ α + 3σ,
 *   σ = √(α(1−α)/aa_runs). `naive_false_stop_rate` = the same data through a fixed-horizon
 *   two-sided z-test at level α re-tested at every look, stopping when it finds any
 *   difference (|z| ≥ z_{1−α/2}), the way a person peeks at a dashboard, or a threshold is
 *   re-checked every interval: must be ≥ 0.15 at 60 looks, to show what the anytime-valid test
 *   buys.
 * - Detection: control 2%, candidate 4% (a 2× error-rate regression), same looks:
 *   `detect_median_looks` = median look at which the gate fails; `fixed_horizon_looks` = the
 *   looks a fixed-horizon test with the same α (two-sided) and 80% power needs in total
 *   (n from the normal approximation), which may be looked at only once. The median must be
 *   below it.
 * - Quantile (p99 of a latency histogram with 16 buckets, margin 0 ms): A/A with both arms
 *   log-normal (median 80 ms, σ 0.6), `quantile_false_stop_rate` ≤ α + 3σ; the candidate 2×
 *   slower (every latency doubled, so its p99 doubles), `quantile_detect_rate` = share failed
 *   within the looks, ≥ 0.8.
 * - Low traffic: the A/A canary at 20 requests a look (1,200 in all, fewer than min_samples on
 *   the candidate), max_wait_ms at the last look: `low_traffic_inconclusive_rate` = share
 *   ending inconclusive, the honest outcome when there is too little data to show anything;
 *   must be ≥ 1 − (α + 3σ) (a pass is impossible, a false stop is bounded by α).
 * - SRM: `srm_false_alarm_rate` = share of the A/A canaries whose SRM check ever alarmed;
 *   `srm_detect_rate` = share of canaries planned 10/90 but served 14/86 caught within the
 *   looks.
 * - `eval_ms_10_metrics` = mean wall ms of one evaluation with 10 metrics (5 ratios, 5
 *   latency histograms of 12 buckets).
 * `ok` is false, and the exit code 1, when a bound above is broken (`broken` names them).
 * Last line: `RESULT {json}`.
 */
import { Analysis } from "../engine/src/domain/gate/analysis.ts";
import { decideGate, type GateObservations } from "../engine/src/domain/gate/decide.ts";
import { srmTest } from "../engine/src/domain/gate/srm.ts";
import { seededBinomial } from "../test/support/binomial.ts";

const ALPHA = 0.05;
const AA_RUNS = Number(process.env.BENCH_GATE_RUNS ?? 1000);
const LOOKS = 60;
const PER_LOOK = 1000;
const SHARE = 0.2;
const BASE_RATE = 0.02;
const draw = seededBinomial(20261201);
/** Normal quantiles at ALPHA = 0.05: Φ⁻¹(1 − α/2) and Φ⁻¹(0.8) (80% power). */
const Z_TWO_SIDED = 1.959963984540054;
const Z_POWER_80 = 0.8416212335729143;

const analysis = Analysis.parse({
  alpha: ALPHA,
  min_samples: 1000,
  bake_ms: 7 * 86_400_000,
  max_wait_ms: 7 * 86_400_000,
  metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0 } }],
});

interface Arm {
  n: number;
  x: number;
}

/** Latency histogram bounds of the quantile simulation, ms (+Inf implied). */
const Q_BOUNDS = [5, 10, 25, 50, 100, 150, 200, 250, 300, 400, 500, 600, 800, 1000, 2500, 5000];
const Q_SIGMA = 0.6;
const Q_MEDIAN = 80;

/** Φ, for the log-normal's bucket probabilities (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7). */
function phi(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const erf =
    1 -
    ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) *
      t *
      Math.exp(-x * x);
  return z >= 0 ? 0.5 * (1 + erf) : 0.5 * (1 - erf);
}

/** Probability of each bucket (the last is above the last bound) for latencies × `scale`. */
function bucketProbabilities(scale: number): number[] {
  const cdf = Q_BOUNDS.map((b) => phi(Math.log(b / (Q_MEDIAN * scale)) / Q_SIGMA));
  return [
    ...cdf.map((c, i) => c - (i > 0 ? (cdf[i - 1] as number) : 0)),
    1 - (cdf[cdf.length - 1] as number),
  ];
}

/** Adds `n` draws to per-bucket counts `into` (a multinomial by conditional binomials). */
function addMultinomial(into: number[], n: number, probs: number[]): void {
  let left = n;
  let mass = 1;
  for (let i = 0; i < probs.length && left > 0; i++) {
    const p = probs[i] as number;
    const k = i === probs.length - 1 ? left : draw(left, Math.min(1, Math.max(0, p / mass)));
    into[i] = (into[i] as number) + k;
    left -= k;
    mass -= p;
  }
}

/** Cumulative buckets (ms, +Inf last) from per-bucket counts. */
function cumulative(counts: number[]): { le: number; count: number }[] {
  let acc = 0;
  return counts.map((c, i) => {
    acc += c;
    return { le: Q_BOUNDS[i] ?? Number.POSITIVE_INFINITY, count: acc };
  });
}

const quantileAnalysis = Analysis.parse({
  alpha: ALPHA,
  min_samples: 1000,
  bake_ms: 7 * 86_400_000,
  max_wait_ms: 7 * 86_400_000,
  metrics: [{ name: "latency-p99", kind: "quantile", quantile: 0.99, margin: { ms: 0 } }],
});

/** One quantile canary: the first look at which the gate fails (0 = never). */
function quantileCanary(candidateScale: number): number {
  const pc = bucketProbabilities(candidateScale);
  const pb = bucketProbabilities(1);
  const c = new Array(Q_BOUNDS.length + 1).fill(0) as number[];
  const b = new Array(Q_BOUNDS.length + 1).fill(0) as number[];
  let nc = 0;
  let nb = 0;
  for (let look = 1; look <= LOOKS; look++) {
    const k = draw(PER_LOOK, SHARE);
    addMultinomial(c, k, pc);
    addMultinomial(b, PER_LOOK - k, pb);
    nc += k;
    nb += PER_LOOK - k;
    const e = decideGate(
      {
        analysis: quantileAnalysis,
        plannedCandidateShare: SHARE,
        elapsedMs: look * 10_000,
        phase: "gate",
      },
      {
        assignments: { candidate: nc, control: nb },
        metrics: {
          "latency-p99": {
            candidate: { kind: "latency", buckets: cumulative(c) },
            control: { kind: "latency", buckets: cumulative(b) },
          },
        },
      },
    );
    // A stop on the quantile metric (a sample-ratio alarm is counted in srm_false_stop_rate).
    if (e.decision === "fail") return e.srm?.mismatch ? 0 : look;
  }
  return 0;
}

function observations(c: Arm, b: Arm): GateObservations {
  return {
    assignments: { candidate: c.n, control: b.n },
    metrics: {
      "error-rate": {
        candidate: { kind: "ratio", counts: { numerator: c.x, denominator: c.n } },
        control: { kind: "ratio", counts: { numerator: b.x, denominator: b.n } },
      },
    },
  };
}

/**
 * Runs one canary of `perLook` requests a look; returns the first look at which the gate stops
 * (and whether on the sample-ratio test), the naive test stops, the SRM test alarms (0 =
 * never), and the gate's decision at the end.
 */
function canary(
  candidateRate: number,
  servedShare: number,
  perLook = PER_LOOK,
  a: Analysis = analysis,
): { gate: number; gateOnSrm: boolean; naive: number; srm: number; last: string } {
  const c = { n: 0, x: 0 };
  const b = { n: 0, x: 0 };
  const z = Z_TWO_SIDED;
  const out = { gate: 0, gateOnSrm: false, naive: 0, srm: 0, last: "wait" };
  for (let look = 1; look <= LOOKS; look++) {
    const nc = draw(perLook, servedShare);
    c.n += nc;
    b.n += perLook - nc;
    c.x += draw(nc, candidateRate);
    b.x += draw(perLook - nc, BASE_RATE);
    if (!out.gate) {
      const e = decideGate(
        { analysis: a, plannedCandidateShare: SHARE, elapsedMs: look * 10_000, phase: "gate" },
        observations(c, b),
      );
      out.last = e.decision;
      if (e.decision === "fail") {
        out.gate = look;
        out.gateOnSrm = e.srm?.mismatch === true;
      }
    }
    if (!out.srm && srmTest([c.n, b.n], [SHARE, 1 - SHARE], ALPHA).mismatch) out.srm = look;
    if (!out.naive && c.n > 0 && b.n > 0) {
      // Two-sided at α, at every look: any difference a person would read as a result.
      const pc = c.x / c.n;
      const pb = b.x / b.n;
      const se = Math.sqrt((pc * (1 - pc)) / c.n + (pb * (1 - pb)) / b.n);
      if (se > 0 && Math.abs(pc - pb) >= z * se) out.naive = look;
    }
  }
  return out;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

const started = performance.now();
let falseStops = 0;
let metricStops = 0;
let srmStops = 0;
let naiveStops = 0;
let srmAlarms = 0;
for (let r = 0; r < AA_RUNS; r++) {
  const o = canary(BASE_RATE, SHARE);
  if (o.gate) falseStops++;
  if (o.gate && o.gateOnSrm) srmStops++;
  if (o.gate && !o.gateOnSrm) metricStops++;
  if (o.naive) naiveStops++;
  if (o.srm) srmAlarms++;
}

const LOW_PER_LOOK = 20;
const lowAnalysis = Analysis.parse({
  alpha: ALPHA,
  min_samples: 1000,
  bake_ms: 60_000,
  max_wait_ms: LOOKS * 10_000,
  metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0 } }],
});
let lowInconclusive = 0;
for (let r = 0; r < AA_RUNS; r++) {
  if (canary(BASE_RATE, SHARE, LOW_PER_LOOK, lowAnalysis).last === "inconclusive")
    lowInconclusive++;
}

let quantileStops = 0;
let quantileDetected = 0;
for (let r = 0; r < AA_RUNS; r++) {
  if (quantileCanary(1)) quantileStops++;
  if (quantileCanary(2)) quantileDetected++;
}

const detectLooks: number[] = [];
for (let r = 0; r < AA_RUNS; r++) {
  const o = canary(2 * BASE_RATE, SHARE);
  detectLooks.push(o.gate || Number.POSITIVE_INFINITY);
}
const pc = 2 * BASE_RATE;
const pb = BASE_RATE;
const zz = Z_TWO_SIDED + Z_POWER_80;
const fixedN =
  (zz * zz * ((pc * (1 - pc)) / SHARE + (pb * (1 - pb)) / (1 - SHARE))) / (pc - pb) ** 2;
const fixedLooks = Math.ceil(fixedN / PER_LOOK);

let srmDetected = 0;
for (let r = 0; r < AA_RUNS; r++) {
  let c = 0;
  let n = 0;
  for (let look = 1; look <= LOOKS; look++) {
    c += draw(PER_LOOK, 0.14);
    n += PER_LOOK;
    if (srmTest([c, n - c], [0.1, 0.9], ALPHA).mismatch) {
      srmDetected++;
      break;
    }
  }
}

const ten = Analysis.parse({
  alpha: ALPHA,
  metrics: Array.from({ length: 10 }, (_, i) =>
    i % 2
      ? { name: `slow-${i}`, kind: "latency", threshold_ms: 500, margin: { absolute: 0.01 } }
      : { name: `errors-${i}`, kind: "ratio", better: "lower", margin: { relative: 0.1 } },
  ),
});
const bounds = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, Number.POSITIVE_INFINITY];
const hist = (n: number) =>
  bounds.map((le, i) => ({ le, count: Math.round((n * (i + 1)) / bounds.length) }));
const tenObs: GateObservations = {
  assignments: { candidate: 20_000, control: 80_000 },
  metrics: Object.fromEntries(
    ten.metrics.map((m) => [
      m.name,
      m.kind === "ratio"
        ? {
            candidate: { kind: "ratio", counts: { numerator: 400, denominator: 20_000 } },
            control: { kind: "ratio", counts: { numerator: 1600, denominator: 80_000 } },
          }
        : {
            candidate: { kind: "latency", buckets: hist(20_000) },
            control: { kind: "latency", buckets: hist(80_000) },
          },
    ]),
  ) as GateObservations["metrics"],
};
const evals = 2000;
const t0 = performance.now();
for (let i = 0; i < evals; i++) {
  decideGate(
    { analysis: ten, plannedCandidateShare: SHARE, elapsedMs: 1e6, phase: "gate" },
    tenObs,
  );
}
const evalMs = (performance.now() - t0) / evals;

const finite = detectLooks.filter(Number.isFinite);
const round = (v: number, d = 4) => Number(v.toFixed(d));
const result = {
  aa_runs: AA_RUNS,
  looks: LOOKS,
  alpha: ALPHA,
  false_stop_rate: round(falseStops / AA_RUNS),
  metric_false_stop_rate: round(metricStops / AA_RUNS),
  srm_false_stop_rate: round(srmStops / AA_RUNS),
  quantile_false_stop_rate: round(quantileStops / AA_RUNS),
  naive_false_stop_rate: round(naiveStops / AA_RUNS),
  detect_median_looks: median(detectLooks),
  fixed_horizon_looks: fixedLooks,
  quantile_detect_rate: round(quantileDetected / AA_RUNS),
  requests_per_look: PER_LOOK,
  low_traffic_requests_per_look: LOW_PER_LOOK,
  low_traffic_inconclusive_rate: round(lowInconclusive / AA_RUNS),
  srm_false_alarm_rate: round(srmAlarms / AA_RUNS),
  srm_detect_rate: round(srmDetected / AA_RUNS),
  eval_ms_10_metrics: round(evalMs, 3),
};
// The bounds the RESULT line promises (docs/gate.md "How it is measured").
const sigma = Math.sqrt((ALPHA * (1 - ALPHA)) / AA_RUNS);
const falseStopLimit = ALPHA + 3 * sigma;
const limits: [string, boolean][] = [
  [
    `metric_false_stop_rate ≤ ${round(falseStopLimit)}`,
    result.metric_false_stop_rate <= falseStopLimit,
  ],
  [`srm_false_stop_rate ≤ ${round(falseStopLimit)}`, result.srm_false_stop_rate <= falseStopLimit],
  [
    `quantile_false_stop_rate ≤ ${round(falseStopLimit)}`,
    result.quantile_false_stop_rate <= falseStopLimit,
  ],
  ["naive_false_stop_rate ≥ 0.15", result.naive_false_stop_rate >= 0.15],
  [
    "detect_median_looks < fixed_horizon_looks",
    result.detect_median_looks < result.fixed_horizon_looks,
  ],
  ["quantile_detect_rate ≥ 0.8", result.quantile_detect_rate >= 0.8],
  [
    `low_traffic_inconclusive_rate ≥ ${round(1 - falseStopLimit)}`,
    result.low_traffic_inconclusive_rate >= 1 - falseStopLimit,
  ],
];
const broken = limits.filter(([, ok]) => !ok).map(([name]) => name);
console.log(
  `[bench:gate] ${AA_RUNS} canaries × ${LOOKS} looks × ${PER_LOOK} requests/look (and ${LOW_PER_LOOK} in the low-traffic regime), split ${SHARE * 100}/${100 - SHARE * 100}; detected ${finite.length}/${AA_RUNS} 2× error-rate and ${quantileDetected}/${AA_RUNS} 2× p99 regressions; ${Math.round(performance.now() - started)} ms${broken.length ? `; BROKEN: ${broken.join("; ")}` : ""}`,
);
console.log(`RESULT ${JSON.stringify({ ...result, ok: broken.length === 0, broken })}`);
if (broken.length > 0) process.exitCode = 1;
