/**
 * The engine's `GET /metrics` text (http/prometheus-text.ts, http/metrics.ts): exposition
 * lines, label escaping, invalid names refused, and the families built from releases and
 * drift stats (real Prometheus scrapes it in test/integration/drift-metrics.test.ts).
 */
import { describe, expect, it } from "vitest";
import { engineMetrics } from "../../engine/src/http/metrics.ts";
import { exposition } from "../../engine/src/http/prometheus-text.ts";
import type { DriftStats } from "../../engine/src/service/drift.ts";

describe("prometheus text exposition", () => {
  it("writes HELP, TYPE and one line per sample, escaping label values and help", () => {
    const text = exposition([
      {
        name: "baton_x",
        help: 'a\\b\nc "q"',
        type: "gauge",
        samples: [
          { labels: { lane: 'a"b\\c\nd' }, value: 1.5 },
          { value: Number.NaN },
          { labels: {}, value: Number.POSITIVE_INFINITY },
        ],
      },
      { name: "baton_empty_total", help: "none yet", type: "counter", samples: [] },
    ]);
    expect(text).toBe(
      [
        '# HELP baton_x a\\\\b\\nc "q"',
        "# TYPE baton_x gauge",
        'baton_x{lane="a\\"b\\\\c\\nd"} 1.5',
        "baton_x NaN",
        "baton_x +Inf",
        "# HELP baton_empty_total none yet",
        "# TYPE baton_empty_total counter",
        "",
      ].join("\n"),
    );
  });

  it("refuses invalid metric and label names (a programming error, named)", () => {
    expect(() => exposition([{ name: "baton-x", help: "", type: "gauge", samples: [] }])).toThrow(
      /invalid metric name baton-x/,
    );
    expect(() =>
      exposition([
        { name: "baton_x", help: "", type: "gauge", samples: [{ labels: { __a: "" }, value: 1 }] },
      ]),
    ).toThrow(/invalid label name __a on baton_x/);
  });
});

describe("engine metrics", () => {
  const img = (h: string) => `ghcr.io/acme/m@sha256:${h.repeat(64)}`;
  const stats: DriftStats = {
    intervalMs: 30_000,
    timeoutMs: 5_000,
    observations: 4,
    failures: { timeout: 2, control_plane: 1, store: 0 },
    lastObservedAt: 1_800_000_090_000,
    models: [
      {
        drift: {
          model: "m1",
          lanes: [
            {
              id: "lane-a",
              fields: ["image", "weight"],
              desired: { image: img("a"), weight: 50 },
              observed: { image: img("b"), weight: 40 },
            },
          ],
          mixed: true,
          images: [
            { ref: img("a"), lanes: ["lane-b"], weight: 60 },
            { ref: img("b"), lanes: ["lane-a"], weight: 40 },
          ],
          observed_at: 1_800_000_090_000,
        },
        waves: [
          { wave: 1, images: 2 },
          { wave: 2, images: 1 },
        ],
        weights: [
          { lane: "lane-a", desired: 50, observed: 40 },
          { lane: "lane-b", desired: null, observed: 60 },
        ],
      },
    ],
  };

  it("releases by state (every state), drift per lane and field, desired vs observed", () => {
    const text = exposition(
      engineMetrics({ releases: { running: 2, succeeded: 5 }, drift: stats }),
    );
    const lines = text.split("\n");
    for (const want of [
      'baton_releases{state="running"} 2',
      'baton_releases{state="succeeded"} 5',
      'baton_releases{state="aborted"} 0',
      "baton_drift_observation_interval_seconds 30",
      "baton_drift_observations_total 4",
      'baton_drift_observation_failures_total{reason="timeout"} 2',
      'baton_drift_observation_failures_total{reason="control_plane"} 1',
      'baton_drift_observation_failures_total{reason="store"} 0',
      "baton_drift_last_observed_timestamp_seconds 1800000090",
      'baton_drift_lanes{model="m1"} 1',
      'baton_lane_drift{model="m1",lane="lane-a",field="image"} 1',
      'baton_lane_drift{model="m1",lane="lane-a",field="weight"} 1',
      'baton_lane_weight_percent{model="m1",lane="lane-a",state="desired"} 50',
      'baton_lane_weight_percent{model="m1",lane="lane-a",state="observed"} 40',
      'baton_lane_weight_percent{model="m1",lane="lane-b",state="observed"} 60',
      `baton_lane_image_drift_info{model="m1",lane="lane-a",desired="${img("a")}",observed="${img("b")}"} 1`,
      'baton_mixed_version{model="m1",wave="1"} 1',
      'baton_mixed_version{model="m1",wave="2"} 0',
      'baton_serving_images{model="m1"} 2',
    ]) {
      expect(lines).toContain(want);
    }
    expect(text).not.toContain('lane="lane-b",state="desired"');
  });

  it("without drift detection: releases only; before a first observation: no timestamp", () => {
    const off = exposition(engineMetrics({ releases: {}, drift: null }));
    expect(off).toContain('baton_releases{state="running"} 0');
    expect(off).not.toContain("baton_drift");
    const fresh = exposition(
      engineMetrics({
        releases: {},
        drift: { ...stats, observations: 0, lastObservedAt: null, models: [] },
      }),
    );
    expect(fresh).toContain("# TYPE baton_drift_last_observed_timestamp_seconds gauge");
    expect(fresh).not.toMatch(/^baton_drift_last_observed_timestamp_seconds /m);
  });
});
