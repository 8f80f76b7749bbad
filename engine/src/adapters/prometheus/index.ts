/**
 * Prometheus adapter of the metrics-source port: the instant-query HTTP API
 * (`GET /api/v1/query`, https://prometheus.io/docs/prometheus/latest/querying/api/), one
 * query per metric, arm and role, templates filled with the model, arm, images, release, lanes,
 * the observed baseline's lanes and the window since the wave began (the control arm is what the
 * baseline lanes served with any image but the candidate's; see templates.ts). A shadow phase
 * reads the router's shadow series (the copies' answers as the candidate arm, the routed lanes'
 * answers to the same requests as the control) through the shadow templates. A timeout, an HTTP
 * or PromQL error, an empty result or a NaN value is missing evidence naming the query; it never
 * throws and never passes.
 */
import type { GateObservations, Missing } from "../../domain/gate/decide.ts";
import type { ArmObservation, Bucket } from "../../domain/gate/observations.ts";
import type { GateQuery, MetricsSource } from "../../ports/metrics-source.ts";
import {
  armVars,
  fillTemplate,
  metricTemplates,
  SHADOW_UNITS_TEMPLATE,
  type TemplateVars,
  UNITS_TEMPLATE,
} from "./templates.ts";

export interface PrometheusOptions {
  /** e.g. `http://127.0.0.1:9090` (no trailing slash needed). */
  baseUrl: string;
  /** Per-query timeout, ms (default 2000). */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}
type QueryResult = { ok: true; samples: Sample[] } | { ok: false; reason: string };

/** A failed read names its query and the error: what a person needs to fix it. */
const failed = (promql: string, reason: string): Missing => ({
  missing: `query \`${promql}\` failed: ${reason}`,
  error: true,
});

/** See the module comment. */
export class PrometheusMetricsSource implements MetricsSource {
  private readonly base: string;
  private readonly timeoutMs: number;
  private readonly fetchFn: typeof fetch;

  constructor(o: PrometheusOptions) {
    this.base = o.baseUrl.replace(/\/+$/, "");
    this.timeoutMs = o.timeoutMs ?? 2000;
    this.fetchFn = o.fetch ?? fetch;
  }

  /** One instant query at `timeS` (epoch seconds). Never throws. */
  async query(promql: string, timeS: number): Promise<QueryResult> {
    const url = `${this.base}/api/v1/query?${new URLSearchParams({ query: promql, time: String(timeS) })}`;
    try {
      // A redirect is not followed (it could lead anywhere, e.g. to a metadata service).
      const res = await this.fetchFn(url, {
        signal: AbortSignal.timeout(this.timeoutMs),
        redirect: "manual",
      });
      if (res.status >= 300 && res.status < 400) {
        await res.body?.cancel();
        return {
          ok: false,
          reason: `prometheus answered a redirect (${res.status} to ${res.headers.get("location") ?? "?"}), which is not followed; set BATON_PROMETHEUS_URL to the address Prometheus answers at`,
        };
      }
      const body = (await res.json().catch(() => null)) as {
        status?: string;
        error?: string;
        data?: { resultType?: string; result?: unknown };
      } | null;
      if (!res.ok || body?.status !== "success") {
        return {
          ok: false,
          reason: `prometheus ${res.status}: ${body?.error ?? "no JSON answer"}`,
        };
      }
      if (body.data?.resultType !== "vector" || !Array.isArray(body.data.result)) {
        return {
          ok: false,
          reason: `prometheus answered a ${body.data?.resultType}, not a vector`,
        };
      }
      return { ok: true, samples: body.data.result as Sample[] };
    } catch (e) {
      const err = e as Error;
      return {
        ok: false,
        reason:
          err.name === "TimeoutError"
            ? `prometheus timeout after ${this.timeoutMs} ms`
            : `prometheus unreachable: ${err.message}`,
      };
    }
  }

  private async scalar(promql: string, timeS: number): Promise<number | Missing> {
    const r = await this.query(promql, timeS);
    if (!r.ok) return failed(promql, r.reason);
    if (r.samples.length === 0) return { missing: `no series yet for \`${promql}\`` };
    if (r.samples.length > 1)
      return {
        missing: `${r.samples.length} series for \`${promql}\`; sum them in the query`,
        error: true,
      };
    const v = Number((r.samples[0] as Sample).value[1]);
    return Number.isFinite(v)
      ? v
      : { missing: `value ${(r.samples[0] as Sample).value[1]} for \`${promql}\`` };
  }

  private async buckets(promql: string, timeS: number): Promise<Bucket[] | Missing> {
    const r = await this.query(promql, timeS);
    if (!r.ok) return failed(promql, r.reason);
    if (r.samples.length === 0) return { missing: `no series yet for \`${promql}\`` };
    const out: Bucket[] = [];
    for (const s of r.samples) {
      const le = s.metric.le;
      if (le === undefined)
        return { missing: `a series without an le label for \`${promql}\``, error: true };
      out.push({
        le: le === "+Inf" ? Number.POSITIVE_INFINITY : Number(le),
        count: Number(s.value[1]),
      });
    }
    return out;
  }

  async observe(q: GateQuery): Promise<GateObservations> {
    const timeS = q.nowMs / 1000;
    const windowS = Math.max(1, Math.ceil((q.nowMs - q.sinceMs) / 1000));
    const vars = (arm: "candidate" | "control"): TemplateVars => armVars(arm, q, `${windowS}s`);
    const arms = ["candidate", "control"] as const;
    // A shadow phase reads the mirrored requests: the copies' answers beside the baseline's.
    const shadow = q.shadow === true;
    const units = shadow ? SHADOW_UNITS_TEMPLATE : UNITS_TEMPLATE;
    const [uc, ub] = (await Promise.all(
      arms.map((a) => this.scalar(fillTemplate(units, vars(a)), timeS)),
    )) as [number | Missing, number | Missing];
    const assignments =
      typeof uc === "number" && typeof ub === "number"
        ? { candidate: uc, control: ub }
        : {
            missing: [uc, ub]
              .map((v, i) => (typeof v === "number" ? null : `${arms[i]}: ${v.missing}`))
              .filter(Boolean)
              .join("; "),
            error: [uc, ub].some((v) => typeof v !== "number" && v.error === true),
          };
    const metrics: GateObservations["metrics"] = {};
    await Promise.all(
      q.analysis.metrics.map(async (m) => {
        const t = metricTemplates(m, shadow);
        const perArm = await Promise.all(
          arms.map(async (a): Promise<ArmObservation | Missing> => {
            if (m.kind === "latency" || m.kind === "quantile") {
              const b = await this.buckets(fillTemplate(t.buckets as string, vars(a)), timeS);
              return Array.isArray(b) ? { kind: "latency", buckets: b } : b;
            }
            const [x, n] = await Promise.all([
              this.scalar(fillTemplate(t.numerator as string, vars(a)), timeS),
              this.scalar(fillTemplate(t.denominator as string, vars(a)), timeS),
            ]);
            if (typeof x !== "number") return x;
            if (typeof n !== "number") return n;
            return { kind: "ratio", counts: { numerator: x, denominator: n } };
          }),
        );
        const [c, b] = perArm as [ArmObservation | Missing, ArmObservation | Missing];
        metrics[m.name] =
          "missing" in c
            ? { missing: `candidate: ${c.missing}`, error: c.error === true }
            : "missing" in b
              ? { missing: `control: ${b.missing}`, error: b.error === true }
              : { candidate: c, control: b };
      }),
    );
    return { assignments, metrics };
  }
}
