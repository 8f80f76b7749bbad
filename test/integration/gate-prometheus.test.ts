/**
 * The gate read through a real Prometheus server scraping the reference router's traffic
 * generator (GET /metrics): a good candidate passes, a candidate with errors well above the
 * margin fails naming the metric, its bound and the margin, a split other than the planned
 * one fails the SRM check, a candidate with no traffic never passes, and an unreachable
 * Prometheus is missing evidence (wait, never pass). Loops are bounded in count and time.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrometheusMetricsSource } from "../../engine/src/adapters/prometheus/index.ts";
import { armVars, fillTemplate } from "../../engine/src/adapters/prometheus/templates.ts";
import {
  type ControlPlaneHandle,
  startControlPlane,
} from "../../engine/src/control-plane/server.ts";
import { Analysis } from "../../engine/src/domain/gate/analysis.ts";
import { decideGate, type GateEvaluation } from "../../engine/src/domain/gate/decide.ts";
import type { MetricsSource } from "../../engine/src/ports/metrics-source.ts";
import { type PrometheusHandle, startPrometheus } from "../support/prometheus.ts";

const CANDIDATE = `ghcr.io/acme/summarizer@sha256:${"a".repeat(64)}`;
const BASELINE = `ghcr.io/acme/summarizer@sha256:${"b".repeat(64)}`;
/** A hotfix the recipe's previous_image does not name, running on a baseline lane. */
const HOTFIX = `ghcr.io/acme/summarizer@sha256:${"c".repeat(64)}`;

const analysis = Analysis.parse({
  min_samples: 1500,
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

interface Fleet {
  cp: ControlPlaneHandle;
  model: string;
  startedAt: number;
}

/** A router for `model`: lane-a runs the candidate at `candidateWeight`%, lane-b the baseline. */
async function fleet(
  model: string,
  candidateWeight: number,
  candidateErrorRate = 0.01,
): Promise<Fleet> {
  const cp = await startControlPlane({ traffic: { model, seed: 7 } });
  cp.core.seed([
    { id: "lane-a", model, weight: candidateWeight },
    { id: "lane-b", model, weight: 100 - candidateWeight },
  ]);
  const t = cp.traffic!;
  t.setCandidate(CANDIDATE);
  t.setLaneImage("lane-a", CANDIDATE);
  t.setLaneImage("lane-b", BASELINE);
  t.setProfile(CANDIDATE, { errorRate: candidateErrorRate });
  t.start(60, 50); // 1,200 units/s
  return { cp, model, startedAt: Date.now() };
}

/**
 * A router for `model` where the baseline lanes run two images: lane-a the candidate (20%),
 * lane-b the recipe's previous_image (40%), lane-c a hotfix (40%).
 */
async function hotfixFleet(model: string): Promise<Fleet> {
  const cp = await startControlPlane({ traffic: { model, seed: 11 } });
  cp.core.seed([
    { id: "lane-a", model, weight: 20 },
    { id: "lane-b", model, weight: 40 },
    { id: "lane-c", model, weight: 40 },
  ]);
  const t = cp.traffic!;
  t.setCandidate(CANDIDATE);
  t.setLaneImage("lane-a", CANDIDATE);
  t.setLaneImage("lane-b", BASELINE);
  t.setLaneImage("lane-c", HOTFIX);
  t.setProfile(CANDIDATE, { errorRate: 0.01 });
  t.start(60, 50);
  return { cp, model, startedAt: Date.now() };
}

/** A router whose lane ids differ only where a regex `.` would match: lane.a and laneXa. */
async function dotFleet(model: string): Promise<Fleet> {
  const cp = await startControlPlane({ traffic: { model, seed: 13 } });
  cp.core.seed([
    { id: "lane.a", model, weight: 20 },
    { id: "laneXa", model, weight: 80 },
  ]);
  const t = cp.traffic!;
  t.setCandidate(CANDIDATE);
  t.setLaneImage("lane.a", CANDIDATE);
  t.setLaneImage("laneXa", BASELINE);
  t.start(60, 50);
  return { cp, model, startedAt: Date.now() };
}

/**
 * Evaluates every second until a decision other than wait (at most 60 looks). `controlLanes`:
 * the observed baseline's lanes (absent: the control is `controlImage`).
 */
async function gate(
  source: MetricsSource,
  f: Fleet,
  plannedShare = 0.2,
  maxLooks = 60,
  controlLanes?: string[],
): Promise<GateEvaluation[]> {
  const seen: GateEvaluation[] = [];
  for (let look = 0; look < maxLooks; look++) {
    const now = Date.now();
    const obs = await source.observe({
      model: f.model,
      releaseId: "rel_1",
      analysis,
      candidateImage: CANDIDATE,
      controlImage: BASELINE,
      lanes: ["lane-a", "lane-b", "lane-c"],
      ...(controlLanes ? { controlLanes } : {}),
      sinceMs: f.startedAt,
      nowMs: now,
    });
    const e = decideGate(
      {
        analysis,
        plannedCandidateShare: plannedShare,
        elapsedMs: now - f.startedAt,
        phase: "gate",
      },
      obs,
    );
    seen.push(e);
    if (e.decision !== "wait") return seen;
    await new Promise((r) => setTimeout(r, 1000));
  }
  return seen;
}

describe("gate through a real Prometheus", () => {
  let prom: PrometheusHandle;
  const fleets: Record<string, Fleet> = {};
  let source: PrometheusMetricsSource;

  beforeAll(async () => {
    fleets.good = await fleet("good", 20);
    fleets.bad = await fleet("bad", 20, 0.2);
    fleets.skew = await fleet("skew", 35);
    fleets.dark = await fleet("dark", 0);
    fleets.hotfix = await hotfixFleet("hotfix");
    fleets.dots = await dotFleet("dots");
    prom = await startPrometheus(Object.values(fleets).map((f) => `127.0.0.1:${f.cp.port}`));
    source = new PrometheusMetricsSource({ baseUrl: prom.url, timeoutMs: 2000 });
  }, 60_000);

  afterAll(async () => {
    await prom?.close();
    for (const f of Object.values(fleets)) await f.cp.close();
  });

  it("passes a candidate as good as the baseline, after waiting for the first scrapes", async () => {
    const looks = await gate(source, fleets.good!);
    const last = looks.at(-1)!;
    expect(last.decision, last.reason).toBe("pass");
    expect(looks.some((e) => e.decision === "wait")).toBe(true);
    // The router really served both images.
    const text = fleets.good!.cp.traffic!.metricsText();
    expect(text).toMatch(
      new RegExp(
        `baton_arm_requests_total\\{model="good",lane="lane-a",image="${CANDIDATE}",arm="candidate"\\} [1-9]`,
      ),
    );
    expect(last.arms!.candidate).toBeGreaterThan(1000);
  }, 90_000);

  it("fails a candidate with errors well above the margin, naming metric, bound and margin", async () => {
    const last = (await gate(source, fleets.bad!)).at(-1)!;
    expect(last.decision).toBe("fail");
    expect(last.reason).toMatch(
      /^error-rate: candidate \d+\.\d+% vs control \d+\.\d+%, allowed \+2\.0 points: worse \(at least/,
    );
  }, 90_000);

  it("fails a split other than the planned one on the SRM check", async () => {
    const last = (await gate(source, fleets.skew!)).at(-1)!;
    expect(last.decision).toBe("fail");
    expect(last.reason).toMatch(
      /^sample ratio mismatch: candidate \d+\.\d+% of units vs planned 20\.00%/,
    );
  }, 90_000);

  it("counts a baseline lane running a hotfix (not previous_image) as control", async () => {
    const f = fleets.hotfix!;
    const looks = await gate(source, f, 0.2, 60, ["lane-b", "lane-c"]);
    const last = looks.at(-1)!;
    expect(last.decision, last.reason).toBe("pass");
    // The router really served the hotfix on lane-c, and Prometheus holds its series.
    expect(f.cp.traffic!.metricsText()).toMatch(
      new RegExp(
        `baton_arm_units_total\\{model="hotfix",lane="lane-c",image="${HOTFIX}",arm="control"\\} [1-9]`,
      ),
    );
    const window = `${Math.ceil((Date.now() - f.startedAt) / 1000)}s`;
    const now = Date.now() / 1000;
    const hot = await source.query(
      `sum(increase(baton_arm_units_total{model="hotfix",image="${HOTFIX}"}[${window}]))`,
      now,
    );
    const control = await source.query(
      `sum(increase(baton_arm_units_total{model="hotfix",lane=~"lane-b|lane-c",image!="${CANDIDATE}"}[${window}]))`,
      now,
    );
    const v = (r: typeof hot) => (r.ok ? Number(r.samples[0]?.value[1]) : Number.NaN);
    expect(v(hot)).toBeGreaterThan(0);
    // The hotfix is a large share of what the control counted (it serves half the control).
    expect(v(hot) / v(control)).toBeGreaterThan(0.3);
    expect(last.arms!.control).toBeGreaterThan(last.arms!.candidate * 3);
    // Read as previous_image alone (no observed baseline), the control misses the hotfix's
    // half and the split looks wrong: the SRM check fails it.
    const assumed = (await gate(source, f, 0.2, 60)).at(-1)!;
    expect(assumed.decision).toBe("fail");
    expect(assumed.reason).toMatch(/sample ratio mismatch/);
  }, 150_000);

  it("$lane is regex-escaped: lane.a matches only lane.a, never laneXa", async () => {
    const f = fleets.dots!;
    const v = (r: Awaited<ReturnType<typeof source.query>>) =>
      r.ok ? Number(r.samples[0]?.value[1] ?? Number.NaN) : Number.NaN;
    const template = 'sum(increase(baton_arm_units_total{model="$model",lane=~"$lane"}[$window]))';
    // Bounded: wait for both lanes' series to be scraped (at most 60 looks, one a second).
    for (let look = 0; look < 60; look++) {
      const window = `${Math.ceil((Date.now() - f.startedAt) / 1000) + 5}s`;
      // Evaluated 5 s back, where every scrape (1 s apart) has landed: the queries below are
      // sent one after another, and a scrape landing between two of them would move one alone.
      const now = Date.now() / 1000 - 5;
      const vars = armVars(
        "candidate",
        {
          model: "dots",
          releaseId: "rel_1",
          candidateImage: CANDIDATE,
          controlImage: BASELINE,
          lanes: ["lane.a"],
        },
        window,
      );
      const escaped = fillTemplate(template, vars);
      expect(escaped).toContain('lane=~"lane\\\\.a"');
      const [mine, other, unescaped] = await Promise.all([
        source.query(escaped, now),
        source.query(
          `sum(increase(baton_arm_units_total{model="dots",lane="laneXa"}[${window}]))`,
          now,
        ),
        source.query(
          `sum(increase(baton_arm_units_total{model="dots",lane=~"lane.a"}[${window}]))`,
          now,
        ),
      ]);
      if (!(v(mine) > 0 && v(other) > 0)) {
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      const only = await source.query(
        `sum(increase(baton_arm_units_total{model="dots",lane="lane.a"}[${window}]))`,
        now,
      );
      // The escaped template counts lane.a alone; the unescaped regex would add laneXa's.
      // Within 0.5% (a scrape delayed past the 5 s on a loaded machine), far less than laneXa's
      // share that tells the two apart.
      expect(v(other)).toBeGreaterThan(v(only) * 0.05);
      expect(Math.abs(v(mine) - v(only))).toBeLessThanOrEqual(v(only) * 0.005);
      expect(Math.abs(v(unescaped) - (v(only) + v(other)))).toBeLessThanOrEqual(
        (v(only) + v(other)) * 0.005,
      );
      return;
    }
    throw new Error("[test] Prometheus never held both lanes' series in 60 s");
  }, 90_000);

  it("never passes a candidate that gets no traffic", async () => {
    const looks = await gate(source, fleets.dark!, 0.2, 15);
    expect(looks.every((e) => e.decision !== "pass")).toBe(true);
  }, 90_000);

  it("an unreachable Prometheus is missing evidence: wait, never pass", async () => {
    const down = new PrometheusMetricsSource({ baseUrl: "http://127.0.0.1:9", timeoutMs: 500 });
    const looks = await gate(down, fleets.good!, 0.2, 2);
    expect(looks.every((e) => e.decision === "wait")).toBe(true);
    expect(looks[0]!.reason).toMatch(
      /^insufficient data: the unit counts could not be read: candidate: query `sum\(increase\(baton_arm_units_total\{model="[^`]+"\}\[\d+s\]\)\)` failed: prometheus unreachable/,
    );
  }, 30_000);
});
