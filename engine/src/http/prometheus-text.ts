/**
 * The Prometheus text exposition format (version 0.0.4) of `GET /metrics`, written by hand:
 * `prom-client` needs Node's `util`, `cluster`, `v8`, `perf_hooks` and `http`, and the HTTP
 * layer is part of the portable core that also runs on Workers and Lambda
 * (scripts/check-portable.mjs). The engine only sets gauges and counters it reads from the
 * store and the drift observer at scrape time, so a formatter is all it needs.
 */

/** Content type of the exposition (what Prometheus expects from a text endpoint). */
export const EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** One sample: label names to values (any string; escaped here) and a number. */
export interface Sample {
  labels?: Record<string, string>;
  value: number;
}

/** One metric family: name (`[a-zA-Z_:][a-zA-Z0-9_:]*`), help line, type, samples. */
export interface MetricFamily {
  name: string;
  help: string;
  type: "gauge" | "counter";
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

const escapeLabel = (v: string) =>
  v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
const escapeHelp = (v: string) => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");

function number(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(v);
}

/**
 * The families as exposition text: `# HELP`, `# TYPE`, then one line per sample; a family
 * without samples still gets its HELP and TYPE lines. Ends with a newline.
 * @throws Error naming the metric or label when a name is not a valid Prometheus name
 *   (a programming error, never input).
 */
export function exposition(families: readonly MetricFamily[]): string {
  const out: string[] = [];
  for (const f of families) {
    if (!NAME.test(f.name)) throw new Error(`[metrics] invalid metric name ${f.name}`);
    out.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
    for (const s of f.samples) {
      const pairs = Object.entries(s.labels ?? {}).map(([k, v]) => {
        if (!LABEL.test(k) || k.startsWith("__")) {
          throw new Error(`[metrics] invalid label name ${k} on ${f.name}`);
        }
        return `${k}="${escapeLabel(v)}"`;
      });
      out.push(`${f.name}${pairs.length ? `{${pairs.join(",")}}` : ""} ${number(s.value)}`);
    }
  }
  return `${out.join("\n")}\n`;
}
