/**
 * Gate benchmark (`npm run bench:gate`). A seeded simulation of canary waves, every
 * figure from the gate's own decision function (`decideGate`) fed with simulated counts:
 *
 * - A/A (`aa_runs` canaries × `looks` looks): both arms have the same error rate (2%); each
 *   look adds 1,000 requests split 20/80 candidate/control by a fair draw. The gate is read at
 *   every look with margin δ = 0 and a bake longer than the run, so the only way it stops is
 *   `fail` (a regression claimed, or an SRM alarm). `false_stop_rate` = share of canaries
 *   that ever stop: must be ≤ α within Monte-Carlo error. `naive_false_stop_rate` = the same
 *   data through a fixed-horizon two-sided z-test at level α re-tested at every look, stopping
 *   when it calls the candidate worse (the way Argo Rollouts / Flagger / Kayenta thresholds
 *   are re-checked every interval).
 * - Detection: control 2%, candidate 4% (a 2× error-rate regression), same looks:
 *   `detect_median_looks` = median look at which the gate fails; `fixed_horizon_looks` = the
 *   looks a fixed-horizon test with the same α (two-sided) and 80% power needs in total
 *   (n from the normal approximation), which may be looked at only once.
 * - SRM: `srm_false_alarm_rate` = share of the A/A canaries whose SRM check ever alarmed;
 *   `srm_detect_rate` = share of canaries planned 10/90 but served 14/86 caught within the
 *   looks.
 * - `eval_ms_10_metrics` = mean wall ms of one evaluation with 10 metrics (5 ratios, 5
 *   latency histograms of 12 buckets).
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

/** Runs one canary; returns the first look at which the gate / naive test stop (0 = never). */
function canary(
  candidateRate: number,
  servedShare: number,
): { gate: number; naive: number; srm: number } {
  const c = { n: 0, x: 0 };
  const b = { n: 0, x: 0 };
  const z = Z_TWO_SIDED;
  const out = { gate: 0, naive: 0, srm: 0 };
  for (let look = 1; look <= LOOKS; look++) {
    const nc = draw(PER_LOOK, servedShare);
    c.n += nc;
    b.n += PER_LOOK - nc;
    c.x += draw(nc, candidateRate);
    b.x += draw(PER_LOOK - nc, BASE_RATE);
    if (!out.gate) {
      const e = decideGate(
        { analysis, plannedCandidateShare: SHARE, elapsedMs: look * 10_000, phase: "gate" },
        observations(c, b),
      );
      if (e.decision === "fail") out.gate = look;
    }
    if (!out.srm && srmTest([c.n, b.n], [SHARE, 1 - SHARE], ALPHA).mismatch) out.srm = look;
    if (!out.naive && c.n > 0 && b.n > 0) {
      const pc = c.x / c.n;
      const pb = b.x / b.n;
      const se = Math.sqrt((pc * (1 - pc)) / c.n + (pb * (1 - pb)) / b.n);
      if (se > 0 && pb - pc + z * se < 0) out.naive = look;
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
let naiveStops = 0;
let srmAlarms = 0;
for (let r = 0; r < AA_RUNS; r++) {
  const o = canary(BASE_RATE, SHARE);
  if (o.gate) falseStops++;
  if (o.naive) naiveStops++;
  if (o.srm) srmAlarms++;
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
console.log(
  `[bench:gate] ${AA_RUNS} canaries × ${LOOKS} looks × ${PER_LOOK} requests/look, split ${SHARE * 100}/${100 - SHARE * 100}; detected ${finite.length}/${AA_RUNS} 2× regressions; ${Math.round(performance.now() - started)} ms`,
);
console.log(
  `RESULT ${JSON.stringify({
    aa_runs: AA_RUNS,
    looks: LOOKS,
    alpha: ALPHA,
    false_stop_rate: round(falseStops / AA_RUNS),
    naive_false_stop_rate: round(naiveStops / AA_RUNS),
    detect_median_looks: median(detectLooks),
    fixed_horizon_looks: fixedLooks,
    srm_false_alarm_rate: round(srmAlarms / AA_RUNS),
    srm_detect_rate: round(srmDetected / AA_RUNS),
    eval_ms_10_metrics: round(evalMs, 3),
  })}`,
);
