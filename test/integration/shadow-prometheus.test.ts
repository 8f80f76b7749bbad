/**
 * A shadow gate read through a real Prometheus server scraping the reference router (the HTTP
 * proxy that mirrors shadow requests, `GET /metrics`): users' requests go through the router
 * over HTTP to lane stand-ins that share no code with it; the router mirrors half of them to the
 * shadow-safe candidate lane and exports the copies' answers beside the baseline's answers to
 * the same requests as `baton_shadow_*`. The gate passes a candidate that answers the copies as
 * well as the baseline, and fails one that errors on them, while the candidate answers no user
 * (exposure 0%). Loops are bounded in count and time.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrometheusMetricsSource } from "../../engine/src/adapters/prometheus/index.ts";
import type { LaneState } from "../../engine/src/control-plane/model.ts";
import {
  type RouterProxyHandle,
  startRouterProxy,
} from "../../engine/src/control-plane/router-proxy.ts";
import { Analysis } from "../../engine/src/domain/gate/analysis.ts";
import { decideGate, type GateEvaluation } from "../../engine/src/domain/gate/decide.ts";
import { type PrometheusHandle, startPrometheus } from "../support/prometheus.ts";

const CANDIDATE = `ghcr.io/acme/summarizer@sha256:${"a".repeat(64)}`;
const BASELINE = `ghcr.io/acme/summarizer@sha256:${"b".repeat(64)}`;

const analysis = Analysis.parse({
  min_samples: 300,
  bake_ms: 3000,
  interval_ms: 1000,
  max_wait_ms: 60_000,
  metrics: [
    { name: "error-rate", kind: "ratio", better: "lower", margin: { absolute: 0.02 } },
    {
      name: "slow-requests",
      kind: "latency",
      threshold_ms: 250,
      margin: { absolute: 0.05 },
      required: false,
    },
  ],
});

/** Two models on one router: `healthy`'s candidate answers copies as the baseline does, `broken`'s with 500. */
const MODELS = ["healthy", "broken"] as const;
type Model = (typeof MODELS)[number];

const lane = (id: string, model: string, weight: number): LaneState =>
  ({
    id,
    model,
    weight,
    excluded: false,
    capabilities: [],
    advertised: false,
    updated_at: 0,
  }) as LaneState;

/** What one lane stand-in received: users' requests and mirrored copies. */
interface Received {
  plain: number;
  mirrored: number;
}

describe("shadow gate through a real Prometheus", () => {
  const servers: http.Server[] = [];
  const received = new Map<string, Received>();
  const endpoints = new Map<string, string>();
  /** Which lane answered each user, per model. */
  const answeredBy: Record<Model, Record<string, number>> = { healthy: {}, broken: {} };
  let router: RouterProxyHandle;
  let prom: PrometheusHandle;
  let source: PrometheusMetricsSource;
  let startedAt = 0;
  let driving = true;
  let drivers: Promise<void>[] = [];

  /** A lane stand-in answering 200, or `copyStatus` to a mirrored copy, counting what it got. */
  async function laneServer(id: string, copyStatus = 200): Promise<void> {
    const got: Received = { plain: 0, mirrored: 0 };
    received.set(id, got);
    const server = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        const copy = req.headers["baton-shadow"] === "1";
        if (copy) got.mirrored++;
        else got.plain++;
        res.writeHead(copy ? copyStatus : 200, { "content-type": "text/plain" });
        res.end(id);
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    servers.push(server);
    endpoints.set(id, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  }

  /** Sends users' requests of `model` through the router until stopped, about 25 a second. */
  async function drive(model: Model): Promise<void> {
    for (let i = 0; driving && i < 100_000; i++) {
      const res = await fetch(`${router.url}/route/${model}/v1/summarize`, {
        method: "POST",
        body: `{"text":"request ${i}"}`,
      }).catch(() => null);
      if (res) {
        await res.text();
        const by = res.headers.get("baton-lane") ?? "none";
        answeredBy[model][by] = (answeredBy[model][by] ?? 0) + 1;
      }
      await new Promise((r) => setTimeout(r, 40));
    }
  }

  beforeAll(async () => {
    for (const m of MODELS) {
      await laneServer(`${m}-base`);
      await laneServer(`${m}-cand`, m === "broken" ? 500 : 200);
    }
    const lanes = (model: string) => [
      lane(`${model}-base`, model, 100),
      lane(`${model}-cand`, model, 0),
    ];
    router = await startRouterProxy({
      lanes,
      upstream: (id) => endpoints.get(id) ?? null,
      release: () => "r1",
      shadow: {
        caps: () => ({ share: 50, rate_per_s: 1000 }),
        safe: (_, id) => id.endsWith("-cand"),
        candidate: (_, id) => id.endsWith("-cand"),
        authorize: () => true,
      },
    });
    prom = await startPrometheus([new URL(router.url).host]);
    source = new PrometheusMetricsSource({ baseUrl: prom.url, timeoutMs: 2000 });
    startedAt = Date.now();
    // Two users' streams per model.
    drivers = MODELS.flatMap((m) => [drive(m), drive(m)]);
  }, 60_000);

  afterAll(async () => {
    driving = false;
    await Promise.all(drivers);
    await prom?.close();
    await router?.close();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    }
  });

  /** Evaluates the shadow gate of `model` every second until a decision other than wait (≤ 60 looks). */
  async function gate(model: Model): Promise<GateEvaluation[]> {
    const seen: GateEvaluation[] = [];
    for (let look = 0; look < 60; look++) {
      const now = Date.now();
      const obs = await source.observe({
        model,
        releaseId: "r1",
        analysis,
        candidateImage: CANDIDATE,
        controlImage: BASELINE,
        lanes: [`${model}-base`, `${model}-cand`],
        controlLanes: [`${model}-base`],
        shadow: true,
        sinceMs: startedAt,
        nowMs: now,
      });
      const e = decideGate(
        { analysis, plannedCandidateShare: 0.5, elapsedMs: now - startedAt, phase: "gate" },
        obs,
      );
      seen.push(e);
      if (e.decision !== "wait") return seen;
      await new Promise((r) => setTimeout(r, 1000));
    }
    return seen;
  }

  /** Exposure at the router and the lanes: every user was answered by the baseline lane. */
  function expectNoUserExposed(model: Model): void {
    const by = answeredBy[model];
    expect(Object.keys(by)).toEqual([`${model}-base`]);
    expect(received.get(`${model}-cand`)?.plain).toBe(0);
    expect(received.get(`${model}-cand`)?.mirrored).toBeGreaterThan(0);
    expect(router.counts(model).lanes[`${model}-cand`]).toBeUndefined();
  }

  it("passes a candidate that answers the mirrored requests as well as the baseline, with exposure 0%", async () => {
    const looks = await gate("healthy");
    const last = looks.at(-1)!;
    expect(last.decision, last.reason).toBe("pass");
    expect(looks.some((e) => e.decision === "wait")).toBe(true);
    // Each mirrored request is counted once per arm. The arms' counters move a moment apart, so a
    // scrape can land between the two answers to one request: the rates agree within 1%, not exactly.
    expect(last.arms!.candidate).toBeGreaterThanOrEqual(300);
    expect(Math.abs(last.arms!.candidate - last.arms!.control)).toBeLessThan(
      last.arms!.control * 0.01,
    );
    expectNoUserExposed("healthy");
  }, 90_000);

  it("stops a candidate that errors on the mirrored requests, naming the metric, with exposure 0%", async () => {
    const last = (await gate("broken")).at(-1)!;
    expect(last.decision).toBe("fail");
    expect(last.reason).toMatch(
      /^error-rate: candidate 100(\.0+)?% vs control 0(\.0+)?%, allowed \+2\.0 points: worse \(at least/,
    );
    // The router exported what the gate read: the copies' errors on the candidate's lane.
    const text = await (await fetch(`${router.url}/metrics`)).text();
    expect(text).toMatch(
      /baton_shadow_errors_total\{model="broken",lane="broken-cand",arm="candidate"\} [1-9]/,
    );
    expect(text).toMatch(
      /baton_shadow_errors_total\{model="broken",lane="broken-base",arm="control"\} 0/,
    );
    expectNoUserExposed("broken");
    // The users got the baseline's answers: none of them an error.
    expect(router.counts("broken").shadow?.baseline.errors).toBe(0);
  }, 90_000);
});
