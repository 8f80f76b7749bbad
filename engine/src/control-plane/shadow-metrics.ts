/**
 * The shadow router's counters in the Prometheus text exposition format (version 0.0.4), one
 * writer for both reference routers: the HTTP proxy (router-proxy.ts, `GET /metrics`) and the
 * traffic generator (traffic.ts, the control plane's `GET /metrics`). What a shadow gate reads
 * through the Prometheus source (engine/src/adapters/prometheus/templates.ts):
 *
 * - `baton_shadow_units_total`, `baton_shadow_requests_total`, `baton_shadow_errors_total`,
 *   and the histogram `baton_shadow_latency_ms` (`_bucket` with `le` in ms, `_sum`, `_count`);
 * - labelled as the router labels its users' traffic (`model`, `lane`, and `image` where the
 *   router knows it), with `arm="candidate"` on a copy's answer (the shadow lane's) and
 *   `arm="control"` on the routed lane's answer to the same request. Each mirrored request is
 *   counted once in each arm, when both answers are in, so the arms' counts are equal.
 */

/** Escapes a label value for the text format. */
export const escapeLabel = (v: string): string =>
  v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

/** The outcomes one lane gave in one arm on mirrored requests, since the router started. */
export interface ShadowSeries {
  /** Label names to values (`model`, `lane`, `arm`, maybe `image`); escaped here. */
  labels: Record<string, string>;
  /** Mirrored requests answered (one unit each). */
  units: number;
  requests: number;
  /** Answers with status ≥ 500, or none at all. */
  errors: number;
  /** Cumulative counts per bound of `bounds`, then +Inf. */
  buckets: number[];
  latencySumMs: number;
}

/**
 * The series as exposition lines (no trailing newline), each family's HELP and TYPE first even
 * without series. `bounds`: the histogram's upper bounds in ms, without +Inf.
 */
export function shadowMetricsLines(rows: readonly ShadowSeries[], bounds: readonly number[]) {
  const out: string[] = [];
  const labels = (r: ShadowSeries) =>
    Object.entries(r.labels)
      .map(([k, v]) => `${k}="${escapeLabel(v)}"`)
      .join(",");
  const counter = (name: string, help: string, v: (r: ShadowSeries) => number) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
    for (const r of rows) out.push(`${name}{${labels(r)}} ${v(r)}`);
  };
  const side =
    'arm="candidate": the copies\' answers on the shadow lanes; arm="control": the routed lanes\' answers to the same requests.';
  counter(
    "baton_shadow_units_total",
    `Mirrored requests answered, by arm; ${side}`,
    (r) => r.units,
  );
  counter(
    "baton_shadow_requests_total",
    `Answers to mirrored requests; ${side}`,
    (r) => r.requests,
  );
  counter(
    "baton_shadow_errors_total",
    `Answers to mirrored requests with status >= 500 or none; ${side}`,
    (r) => r.errors,
  );
  out.push(
    `# HELP baton_shadow_latency_ms Latency in ms of the answers to mirrored requests; ${side}`,
    "# TYPE baton_shadow_latency_ms histogram",
  );
  for (const r of rows) {
    const l = labels(r);
    bounds.forEach((le, b) => {
      out.push(`baton_shadow_latency_ms_bucket{${l},le="${le}"} ${r.buckets[b] ?? 0}`);
    });
    out.push(`baton_shadow_latency_ms_bucket{${l},le="+Inf"} ${r.requests}`);
    out.push(`baton_shadow_latency_ms_sum{${l}} ${r.latencySumMs.toFixed(3)}`);
    out.push(`baton_shadow_latency_ms_count{${l}} ${r.requests}`);
  }
  return out;
}
