/**
 * The metric families of `GET /metrics` (docs/drift.md "Metrics"): releases by state, read
 * from the store at scrape time, and the drift observer's counters and last successful
 * observation (service/drift.ts), which live in the engine process. Pure: the route reads
 * the sources and passes them in.
 */
import { RELEASE_STATES, type ReleaseState } from "../domain/states.ts";
import type { DriftStats } from "../service/drift.ts";
import type { MetricFamily } from "./prometheus-text.ts";

/** What one scrape reads. */
export interface MetricsInput {
  /** Releases per state (`Store.countReleases`). */
  releases: Partial<Record<ReleaseState, number>>;
  /** The drift observer's stats; null when drift detection is off (no drift families then). */
  drift: DriftStats | null;
}

const s = (ms: number) => ms / 1000;

/** The families, in a fixed order; label values are model, lane and image names as stored. */
export function engineMetrics(i: MetricsInput): MetricFamily[] {
  const out: MetricFamily[] = [
    {
      name: "baton_releases",
      help: "Releases the store holds, by state (every state listed, 0 when none).",
      type: "gauge",
      samples: RELEASE_STATES.map((state) => ({
        labels: { state },
        value: i.releases[state] ?? 0,
      })),
    },
  ];
  const d = i.drift;
  if (!d) return out;
  const models = [...d.models].sort((a, b) => a.drift.model.localeCompare(b.drift.model));
  out.push(
    {
      name: "baton_drift_observation_interval_seconds",
      help: "Drift observation interval (BATON_DRIFT_INTERVAL_MS), seconds.",
      type: "gauge",
      samples: [{ value: s(d.intervalMs) }],
    },
    {
      name: "baton_drift_observations_total",
      help: "Drift observations that read the control plane, since the engine started.",
      type: "counter",
      samples: [{ value: d.observations }],
    },
    {
      name: "baton_drift_observation_failures_total",
      help: "Drift observations that could not read, by reason: timeout (the control plane did not answer in time), control_plane (it refused or was unreachable), store.",
      type: "counter",
      samples: (["timeout", "control_plane", "store"] as const).map((reason) => ({
        labels: { reason },
        value: d.failures[reason],
      })),
    },
    {
      name: "baton_drift_last_observed_timestamp_seconds",
      help: "When the last successful drift observation ended (Unix time, seconds); absent before the first.",
      type: "gauge",
      samples: d.lastObservedAt === null ? [] : [{ value: s(d.lastObservedAt) }],
    },
    {
      name: "baton_drift_lanes",
      help: "Lanes of a model that differ from what its last ended releases left them at (last successful observation; models with a release in flight are absent).",
      type: "gauge",
      samples: models.map((m) => ({
        labels: { model: m.drift.model },
        value: m.drift.lanes.length,
      })),
    },
    {
      name: "baton_lane_drift",
      help: "1 for each drifted field (weight, image, excluded, capabilities) of a lane.",
      type: "gauge",
      samples: models.flatMap((m) =>
        m.drift.lanes.flatMap((l) =>
          l.fields.map((field) => ({
            labels: { model: m.drift.model, lane: l.id, field },
            value: 1,
          })),
        ),
      ),
    },
    {
      name: "baton_lane_weight_percent",
      help: "Traffic weight of a lane in percent: desired (as its last release left it; absent when never set) and observed (the control plane).",
      type: "gauge",
      samples: models.flatMap((m) =>
        m.weights.flatMap((w) => [
          ...(w.desired === null
            ? []
            : [
                {
                  labels: { model: m.drift.model, lane: w.lane, state: "desired" },
                  value: w.desired,
                },
              ]),
          { labels: { model: m.drift.model, lane: w.lane, state: "observed" }, value: w.observed },
        ]),
      ),
    },
    {
      name: "baton_lane_image_drift_info",
      help: "1 for each lane whose image drifted, with the desired and observed image as labels.",
      type: "gauge",
      samples: models.flatMap((m) =>
        m.drift.lanes
          .filter((l) => l.fields.includes("image"))
          .map((l) => ({
            labels: {
              model: m.drift.model,
              lane: l.id,
              desired: String(l.desired.image ?? ""),
              observed: String(l.observed.image ?? ""),
            },
            value: 1,
          })),
      ),
    },
    {
      name: "baton_mixed_version",
      help: "1 when the lanes of one wave run more than one image outside a release, else 0 (wave 0: lanes in no wave).",
      type: "gauge",
      samples: models.flatMap((m) =>
        m.waves.map((w) => ({
          labels: { model: m.drift.model, wave: String(w.wave) },
          value: w.images > 1 ? 1 : 0,
        })),
      ),
    },
    {
      name: "baton_serving_images",
      help: "Distinct images serving traffic (weight > 0, not excluded) for a model outside a release; more than 1 is the dashboard's mixed-versions flag.",
      type: "gauge",
      samples: models.map((m) => ({
        labels: { model: m.drift.model },
        value: m.drift.images.length,
      })),
    },
  );
  return out;
}
