/**
 * What the Prometheus source says when a read fails: every missing-data reason names the query
 * and the error (HTTP status and Prometheus's message, a timeout, an unreachable server), and a
 * failed read is marked as an error (what `consecutive_error_limit` counts), while an empty
 * result is data not there yet. Counts are read as Prometheus gives them (fractional).
 */
import { describe, expect, it } from "vitest";
import { PrometheusMetricsSource } from "../../../engine/src/adapters/prometheus/index.ts";
import { Analysis } from "../../../engine/src/domain/gate/analysis.ts";
import type { GateQuery } from "../../../engine/src/ports/metrics-source.ts";

const analysis = Analysis.parse({
  metrics: [{ name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.01 } }],
});
const query: GateQuery = {
  model: "m1",
  releaseId: "r1",
  analysis,
  candidateImage: "img:new",
  controlImage: "img:old",
  lanes: ["lane-a"],
  sinceMs: 0,
  nowMs: 60_000,
};

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

function source(answer: (promql: string) => Response | Promise<Response>) {
  return new PrometheusMetricsSource({
    baseUrl: "http://prometheus.test",
    timeoutMs: 50,
    fetch: (async (url: string | URL) => {
      const promql = new URL(String(url)).searchParams.get("query") ?? "";
      return answer(promql);
    }) as typeof fetch,
  });
}

describe("prometheus source reasons", () => {
  it("an HTTP error names the metric's query, the status and Prometheus's message", async () => {
    const o = await source(() => json(500, { status: "error", error: "storage is down" })).observe(
      query,
    );
    expect(o.assignments).toEqual({
      missing: expect.stringMatching(
        /^candidate: query `sum\(increase\(baton_arm_units_total\{model="m1",image="img:new"\}\[60s\]\)\)` failed: prometheus 500: storage is down; control: query `[^`]+` failed: prometheus 500: storage is down$/,
      ),
      error: true,
    });
    expect(o.metrics["error-rate"]).toEqual({
      missing: expect.stringMatching(
        /^candidate: query `sum\(increase\(baton_arm_errors_total\{[^`]+\}\[60s\]\)\)` failed: prometheus 500: storage is down$/,
      ),
      error: true,
    });
  });

  it("a timeout and an unreachable server name the query too", async () => {
    const slow = await source(
      (promql) =>
        new Promise<Response>((_, reject) =>
          setTimeout(() => reject(Object.assign(new Error(promql), { name: "TimeoutError" })), 1),
        ),
    ).observe(query);
    expect((slow.metrics["error-rate"] as { missing: string }).missing).toMatch(
      /^candidate: query `sum\(increase\(baton_arm_(errors|requests)_total[^`]+` failed: prometheus timeout after 50 ms$/,
    );
    const down = await source(() => {
      throw new TypeError("fetch failed");
    }).observe(query);
    expect(down.assignments).toMatchObject({
      missing: expect.stringMatching(
        /^candidate: query `[^`]+` failed: prometheus unreachable: fetch failed/,
      ),
      error: true,
    });
  });

  it("an empty result is data not there yet, not an error; fractional counts are kept", async () => {
    const empty = await source(() =>
      json(200, { status: "success", data: { resultType: "vector", result: [] } }),
    ).observe(query);
    expect(empty.assignments).toEqual({
      missing: expect.stringMatching(
        /^candidate: no series yet for `[^`]+`; control: no series yet for `[^`]+`$/,
      ),
      error: false,
    });
    const frac = await source(() =>
      json(200, {
        status: "success",
        data: { resultType: "vector", result: [{ metric: {}, value: [60, "174.4360902255639"] }] },
      }),
    ).observe(query);
    expect(frac.assignments).toEqual({ candidate: 174.4360902255639, control: 174.4360902255639 });
  });
});

describe("prometheus source: quantile metrics", () => {
  it("reads a quantile metric's buckets from the histogram query, `le` labels in ms", async () => {
    const q: GateQuery = {
      ...query,
      analysis: Analysis.parse({
        metrics: [
          { name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.01 } },
          { name: "latency-p99", kind: "quantile", quantile: 0.99, margin: { ms: 100 } },
        ],
      }),
    };
    const o = await source((promql) =>
      promql.includes("baton_arm_latency_ms_bucket")
        ? json(200, {
            status: "success",
            data: {
              resultType: "vector",
              result: [
                { metric: { le: "400" }, value: [60, "990"] },
                { metric: { le: "+Inf" }, value: [60, "1000"] },
              ],
            },
          })
        : json(200, {
            status: "success",
            data: { resultType: "vector", result: [{ metric: {}, value: [60, "10"] }] },
          }),
    ).observe(q);
    expect(o.metrics["latency-p99"]).toEqual({
      candidate: {
        kind: "latency",
        buckets: [
          { le: 400, count: 990 },
          { le: Number.POSITIVE_INFINITY, count: 1000 },
        ],
      },
      control: {
        kind: "latency",
        buckets: [
          { le: 400, count: 990 },
          { le: Number.POSITIVE_INFINITY, count: 1000 },
        ],
      },
    });
  });
});
