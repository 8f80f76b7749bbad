/**
 * Performs a `verify` row (docs/lifecycle.md "Recovery verification"): reads what each lane of
 * the release is now, the control plane's lanes (weight, `excluded`, capabilities) and, for the
 * lanes a runner step touched, the lane's machine: asked now through the target probe
 * (`deploy.sh smoke` over SSH) when the engine can reach the machines, else the target's own
 * report in the lane's last runner step result (its image and health check as the runner's
 * callback carried them). The reading goes back as the `verified` event; judging it is the
 * transition's. Reads only.
 */
import { isProbeStep } from "../../domain/prerequisites.ts";
import { reportedImages } from "../../domain/result-evidence.ts";
import type { Release, ReleaseEvent, StepRun, VerifyEffect } from "../../domain/types.ts";
import type {
  LaneReading,
  TargetObservation,
  VerificationReading,
} from "../../domain/verification.ts";
import type { AttemptResult, OutboxRow } from "../../ports/store.ts";
import type { TargetProbe } from "../../ports/target-probe.ts";
import { withdrawnOf } from "../use-cases/kill-switch.ts";
import type { PerformContext } from "./context.ts";

/** Lanes asked at their machines at once, at most (each bounded by the probe's deadlines). */
const TARGETS_IN_FLIGHT_MAX = 8;

/** Reads the release's lanes once and returns the reading as the `verified` event. */
export async function performVerify(
  ctx: PerformContext,
  row: OutboxRow,
  e: VerifyEffect,
): Promise<ReleaseEvent> {
  const { store, controlPlane, clock } = ctx.deps;
  const release = await store.getRelease(row.release_id);
  if (!release) {
    throw new Error(`[engine] release ${row.release_id} of outbox row ${row.id} is gone`);
  }
  const probe = ctx.deps.targetProbe?.observe ? ctx.deps.targetProbe : null;
  const read = controlPlane.lanes
    ? await controlPlane.lanes(release.manifest.model)
    : ({ ok: false, message: "this control plane cannot list its lanes" } as const);
  const results = probe ? [] : await store.listAttemptResults(release.id);
  const targets = await mapBounded(e.lanes, TARGETS_IN_FLIGHT_MAX, async (want) => {
    if (!want.target)
      return { target: null, gap: "no runner step of the release took effect on it" };
    if (!want.image) return { target: null, gap: "the image it should run is unknown" };
    if (probe)
      return {
        target: await observed(probe, release, want.id, want.image, clock.now()),
        gap: null,
      };
    return runnerReport(release, want.id, results);
  });
  const lanes: LaneReading[] = e.lanes.map((want, i) => {
    const cp = read.ok ? read.lanes.find((l) => l.id === want.id) : undefined;
    return {
      id: want.id,
      control_plane: cp
        ? {
            weight: cp.weight,
            excluded: cp.excluded,
            capabilities: [...cp.capabilities],
            advertised: cp.advertised,
          }
        : null,
      target: targets[i]?.target ?? null,
      target_gap: targets[i]?.gap ?? null,
    };
  });
  const withdrawn = await withdrawnOf(store, release.manifest.model);
  const reading: VerificationReading = {
    at: clock.now(),
    by: `control plane lanes + ${probe ? "target probe (deploy.sh smoke over SSH)" : "the lanes' last runner reports"}`,
    read_error: read.ok ? null : read.message,
    lanes,
    ...(withdrawn.length ? { withdrawn } : {}),
  };
  return { type: "verified", seq: e.seq, generation: e.generation, reading };
}

async function observed(
  probe: TargetProbe,
  release: Release,
  laneId: string,
  image: string,
  at: number,
): Promise<TargetObservation> {
  const lane = release.manifest.lanes.find((l) => l.id === laneId);
  if (!lane || !probe.observe) {
    return {
      source: "target_probe",
      at,
      reached: false,
      running: null,
      image: null,
      health: null,
      message: `lane ${laneId} is not a lane of ${release.id}'s manifest`,
      step_run_id: null,
    };
  }
  const answer = await probe.observe(lane, image);
  return { source: "target_probe", at, step_run_id: null, ...answer };
}

/** The health check's verdict in a runner result's checks.json (`health`), or null. */
function healthOf(checks: unknown): "pass" | "fail" | null {
  if (!Array.isArray(checks)) return null;
  const c = checks.find(
    (x) => x && typeof x === "object" && (x as { name?: unknown }).name === "health",
  ) as { status?: unknown } | undefined;
  if (!c || typeof c.status !== "string") return null;
  if (["ok", "passed", "pass", "succeeded"].includes(c.status)) return "pass";
  if (["failed", "fail", "timeout"].includes(c.status)) return "fail";
  return null;
}

/**
 * The target's own report of `laneId` in the release: the latest result of the lane's last
 * runner step run that may have taken effect (its running image and health check). A step
 * run an operator resolved by hand has no report of what was done: a gap.
 */
function runnerReport(
  release: Release,
  laneId: string,
  results: readonly AttemptResult[],
): { target: TargetObservation | null; gap: string | null } {
  const runs = release.step_runs
    .filter((sr) => {
      const step = release.manifest.steps[sr.step_index];
      return sr.kind === "runner" && step?.lane === laneId && !isProbeStep(step);
    })
    .filter((sr) => sr.attempts.length > 0 || sr.resolved)
    .sort((a, b) => (a.finished_at ?? 0) - (b.finished_at ?? 0));
  const last: StepRun | undefined = runs[runs.length - 1];
  if (!last) return { target: null, gap: "no runner step of the lane reported" };
  if (last.resolved) {
    return {
      target: null,
      gap: `${last.id} was resolved by hand by ${last.resolved.actor}; no runner reported after it (this engine cannot reach the lanes' machines: no SSH key)`,
    };
  }
  const result = results
    .filter((a) => a.step_run_id === last.id)
    .sort((a, b) => b.attempt - a.attempt)[0];
  if (!result) return { target: null, gap: `no result of ${last.id} is stored` };
  const images = reportedImages(result.checks);
  return {
    target: {
      source: "runner_report",
      at: result.received_at,
      reached: true,
      running: images.length > 0 ? true : null,
      image: images[images.length - 1] ?? null,
      health: healthOf(result.checks),
      message: `${last.id} attempt ${result.attempt} reported ${result.overall}${images.length > 0 ? ` running ${images[images.length - 1]}` : " (no running image in its checks)"}`,
      step_run_id: last.id,
    },
    gap: null,
  };
}

/** `f` over `xs` with at most `limit` in flight; results in order. */
async function mapBounded<T, U>(
  xs: readonly T[],
  limit: number,
  f: (x: T) => Promise<U>,
): Promise<U[]> {
  const out: U[] = new Array(xs.length);
  let next = 0;
  const worker = async () => {
    while (next < xs.length) {
      const i = next++;
      out[i] = await f(xs[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, xs.length) }, worker));
  return out;
}
