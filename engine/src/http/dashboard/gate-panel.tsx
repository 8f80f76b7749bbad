/** @jsxImportSource hono/jsx */
/**
 * The release page's gates (docs/dashboard.md "Gates"): per gated wave, the latest decision
 * and its reason, the counts per arm, the SRM check, a table of each metric's figures, and per
 * metric a server-rendered SVG of its confidence-sequence bounds for Δ = candidate − control
 * (positive is better) over the wave's time against the margin −δ. No script draws anything.
 */

import { INCONCLUSIVE_ASKS } from "../../domain/gate/decide.ts";
import {
  type GateEvidence,
  loadQuantile,
  type StoredQuantile,
} from "../../domain/gate/evidence.ts";
import { type ArmQuantile, bucketWords, quantileLabel } from "../../domain/gate/quantile.ts";
import {
  armsLine,
  type BoundPoint,
  type GateSeries,
  gateSeries,
  pct,
  pp,
  srmLine,
} from "../../domain/gate/summary.ts";
import { waveLabel } from "../../domain/gate/waves.ts";
import { count } from "../../domain/gate/words.ts";
import type { HistoryEntry, Release } from "../../domain/types.ts";
import { type Promotion, promotionsByWave, promotionWords } from "../../views/promotions.ts";
import { State } from "./layout.tsx";

const W = 520;
const H = 170;
const PAD = { l: 62, r: 12, t: 12, b: 30 };

const finite = (v: number | null): v is number => v !== null && Number.isFinite(v);

/**
 * The y range of a chart: wide enough for 0, −δ and the latest bounds (three times the
 * latest half-width), so early looks — whose bounds are very wide — are clipped at the edge
 * rather than flattening the picture.
 */
function yRange(points: readonly BoundPoint[]): [number, number] {
  const last = [...points].reverse().find((p) => finite(p.lower) && finite(p.upper));
  const margin = [...points].reverse().find((p) => finite(p.margin))?.margin ?? 0;
  let lo = Math.min(0, -margin);
  let hi = Math.max(0, -margin);
  if (last && finite(last.lower) && finite(last.upper)) {
    const half = Math.max((last.upper - last.lower) / 2, 1e-4);
    lo = Math.min(lo, last.lower - 2 * half);
    hi = Math.max(hi, last.upper + 2 * half);
  }
  const span = Math.max(hi - lo, 0.002);
  return [Math.max(-1, lo - span * 0.08), Math.min(1, hi + span * 0.08)];
}

/** One metric's bounds over time as an inline SVG (exported for tests). */
export function BoundsChart(props: { name: string; points: readonly BoundPoint[] }) {
  const pts = props.points;
  const t1 = Math.max(1, ...pts.map((p) => p.elapsed_ms));
  const [y0, y1] = yRange(pts);
  const x = (ms: number) => PAD.l + (ms / t1) * (W - PAD.l - PAD.r);
  const y = (v: number) => {
    const c = Math.min(y1, Math.max(y0, v));
    return PAD.t + ((y1 - c) / (y1 - y0)) * (H - PAD.t - PAD.b);
  };
  const xy = (ms: number, v: number) => `${x(ms).toFixed(1)},${y(v).toFixed(1)}`;
  const known = pts.filter((p) => finite(p.lower) && finite(p.upper));
  const band =
    known.length > 0
      ? [
          ...known.map((p) => xy(p.elapsed_ms, p.upper as number)),
          ...[...known].reverse().map((p) => xy(p.elapsed_ms, p.lower as number)),
        ].join(" ")
      : "";
  const line = (f: (p: BoundPoint) => number | null) =>
    pts
      .filter((p) => finite(f(p)))
      .map((p) => xy(p.elapsed_ms, f(p) as number))
      .join(" ");
  // The margin across the whole width: from 0 s at the first look's δ to the latest look.
  const withMargin = pts.filter((p) => finite(p.margin));
  const marginLine =
    withMargin.length > 0
      ? [
          xy(0, -(withMargin[0]?.margin as number)),
          ...withMargin.map((p) => xy(p.elapsed_ms, -(p.margin as number))),
          xy(t1, -(withMargin.at(-1)?.margin as number)),
        ].join(" ")
      : "";
  const last = known.at(-1);
  const lastMargin = [...pts].reverse().find((p) => finite(p.margin))?.margin ?? null;
  const label = last
    ? `${props.name}: after ${Math.round(last.elapsed_ms / 1000)} s, Δ between ${pp(last.lower)} and ${pp(last.upper)}; the margin −δ is ${pp(lastMargin === null ? null : -lastMargin)}`
    : `${props.name}: no bounds yet (the metric is missing)`;
  const single = known.length === 1;
  return (
    <svg
      class="gate-chart"
      role="img"
      aria-label={label}
      viewBox={`0 0 ${W} ${H}`}
      width={W}
      height={H}
      data-metric={props.name}
      style="max-width:100%;height:auto"
    >
      <title>{label}</title>
      <rect
        x={PAD.l}
        y={PAD.t}
        width={W - PAD.l - PAD.r}
        height={H - PAD.t - PAD.b}
        fill="#f6f8fa"
      />
      {band && !single ? (
        <polygon
          data-series="bounds"
          points={band}
          fill="#0969da"
          fill-opacity="0.22"
          stroke="#0969da"
          stroke-width="1"
        />
      ) : null}
      {single && last ? (
        <line
          data-series="bounds"
          x1={x(last.elapsed_ms)}
          x2={x(last.elapsed_ms)}
          y1={y(last.upper as number)}
          y2={y(last.lower as number)}
          stroke="#0969da"
          stroke-width="4"
        />
      ) : null}
      <polyline
        data-series="estimate"
        points={line((p) => p.estimate)}
        fill="none"
        stroke="#0969da"
        stroke-width="1.5"
      />
      <line x1={PAD.l} x2={W - PAD.r} y1={y(0)} y2={y(0)} stroke="#57606a" stroke-width="1" />
      {marginLine ? (
        <polyline
          data-series="margin"
          points={marginLine}
          fill="none"
          stroke="#cf222e"
          stroke-width="1.5"
          stroke-dasharray="5 3"
        />
      ) : null}
      <g font-size="11" fill="#57606a" font-family="system-ui,sans-serif">
        <text x={PAD.l - 4} y={y(0) + 4} text-anchor="end">
          0
        </text>
        {lastMargin !== null ? (
          <text x={PAD.l - 4} y={y(-lastMargin) + 4} text-anchor="end" fill="#cf222e">
            {`−δ ${pp(-lastMargin)}`.replace(" pp", "")}
          </text>
        ) : null}
        <text x={PAD.l - 4} y={PAD.t + 9} text-anchor="end">
          {pp(y1).replace(" pp", "")}
        </text>
        <text x={PAD.l - 4} y={H - PAD.b} text-anchor="end">
          {pp(y0).replace(" pp", "")}
        </text>
        <text x={PAD.l} y={H - 8}>
          0 s
        </text>
        <text
          x={W - PAD.r}
          y={H - 8}
          text-anchor="end"
        >{`${Math.round(t1 / 1000)} s since exposure`}</text>
        <text x={(PAD.l + W - PAD.r) / 2} y={H - 8} text-anchor="middle">
          Δ (pp, positive is better)
        </text>
      </g>
    </svg>
  );
}

function armCell(a: { x: number; n: number } | null) {
  return a ? `${pct(a.n > 0 ? a.x / a.n : null)} (${a.x}/${a.n})` : "—";
}

/**
 * A quantile metric's cells (docs/gate.md "Latency quantiles"): each arm's quantile bucket and
 * requests, its anytime-valid bounds in ms at the buckets' resolution, and the margin.
 */
function quantileCells(stored: StoredQuantile) {
  const q = loadQuantile(stored);
  const label = quantileLabel(q.quantile);
  const arm = (a: ArmQuantile | null) => (a ? `${label} ${bucketWords(a)} (${count(a.n)})` : "—");
  const bounds = (a: ArmQuantile | null) =>
    a
      ? `(${count(a.lower)}, ${a.upper === Number.POSITIVE_INFINITY ? "∞" : count(a.upper)}] ms`
      : "—";
  const margin = q.margin
    ? "ms" in q.margin
      ? `+${count(q.margin.ms)} ms`
      : `+${count(q.margin.percent)}%`
    : "—";
  return (
    <>
      <td>{arm(q.candidate)}</td>
      <td>{arm(q.control)}</td>
      <td>—</td>
      <td>{`candidate ${bounds(q.candidate)}, control ${bounds(q.control)}`}</td>
      <td>{margin}</td>
    </>
  );
}

function OneGate(props: { release: Release; gate: GateSeries; promotion: Promotion | null }) {
  const g = props.gate;
  const label = waveLabel(props.release.manifest, g.wave);
  // Once an operator promoted past it, the gate no longer asks for a promote: it says who did.
  const promoted = g.decision === "inconclusive" ? props.promotion : null;
  const reason = promoted ? g.reason.replace(`; ${INCONCLUSIVE_ASKS}`, "") : g.reason;
  return (
    <div class="panel gate" data-wave={String(g.wave + 1)} data-decision={g.decision}>
      <h3 style="margin:.1rem 0 .3rem;font-size:1rem">
        {`${label[0]?.toUpperCase()}${label.slice(1)} ${g.phase === "watch" ? "guardrail watch" : "gate"}: `}
        <State state={g.decision} />
        <span class="muted small">
          {` · ${g.evaluations} ${g.evaluations === 1 ? "evaluation" : "evaluations"} over ${Math.round(g.elapsed_ms / 1000)} s · α ${g.alpha}${g.generation !== props.release.generation ? ` · generation ${g.generation}` : ""}`}
        </span>
      </h3>
      <p class="gate-reason wrap">{reason}</p>
      {promoted ? (
        <p class="gate-promoted wrap">
          <strong>{`Promoted past this gate: ${promotionWords(promoted)}`}</strong>
          {" (the operator accepted the risk of the inconclusive evidence)"}
        </p>
      ) : null}
      <p class="small">
        <span class="gate-arms">{armsLine(g)}</span>
        {" · "}
        <span class={`gate-srm${g.srm?.mismatch ? " st-fail" : ""}`}>{srmLine(g)}</span>
      </p>
      <div class="scroll">
        <table class="small">
          <thead>
            <tr>
              <th scope="col">Metric</th>
              <th scope="col">Candidate</th>
              <th scope="col">Control</th>
              <th scope="col">Δ</th>
              <th scope="col">Bounds</th>
              <th scope="col">−δ</th>
              <th scope="col">Verdict</th>
            </tr>
          </thead>
          <tbody>
            {g.metrics.map((m) => (
              <tr>
                <td>{`${m.name} (${m.required ? "primary" : "guardrail"})`}</td>
                {m.missing ? (
                  <td colspan={5} class="wrap">{`missing: ${m.missing}`}</td>
                ) : m.quantile ? (
                  quantileCells(m.quantile)
                ) : (
                  <>
                    <td>{armCell(m.candidate)}</td>
                    <td>{armCell(m.control)}</td>
                    <td>{pp(m.estimate)}</td>
                    <td>{`[${pp(m.lower)}, ${pp(m.upper)}]`}</td>
                    <td>{pp(m.margin === null ? null : -m.margin)}</td>
                  </>
                )}
                <td>{m.verdict}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div class="gate-charts" style="display:flex;flex-wrap:wrap;gap:.6rem">
        {g.series.map((s) => (
          <figure style="margin:.3rem 0">
            <BoundsChart name={s.name} points={s.points} />
            <figcaption class="muted small">
              {`${s.name}: confidence sequence for Δ (band) and its estimate (line) at each look; dashed red: the margin −δ. Pass needs the band's bottom above −δ.`}
            </figcaption>
          </figure>
        ))}
      </div>
    </div>
  );
}

/**
 * Every gate of the release, oldest first; nothing when the release has no evidence. `history`
 * says who promoted past an inconclusive gate.
 */
export function GatePanel(props: {
  release: Release;
  evidence: readonly GateEvidence[];
  history: readonly HistoryEntry[];
}) {
  const gates = gateSeries(props.evidence);
  const promotions = promotionsByWave(props.history);
  if (gates.length === 0) return null;
  return (
    <section aria-labelledby="gates">
      <h2 id="gates">Gates</h2>
      <p class="muted small">
        Each gated wave compares the candidate with the baseline serving beside it. Bounds are
        anytime-valid: looking at every evaluation does not inflate false alarms.
      </p>
      {gates.map((g) => (
        <OneGate release={props.release} gate={g} promotion={promotions.get(g.wave) ?? null} />
      ))}
    </section>
  );
}
